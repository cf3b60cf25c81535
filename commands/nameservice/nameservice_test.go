package nameservice_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/commands/nameservice"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

var root = commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}

// cell is a real master on SQLite with a name server in front of it, both on
// loopback.
type cell struct {
	t    *testing.T
	m    *master.Master
	addr string // the DNS server's
}

func startCell(t *testing.T) *cell {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "events.db"), sqlitestore.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m, err := master.New(ctx, master.Config{Name: "m", Advertise: "127.0.0.1:1", Store: store, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	ns, err := nameservice.New(m, nameservice.Config{Cell: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() { served <- ns.Serve(ctx, "127.0.0.1:0", func(a string) { ready <- a }) }()
	c := &cell{t: t, m: m}
	select {
	case c.addr = <-ready:
	case err := <-served:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		store.Close()
	})
	testkit.Eventually(t, 10*time.Second, "the master leads", func() (bool, string) { return m.Leading(), "not leading" })
	return c
}

func (c *cell) do(cmd commands.Command) {
	c.t.Helper()
	if _, err := c.m.Do(context.Background(), cmd); err != nil {
		c.t.Fatalf("%T: %v", cmd, err)
	}
}

// place puts a pending task on a machine with a port, and reports it running.
func (c *cell) place(user, job string, index int32, machine string, port int32) {
	c.t.Helper()
	var version int64
	c.m.View(func(s *projections.State) { version = s.Machines[machine].Version })
	c.do(commands.PlaceTasks{Meta: root, Placements: []commands.Placement{{
		Task: projections.TaskKey{User: user, Job: job, Index: index}, Machine: machine, MachineVersion: version, Ports: []int32{port}}}})
	c.report(machine)
}

// report tells the master that machine runs exactly the tasks placed on it.
func (c *cell) report(machine string, except ...int32) {
	c.t.Helper()
	rep := commands.ReportAgentState{Meta: root, Machine: machine}
	c.m.View(func(s *projections.State) {
		for _, t := range s.Machines[machine].Tasks() {
			if slices.Contains(except, t.Index) {
				continue
			}
			rep.Tasks = append(rep.Tasks, commands.AgentTask{Task: t.Key(), State: commands.AgentRunning, Pid: 100, SpecVersion: t.SpecVersion})
		}
	})
	c.do(rep)
}

func (c *cell) query(t *testing.T, name string, qtype uint16, network string) *dns.Msg {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	cl := &dns.Client{Net: network, Timeout: 2 * time.Second}
	r, _, err := cl.Exchange(q, c.addr)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], network, err)
	}
	return r
}

func answers(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		h := rr.Header()
		out = append(out, strings.TrimPrefix(rr.String(), h.String()))
	}
	slices.Sort(out)
	return out
}

func TestTasksResolveAndFollowMoves(t *testing.T) {
	c := startCell(t)
	for i, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		c.do(commands.RegisterMachine{Meta: root, Machine: fmt.Sprintf("m%d", i), Address: ip + ":7071",
			Capacity: projections.Resources{CPUMilli: 4000, MemoryBytes: 8 << 30, Ports: 1000}, PortBase: 20000})
	}
	c.do(commands.SubmitJob{Meta: commands.Meta{Actor: commands.Actor{User: "alice"}}, Spec: &events.JobSpec{
		Name: "hello", TaskCount: 3, Command: "/bin/true", Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 8 << 20, Ports: 1}}})
	c.place("alice", "hello", 0, "m0", 20001)
	c.place("alice", "hello", 1, "m1", 20002)
	// Task 2 stays pending.

	r := c.query(t, "0.hello.alice.dev.corral.", dns.TypeA, "udp")
	if r.Rcode != dns.RcodeSuccess || !r.Authoritative || strings.Join(answers(r), ",") != "127.0.0.1" {
		t.Fatalf("A of task 0: %v", r)
	}
	r = c.query(t, "0.HELLO.alice.dev.corral.", dns.TypeSRV, "udp")
	if got := strings.Join(answers(r), ","); got != "0 1 20001 0.hello.alice.dev.corral." {
		t.Fatalf("SRV of task 0: %q", got)
	}
	if len(r.Extra) != 1 || r.Extra[0].(*dns.A).A.String() != "127.0.0.1" {
		t.Fatalf("SRV of task 0: additional %v, want its A", r.Extra)
	}
	r = c.query(t, "hello.alice.dev.corral.", dns.TypeSRV, "udp")
	if got := strings.Join(answers(r), ","); got != "0 1 20001 0.hello.alice.dev.corral.,0 1 20002 1.hello.alice.dev.corral." {
		t.Fatalf("SRV of the job: %q", got)
	}
	// A pending task's name exists but has no records; an unknown one does not exist.
	if r = c.query(t, "2.hello.alice.dev.corral.", dns.TypeA, "udp"); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || len(r.Ns) != 1 {
		t.Fatalf("pending task: %v", r)
	}
	for _, name := range []string{"3.hello.alice.dev.corral.", "web.alice.dev.corral.", "0.hello.bob.dev.corral.", "x.0.hello.alice.dev.corral.", "00.hello.alice.dev.corral."} {
		if r = c.query(t, name, dns.TypeA, "udp"); r.Rcode != dns.RcodeNameError {
			t.Fatalf("%s: rcode %s, want NXDOMAIN", name, dns.RcodeToString[r.Rcode])
		}
	}
	if r = c.query(t, "example.com.", dns.TypeA, "udp"); r.Rcode != dns.RcodeRefused {
		t.Fatalf("outside the zone: rcode %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if r = c.query(t, "dev.corral.", dns.TypeSOA, "tcp"); len(r.Answer) != 1 {
		t.Fatalf("SOA over TCP: %v", r)
	}

	// Task 0 is lost with its machine's report, then runs on m1: the name
	// follows it.
	c.report("m0", 0)
	if r = c.query(t, "0.hello.alice.dev.corral.", dns.TypeA, "udp"); len(r.Answer) != 0 {
		t.Fatalf("lost task still resolves: %v", r)
	}
	c.place("alice", "hello", 0, "m1", 20003)
	r = c.query(t, "0.hello.alice.dev.corral.", dns.TypeSRV, "tcp")
	if got := strings.Join(answers(r), ","); got != "0 1 20003 0.hello.alice.dev.corral." || r.Extra[0].(*dns.A).A.String() != "127.0.0.2" {
		t.Fatalf("SRV of task 0 after the move: %q %v", got, r.Extra)
	}
}

func TestManyTasksTruncateOverUDP(t *testing.T) {
	c := startCell(t)
	c.do(commands.RegisterMachine{Meta: root, Machine: "m0", Address: "127.0.0.1:7071",
		Capacity: projections.Resources{CPUMilli: 64000, MemoryBytes: 64 << 30, Ports: 1000}, PortBase: 20000})
	const n = 60
	c.do(commands.SubmitJob{Meta: commands.Meta{Actor: commands.Actor{User: "alice"}}, Spec: &events.JobSpec{
		Name: "wide", TaskCount: n, Command: "/bin/true", Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 8 << 20, Ports: 1}}})
	var version int64
	c.m.View(func(s *projections.State) { version = s.Machines["m0"].Version })
	place := commands.PlaceTasks{Meta: root}
	for i := int32(0); i < n; i++ {
		place.Placements = append(place.Placements, commands.Placement{Task: projections.TaskKey{User: "alice", Job: "wide", Index: i},
			Machine: "m0", MachineVersion: version, Ports: []int32{20000 + i}})
	}
	c.do(place)
	c.report("m0")
	r := c.query(t, "wide.alice.dev.corral.", dns.TypeSRV, "udp")
	if !r.Truncated || len(r.Answer) >= n {
		t.Fatalf("UDP answer of %d records, truncated %v", len(r.Answer), r.Truncated)
	}
	r = c.query(t, "wide.alice.dev.corral.", dns.TypeSRV, "tcp")
	if r.Truncated || len(r.Answer) != n {
		t.Fatalf("TCP answer of %d records, truncated %v; want %d", len(r.Answer), r.Truncated, n)
	}
}

func TestHostNamesGetCNAMEs(t *testing.T) {
	c := startCell(t)
	c.do(commands.RegisterMachine{Meta: root, Machine: "agent1", Address: "agent1.example:7071",
		Capacity: projections.Resources{CPUMilli: 4000, MemoryBytes: 8 << 30, Ports: 100}})
	c.do(commands.SubmitJob{Meta: commands.Meta{Actor: commands.Actor{User: "alice"}}, Spec: &events.JobSpec{
		Name: "web", TaskCount: 1, Command: "/bin/true", Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 8 << 20, Ports: 1}}})
	c.place("alice", "web", 0, "agent1", 20005)
	r := c.query(t, "0.web.alice.dev.corral.", dns.TypeA, "udp")
	if got := strings.Join(answers(r), ","); got != "agent1.example." {
		t.Fatalf("A of a task on a named host: %q", got)
	}
}

func TestConfigIsChecked(t *testing.T) {
	if _, err := nameservice.New(nil, nameservice.Config{Cell: "dev"}); err == nil || !strings.Contains(err.Error(), "viewer") {
		t.Fatalf("nil viewer: %v", err)
	}
	if _, err := nameservice.New(&master.Master{}, nameservice.Config{Cell: "Dev.X"}); err == nil || !strings.Contains(err.Error(), "config.cell") {
		t.Fatalf("bad cell: %v", err)
	}
	if got := nameservice.TaskName(3, "web", "alice", "dev"); got != "3.web.alice.dev.corral." {
		t.Fatalf("TaskName = %q", got)
	}
}
