package commands

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

var (
	t0    = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	root  = Meta{Actor: Actor{User: "root", Admin: true}, RequestID: "r"}
	alice = Meta{Actor: Actor{User: "alice"}, RequestID: "a"}
	bob   = Meta{Actor: Actor{User: "bob"}, RequestID: "b"}
)

const gib = int64(1) << 30

// cell is a state with the loop the master runs: Decide, then Apply.
type cell struct {
	t   *testing.T
	s   *projections.State
	now time.Time
}

func newCell(t *testing.T) *cell {
	t.Helper()
	return &cell{t: t, s: projections.New(), now: t0}
}

// do decides cmd, which must be accepted, applies its events and returns them.
func (c *cell) do(cmd Command) []events.Event {
	c.t.Helper()
	evs, err := Decide(c.s, cmd, FixedClock(c.now))
	if err != nil {
		c.t.Fatalf("%T: %v", cmd, err)
	}
	c.apply(evs)
	return evs
}

func (c *cell) apply(evs []events.Event) {
	c.t.Helper()
	for _, e := range evs {
		if err := projections.Apply(c.s, e); err != nil {
			c.t.Fatal(err)
		}
	}
	if c.s.Skipped != 0 {
		c.t.Fatalf("%d events skipped by Apply: a decided event did not fit the state", c.s.Skipped)
	}
	c.now = c.now.Add(time.Second)
}

// refused decides cmd, which must be refused with code, and returns the error.
func (c *cell) refused(cmd Command, code Code) *Error {
	c.t.Helper()
	evs, err := Decide(c.s, cmd, FixedClock(c.now))
	if err == nil {
		c.t.Fatalf("%T accepted, want %v; events:\n%s", cmd, code, dump(evs))
	}
	if len(evs) != 0 {
		c.t.Fatalf("%T refused and still emitted %d events", cmd, len(evs))
	}
	var e *Error
	if !errors.As(err, &e) {
		c.t.Fatalf("%T: error %v is not a *commands.Error", cmd, err)
	}
	if e.Code != code {
		c.t.Fatalf("%T: code %v, want %v: %v", cmd, e.Code, code, e)
	}
	return e
}

func dump(evs []events.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s %s {%s}\n", e.Type, e.Stream, prototext.MarshalOptions{}.Format(e.Data))
	}
	return b.String()
}

// expect is one wanted event: its stream and payload.
type expect struct {
	stream string
	data   events.Payload
}

func checkEvents(t *testing.T, got []events.Event, want []expect) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = got[i].Stream == want[i].stream && proto.Equal(got[i].Data, want[i].data)
	}
	if !ok {
		var w strings.Builder
		for _, e := range want {
			fmt.Fprintf(&w, "  %s %s {%s}\n", events.TypeOf(e.data), e.stream, prototext.MarshalOptions{}.Format(e.data))
		}
		t.Fatalf("events:\n%swant:\n%s", dump(got), w.String())
	}
}

func types(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func res(cpu int64, mem int64) *events.Resources {
	return &events.Resources{CpuMilli: cpu, MemoryBytes: mem}
}

func spec(name string, prio int32, count int32) *events.JobSpec {
	return &events.JobSpec{Name: name, Priority: prio, TaskCount: count, Command: "/bin/server",
		Resources: res(1000, gib), Labels: map[string]string{"team": "web"}}
}

// machines registers n machines of 8 cores and 32GiB, m0 ... m(n-1).
func (c *cell) machines(n int) {
	c.t.Helper()
	for i := range n {
		c.do(RegisterMachine{Meta: root, Machine: fmt.Sprintf("m%d", i), Address: fmt.Sprintf("10.0.0.%d:7000", i),
			Capacity:   projections.Resources{CPUMilli: 8000, MemoryBytes: 32 * gib, DiskBytes: 100 * gib, Ports: 100},
			Attributes: map[string]string{"arch": "amd64", "rack": fmt.Sprintf("r%d", i%2)}})
	}
}

func (c *cell) quota(user, band string, cpu, mem int64) {
	c.t.Helper()
	c.do(SetQuota{Meta: root, User: user, Band: band, Resources: projections.Resources{CPUMilli: cpu, MemoryBytes: mem, DiskBytes: 10 * gib, Ports: 20}})
}

// place places task index of job on machine at its current version.
func (c *cell) place(user, job string, index int32, machine string, preempt ...projections.TaskKey) []events.Event {
	c.t.Helper()
	m := c.s.Machines[machine]
	return c.do(PlaceTasks{Meta: root, Placements: []Placement{{Task: projections.TaskKey{User: user, Job: job, Index: index},
		Machine: machine, MachineVersion: m.Version, Preempt: preempt}}})
}

// start reports every scheduled task on machine as running.
func (c *cell) start(machine string) []events.Event {
	c.t.Helper()
	return c.do(ReportAgentState{Meta: root, Machine: machine, Tasks: c.running(machine)})
}

// running is the agent's report of every task placed on machine, running.
func (c *cell) running(machine string) []AgentTask {
	var out []AgentTask
	for _, t := range c.s.Machines[machine].Tasks() {
		pid := t.Pid
		if pid == 0 {
			pid = int64(1000 + t.Index)
		}
		out = append(out, AgentTask{Task: t.Key(), State: AgentRunning, Pid: pid, SpecVersion: t.SpecVersion})
	}
	return out
}

func key(user, job string, index int32) projections.TaskKey {
	return projections.TaskKey{User: user, Job: job, Index: index}
}

func (c *cell) task(user, job string, index int32) *projections.Task {
	c.t.Helper()
	t := c.s.Task(user, job, index)
	if t == nil {
		c.t.Fatalf("no task %s/%s/%d", user, job, index)
	}
	return t
}
