package ops_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/ops"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/internal/pgtest"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

func TestDoctorHealthyCell(t *testing.T) {
	store, path := openSQLite(t)
	c := startCell(t, store, 2)
	c.waitMachines(2)
	rep := ops.Doctor(context.Background(), ops.DoctorConfig{Masters: []string{c.addr}, User: "root", Store: path,
		DataDir: t.TempDir(), MinFreeBytes: 1 << 20, MinFreeRatio: 0.001})
	var out strings.Builder
	rep.Write(&out)
	t.Logf("corral doctor:\n%s", out.String())
	if !rep.OK() {
		t.Fatalf("a healthy cell fails the doctor")
	}
	for check, want := range map[string]string{
		"masters":      "1 master(s) answer",
		"store":        "the event log answers",
		"migrations":   "the schema is at migration 2, the latest",
		"leader":       "master1 leads (epoch 1) at " + c.addr + ", since ",
		"agents":       "2 of 2 machines up",
		"clocks":       "the clocks of 2 agent(s) are within 1s",
		"infrastore":   "the Infrastore has ingested position",
		"disk":         "free of",
		"tasks":        "none of 0 live task(s) is crash-looping or unhealthy",
		"machine loss": "not held",
	} {
		f, ok := rep.Find(check)
		if !ok {
			t.Errorf("no %s check", check)
			continue
		}
		if f.Severity != ops.OK || !strings.Contains(f.Summary, want) {
			t.Errorf("%s: %s %q, want ok and %q", check, f.Severity, f.Summary, want)
		}
	}
	// The test agents run without cgroups: said, with the fix, but not a
	// failure.
	if f, _ := rep.Find("cgroups"); f.Severity != ops.Warn || !strings.Contains(f.Summary, "2 of 2 agents run without cgroups") || f.Fix == "" {
		t.Errorf("cgroups: %+v", f)
	}
	if f, _ := rep.Find("agents"); len(f.Details) != 2 || !strings.Contains(f.Details[0], "last poll") {
		t.Errorf("agents details: %q", f.Details)
	}
	if !strings.Contains(out.String(), "Nothing is wrong") {
		t.Errorf("the report's last line:\n%s", out.String())
	}
}

// Three machines of five that never answer (their addresses refuse) are
// more than the link takes for the machines' fault: it holds machine
// loss, marks none down, and the doctor, the metric and the log say so.
func TestDoctorSaysTheLinkHoldsMachineLoss(t *testing.T) {
	store, path := openSQLite(t)
	c := startCell(t, store, 2)
	c.waitMachines(2)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := dead.Addr().String()
	dead.Close() // refuses from now on
	for i := range 3 {
		if _, err := c.m.Do(context.Background(), commands.RegisterMachine{Meta: commands.Meta{Actor: commands.Actor{User: "root", Admin: true}},
			Machine: fmt.Sprint("gone", i), Address: addr, Capacity: projections.Resources{CPUMilli: 1000, MemoryBytes: 1 << 30}}); err != nil {
			t.Fatal(err)
		}
	}
	var f ops.Finding
	testkit.Eventually(t, 20*time.Second, "the doctor says machine loss is held", func() (bool, string) {
		rep := ops.Doctor(context.Background(), ops.DoctorConfig{Masters: []string{c.addr}, User: "root", Store: path,
			DataDir: t.TempDir(), MinFreeBytes: 1 << 20, MinFreeRatio: 0.001})
		f, _ = rep.Find("machine loss")
		return f.Severity == ops.Fail, fmt.Sprintf("%+v", f)
	})
	if !strings.Contains(f.Summary, "3 of 5 machines missed their polls at once") || f.Fix == "" {
		t.Errorf("machine loss finding: %+v", f)
	}
	if v := scrape(t, c.web).sum("corral_link_machine_loss_held"); v != 1 {
		t.Errorf("corral_link_machine_loss_held = %v while held", v)
	}
	// Held well past what marks one machine down (3 polls of 200 ms and
	// 1.2 s of silence): none is, watched throughout.
	down := ""
	testkit.Poll(3*time.Second, func() bool {
		ms, err := c.client.ListMachines(as("root"), &apipb.ListMachinesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms.Machines {
			if m.State != "up" {
				down = m.Name + " is " + m.State
				return true
			}
		}
		return false
	})
	if down != "" {
		t.Errorf("%s during the hold", down)
	}
	evs, err := store.Read(context.Background(), 1, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, e := range evs {
		if e.Type == "MachineLossHeld" {
			held++
		}
	}
	if held != 1 {
		t.Errorf("%d MachineLossHeld events, want the hold's start", held)
	}
}

// A task that fails again and again is flagged, with its restarts and why,
// as a warning: the cell is not at fault, but it is what to look at first.
func TestDoctorFlagsCrashLoopingTasks(t *testing.T) {
	store, path := openSQLite(t)
	c := startCell(t, store, 1)
	c.waitMachines(1)
	failing := &events.JobSpec{Name: "crasher", Priority: 0, TaskCount: 1, Command: "/bin/sh", Args: []string{"-c", "echo no config >&2; exit 3"},
		Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 32 << 20},
		Restart:   &events.RestartPolicy{Mode: "always", BackoffInitialMs: 50, BackoffMaxMs: 200}}
	fine := &events.JobSpec{Name: "sleeper", Priority: 0, TaskCount: 1, Command: "/bin/sh", Args: []string{"-c", "exec sleep 300"},
		Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 32 << 20}}
	// Runs, but serves nothing on the port its check asks: unhealthy, and
	// allowed enough failures to stay so for the test.
	deaf := &events.JobSpec{Name: "deaf", Priority: 0, TaskCount: 1, Command: "/bin/sh", Args: []string{"-c", "exec sleep 300"},
		Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 32 << 20, Ports: 1}, PortNames: []string{"http"},
		HealthCheck: &events.HealthCheck{Path: "/", PortName: "http", PeriodMs: 200, TimeoutMs: 100, FailuresAllowed: 10000}}
	for i, spec := range []*events.JobSpec{failing, fine, deaf} {
		if _, err := c.client.Submit(as("alice"), &apipb.SubmitRequest{RequestId: fmt.Sprint("s", i), Spec: spec}); err != nil {
			t.Fatal(err)
		}
	}
	var f ops.Finding
	testkit.Eventually(t, 30*time.Second, "the doctor flags the crash loop", func() (bool, string) {
		rep := ops.Doctor(context.Background(), ops.DoctorConfig{Masters: []string{c.addr}, User: "root", Store: path,
			DataDir: t.TempDir(), MinFreeBytes: 1 << 20, MinFreeRatio: 0.001})
		f, _ = rep.Find("tasks")
		return f.Severity == ops.Warn && len(f.Details) == 2, fmt.Sprintf("%+v", f)
	})
	t.Logf("tasks: %s %v", f.Summary, f.Details)
	if f.Summary != "1 of 3 live task(s) crash-looping; 1 running task(s) failing their health check" || len(f.Details) != 2 ||
		!strings.HasPrefix(f.Details[0], "alice/crasher/0: ") || !strings.Contains(f.Details[0], "exit") ||
		!strings.HasPrefix(f.Details[1], "alice/deaf/0 on ") || !strings.Contains(f.Details[1], "connection refused") || f.Fix == "" {
		t.Errorf("tasks finding: %+v", f)
	}
}

// A cell on PostgreSQL whose server stops: the doctor says the event log
// is unreachable, from the masters and from here, and how to fix it; the
// master's /readyz and corral_store_up say so too. The server "stops" as
// a TCP proxy in front of it closing: connections drop and the address
// refuses new ones, as a stopped server's would.
func TestDoctorStoreStopped(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	px := newTCPProxy(t, dbURL)
	ctx := context.Background()
	store, err := pgstore.Open(ctx, px.url, pgstore.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c := startCell(t, store, 1)
	c.waitMachines(1)
	cfg := ops.DoctorConfig{Masters: []string{c.addr}, User: "root", Store: px.url, Timeout: 3 * time.Second}
	if rep := ops.Doctor(ctx, cfg); !rep.OK() {
		var out strings.Builder
		rep.Write(&out)
		t.Fatalf("before the stop, the doctor finds:\n%s", out.String())
	}

	px.stop()
	rep := ops.Doctor(ctx, cfg)
	var out strings.Builder
	rep.Write(&out)
	t.Logf("corral doctor:\n%s", out.String())
	if rep.OK() {
		t.Fatal("the doctor finds nothing wrong with the store stopped")
	}
	f, _ := rep.Find("store")
	if f.Severity != ops.Fail || !strings.Contains(f.Summary, "the event log is unreachable from master(s) master1") ||
		!strings.Contains(f.Fix, "start the database") {
		t.Errorf("store: %+v", f)
	}
	if !strings.Contains(strings.Join(f.Details, "\n"), "the doctor cannot read "+px.url) {
		t.Errorf("store details: %q", f.Details)
	}
	if f, _ := rep.Find("migrations"); f.Severity != ops.Fail || !strings.Contains(f.Summary, "unreachable") {
		t.Errorf("migrations: %+v", f)
	}
	if f, _ := rep.Find("masters"); f.Severity != ops.OK {
		t.Errorf("masters (the master process still answers): %+v", f)
	}
	if !strings.Contains(out.String(), "checks failed") || !strings.Contains(out.String(), "fix: start the database") {
		t.Errorf("the report:\n%s", out.String())
	}

	code, body := get(t, c.web, "/readyz")
	if code != 503 || !strings.Contains(body, "[-]store: the event store does not answer") {
		t.Errorf("/readyz with the store stopped: %d %s", code, body)
	}
	if up := scrape(t, c.web).sum("corral_store_up"); up != 0 {
		t.Errorf("corral_store_up = %v with the store stopped", up)
	}
}

// tcpProxy forwards a PostgreSQL URL's connections; stop closes them all
// and stops listening.
type tcpProxy struct {
	url    string
	lis    net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

func newTCPProxy(t *testing.T, dbURL string) *tcpProxy {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{lis: lis, target: u.Host, conns: map[net.Conn]bool{}}
	u.Host = lis.Addr().String()
	p.url = u.String()
	go p.serve()
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *tcpProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = true
	}
	return true
}

func (p *tcpProxy) handle(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		return
	}
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.lis.Close()
	for c := range p.conns {
		c.Close()
	}
}
