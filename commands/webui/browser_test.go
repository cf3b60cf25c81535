package webui_test

// The browser test is the only file of this package that links DuckDB (the
// Infrastore answers the SQL console); the package under test does not.

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/commands/webui"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/infrastore"
)

// Screenshots go to t.ArtifactDir() (kept with `go test -artifacts`), or
// to $CORRAL_SCREENSHOTS_DIR when set. CORRAL_UPDATE_SCREENSHOTS=1 also
// writes the job page to docs/job-page.png for the README.

// chromium finds the browser. Under CI=true a missing browser fails the
// test: .ci/run installs Debian's chromium.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on $PATH: install Debian's chromium package (apt-get install -y chromium)")
	}
	t.Skip("no chromium on $PATH (apt-get install -y chromium); CI=true makes this a failure")
	return ""
}

func TestInBrowser(t *testing.T) {
	browser := chromium(t)
	shots := os.Getenv("CORRAL_SCREENSHOTS_DIR")
	if shots == "" {
		shots = t.ArtifactDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	c := startBrowserCell(t)
	srv := httptest.NewServer(c.ui)
	t.Cleanup(srv.Close)

	if _, err := c.svc.SetQuota(as("root"), &apipb.SetQuotaRequest{RequestId: "quota", User: "alice", Band: "batch",
		Resources: &events.Resources{CpuMilli: 100_000, MemoryBytes: 1 << 40, DiskBytes: 1 << 40, Ports: 1000}}); err != nil {
		t.Fatal(err)
	}
	// Two jobs: hello runs, unschedulable asks for more memory than any
	// machine has.
	loop := []string{"-c", "echo hello from task $CORRAL_TASK_INDEX; while true; do sleep 1; done"}
	for _, spec := range []*events.JobSpec{
		{Name: "hello", Priority: 4, TaskCount: 5, Command: "/bin/sh", Args: loop, Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 32 << 20},
			Labels: map[string]string{"team": "demo"}},
		{Name: "unschedulable", Priority: 4, TaskCount: 2, Command: "/bin/sh", Args: loop, Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 30}},
	} {
		if _, err := c.svc.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "submit-" + spec.Name, Spec: spec}); err != nil {
			t.Fatal(err)
		}
	}

	ctx := newBrowser(t, browser)
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// until reloads the page until cond holds.
	until := func(what string, timeout time.Duration, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		last := ""
		for {
			ok, msg := cond()
			if ok {
				return
			}
			last = msg
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
			}
			time.Sleep(300 * time.Millisecond)
			run("reload", chromedp.Reload())
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	eval := func(what, js string) any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}

	// The jobs page, by keyboard: the first Tab reaches the skip link.
	run("jobs page", chromedp.Navigate(srv.URL+"/jobs"), chromedp.WaitVisible(chromedp.CSS(`a[href="/jobs/alice/hello"]`)))
	run("tab", chromedp.KeyEvent(kb.Tab))
	if focused := eval("focus", `document.activeElement.className`); focused != "skip" {
		t.Errorf("the first Tab focuses %q, want the skip link", focused)
	}
	shot("jobs")

	// Follow the link to hello and see its five tasks running.
	run("follow hello", chromedp.Click(chromedp.CSS(`a[href="/jobs/alice/hello"]`)), chromedp.WaitVisible(chromedp.CSS(`#tasks`)))
	until("hello's 5 tasks running", 40*time.Second, func() (bool, string) {
		states, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#tasks tbody tr td:nth-child(2)')).map(td => td.textContent.trim())`))
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, s := range states {
			if s == "running" {
				running++
			}
		}
		return running == 5 && len(states) == 5, fmt.Sprint(states)
	})
	// And their memory measured, for a screenshot worth showing.
	until("hello's usage reported", 20*time.Second, func() (bool, string) {
		mem, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#tasks tbody tr td:nth-child(9)')).map(td => td.textContent.trim())`))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mem {
			if strings.HasPrefix(m, "0 /") {
				return false, fmt.Sprint(mem)
			}
		}
		return len(mem) == 5, fmt.Sprint(mem)
	})
	if h1 := text("h1"); h1 != "Job alice/hello" {
		t.Errorf("job page heading %q", h1)
	}
	shot("job")
	if os.Getenv("CORRAL_UPDATE_SCREENSHOTS") == "1" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "job-page.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A task's page: its history says where it was scheduled; its logs
	// say the agent has no log RPC.
	run("task page", chromedp.Click(chromedp.CSS(`a[href="/jobs/alice/hello/tasks/0"]`)), chromedp.WaitVisible(chromedp.CSS(`#usage-h`)))
	until("task 0's usage charted", 20*time.Second, func() (bool, string) {
		n := eval("usage lines", `document.querySelectorAll('svg polyline.usage').length`)
		return n == 2.0, fmt.Sprintf("%v usage lines", n)
	})
	if h := text("#history tbody"); !strings.Contains(h, "TaskScheduled") || !strings.Contains(h, "TaskStarted") {
		t.Errorf("task history: %s", h)
	}
	shot("task")

	// unschedulable says why it waits.
	run("unschedulable", chromedp.Navigate(srv.URL+"/jobs/alice/unschedulable"), chromedp.WaitVisible(chromedp.CSS(`#why-h`)))
	until("the why-pending explanation", 20*time.Second, func() (bool, string) {
		n := eval("classes", `document.querySelectorAll('.why-class').length`)
		s := text(".why")
		return n != 0.0 && strings.Contains(s, "memory"), s
	})
	if s := text(".why"); !strings.Contains(s, "What would help") {
		t.Errorf("the explanation has no hint: %s", s)
	}
	shot("unschedulable")

	// The SQL console, typed into and submitted with the keyboard.
	run("sql page", chromedp.Navigate(srv.URL+"/sql"), chromedp.WaitVisible(chromedp.CSS(`#q`)),
		chromedp.SendKeys(chromedp.CSS(`#q`), "SELECT count(*) FROM task_events"),
		chromedp.Click(chromedp.CSS(`#run`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
	count := text(`#result tbody td`)
	n, err := strconv.Atoi(strings.TrimSpace(count))
	if err != nil || n < 5 {
		t.Errorf("SELECT count(*) FROM task_events shows %q, want a count of at least hello's 5 submissions", count)
	}
	csv, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#csv`), "value"))
	if err != nil || !csv.Exists || csv.Value != "csv" {
		t.Errorf("no CSV download button: %+v %v", csv, err)
	}
	shot("sql")

	// The cell page, and the events page receiving live events.
	run("cell page", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#alloc-h`)))
	if s := text(".stats"); !regexp.MustCompile(`Machines up\s*2`).MatchString(s) {
		t.Errorf("cell summary: %s", s)
	}
	shot("cell")
	run("machine page", chromedp.Click(chromedp.CSS(`a[href="/machines/m0"]`)), chromedp.WaitVisible(chromedp.CSS(`#cap-h`)))
	shot("machine")
	run("events page", chromedp.Navigate(srv.URL+"/events"), chromedp.WaitVisible(chromedp.CSS(`#events`)))
	// Usage windows arrive every second: the stream brings them.
	waitText(t, ctx, "#live-status", "since the page loaded", 20*time.Second)
	shot("events")
	t.Logf("screenshots in %s", shots)
}

// waitText waits until the element's text contains want, without reloading.
func waitText(t *testing.T, ctx context.Context, sel, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var s string
	for time.Now().Before(deadline) {
		var err error
		if s, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel))); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(s, want) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %q, want %q within %s", sel, s, want, timeout)
}

// newBrowser starts headless Chromium with a fresh profile and nothing
// that reaches the network on its own.
func newBrowser(t *testing.T, path string) context.Context {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("password-store", "basic"),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

func as(user string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(master.UserHeader, user))
}

// browserCell is a whole cell in this process: a master leading with its
// scheduler loop and agent link, two real agents running real processes,
// an Infrastore tailing the log, and the UI.
type browserCell struct {
	svc *master.Service
	ui  *webui.Handler
}

func startBrowserCell(t *testing.T) *browserCell {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "events.db"), sqlitestore.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	is, err := infrastore.Open(ctx, filepath.Join(t.TempDir(), "infra.duckdb"), infrastore.Options{Threads: 1, MemoryLimit: "512MB"})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	expl := master.NewExplanations()
	m, err := master.New(ctx, master.Config{Name: "master1", Advertise: lis.Addr().String(), Store: store, Logger: quiet, Admins: []string{"root"},
		OnLeading: []func(context.Context, *master.Master){
			master.SchedulerLoop(master.SchedulerConfig{Interval: 50 * time.Millisecond, Explanations: expl}),
			master.Link(master.LinkConfig{Cell: "test", Interval: 300 * time.Millisecond, MissedPolls: 3, UsageWindow: time.Second, StopGrace: 2 * time.Second}),
		}})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	svc := master.NewService(m)
	svc.Explain = expl.Explain
	svc.Analytics = infraAnalytics{is}
	svc.Register(g)
	master.NewAgentRegistry(m, "test", 300*time.Millisecond).Attach(g)
	go g.Serve(lis)
	done := make(chan struct{}, 8)
	go func() { m.Run(ctx); done <- struct{}{} }()
	go func() { is.Run(ctx, store); done <- struct{}{} }()
	for i, name := range []string{"m0", "m1"} {
		dir := filepath.Join(t.TempDir(), name)
		go func() {
			err := agent.Run(ctx, agent.Config{Name: name, MasterAddr: lis.Addr().String(), ListenAddr: "127.0.0.1:0", DataDir: dir,
				Capacity:  &events.Resources{CpuMilli: 2000, MemoryBytes: 2 << 30, DiskBytes: 10 << 30, Ports: 100},
				PortFirst: int32(32000 + 200*i), PortLast: int32(32000 + 200*i + 99), Cgroups: "sampling", Logger: quiet,
				Attributes: map[string]string{"rack": "r" + strconv.Itoa(i)}, SampleInterval: 200 * time.Millisecond,
				ReregisterAfter: 2 * time.Second, StopTasksOnExit: true, DefaultGrace: time.Second})
			if err != nil && ctx.Err() == nil {
				t.Errorf("agent %s: %v", name, err)
			}
			done <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range 4 {
			<-done
		}
		g.Stop()
		is.Close()
		store.Close()
	})
	ui, err := webui.New(webui.Config{API: svc, Cell: m, Streams: store, User: "alice", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ms, err := svc.ListMachines(as("alice"), &apipb.ListMachinesRequest{})
		if err == nil && len(ms.Machines) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two machines registered: %v %v", ms, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &browserCell{svc: svc, ui: ui}
}

// infraAnalytics answers the API's Query from an Infrastore, as the corral
// command's adapter does; bills are not needed here.
type infraAnalytics struct{ is *infrastore.Infrastore }

func (a infraAnalytics) Query(ctx context.Context, r *apipb.QueryRequest) (*apipb.QueryReply, error) {
	res, err := a.is.Query(ctx, r.Sql, time.Duration(r.TimeoutMs)*time.Millisecond)
	switch {
	case errors.Is(err, infrastore.ErrQueryRefused), errors.Is(err, infrastore.ErrInvalid):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	var buf bytes.Buffer
	if err := res.WriteCSV(&buf); err != nil {
		return nil, err
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		return nil, err
	}
	out := &apipb.QueryReply{Columns: res.Columns, Truncated: res.Truncated}
	out.Position, _ = a.is.Position(ctx)
	for i, row := range res.Rows {
		qr := &apipb.QueryRow{Values: recs[i+1], Null: make([]bool, len(row))}
		for j, v := range row {
			if v == nil {
				qr.Null[j], qr.Values[j] = true, "NULL"
			}
		}
		out.Rows = append(out.Rows, qr)
	}
	return out, nil
}

func (infraAnalytics) Bill(context.Context, *apipb.BillRequest) (*apipb.BillReply, error) {
	return nil, status.Error(codes.Unimplemented, "bills are not served in this test")
}
