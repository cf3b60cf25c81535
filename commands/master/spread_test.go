package master

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/commandtest"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

var (
	cellAdmin = commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}
	asAlice   = commands.Meta{Actor: commands.Actor{User: "alice"}}
)

// spreadCell is a cell of 9 machines in 3 racks, through the commands the
// master runs, with the scheduling core the master runs.
type spreadCell struct {
	t    *testing.T
	s    *projections.State
	now  time.Time
	core *SchedulingCore
}

func newSpreadCell(t *testing.T) *spreadCell {
	c := &spreadCell{t: t, s: projections.New(), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), core: NewSchedulingCore(SchedulerConfig{})}
	for i := range 9 {
		c.do(commands.RegisterMachine{Meta: cellAdmin, Machine: fmt.Sprintf("m%d", i), Address: fmt.Sprintf("10.0.0.%d:7000", i),
			Capacity:   projections.Resources{CPUMilli: 16000, MemoryBytes: 64 << 30, DiskBytes: 100 << 30, Ports: 100},
			Attributes: map[string]string{"rack": fmt.Sprintf("r%d", i/3)}})
	}
	return c
}

func (c *spreadCell) do(cmd commands.Command) []events.Event {
	c.t.Helper()
	c.now = c.now.Add(time.Second)
	return commandtest.Do(c.t, c.s, cmd, c.now)
}

// pass runs the master's scheduling pass and places what it proposes.
func (c *spreadCell) pass() {
	c.t.Helper()
	cell, position, _ := c.core.Input(c.s, c.now)
	if cell == nil {
		return
	}
	if _, cmd := c.core.Plan(cell, position); cmd != nil {
		c.do(*cmd)
	}
}

// byRack counts the job's live tasks per rack, and per machine.
func (c *spreadCell) byRack(job string) (racks map[string]int, machines map[string]int) {
	racks, machines = map[string]int{}, map[string]int{}
	for _, t := range c.s.Job("alice", job).Tasks {
		if t != nil && t.Live() {
			racks[c.s.Machines[t.Machine].Attributes["rack"]]++
			machines[t.Machine]++
		}
	}
	return racks, machines
}

// A 6-task job spread by rack lands 2-2-2 on 3 racks, whatever else the
// cell runs; losing a rack loses its third, and the replacements spread
// over the racks left.
func TestSpreadAcrossRacks(t *testing.T) {
	c := newSpreadCell(t)
	// Load that pulls packing toward rack r0: a big job placed first.
	c.do(commands.SubmitJob{Meta: asAlice, Spec: &events.JobSpec{Name: "filler", TaskCount: 3, Command: "/bin/x", Priority: 0,
		Resources:   &events.Resources{CpuMilli: 8000, MemoryBytes: 8 << 30},
		Constraints: []*events.Constraint{{Attribute: "rack", Op: "=", Values: []string{"r0"}}}}})
	c.pass()
	c.do(commands.SubmitJob{Meta: asAlice, Spec: &events.JobSpec{Name: "web", TaskCount: 6, Command: "/bin/web", Priority: 0,
		Resources: &events.Resources{CpuMilli: 500, MemoryBytes: 1 << 30}, Spread: []string{"rack"}}})
	c.pass()
	racks, _ := c.byRack("web")
	if racks["r0"] != 2 || racks["r1"] != 2 || racks["r2"] != 2 {
		t.Fatalf("6 tasks spread by rack over 3 racks: %v, want 2-2-2", racks)
	}
	// Rack r0 goes: its machines stop answering.
	for i := range 3 {
		c.do(commands.ReportAgentState{Meta: cellAdmin, Machine: fmt.Sprintf("m%d", i), Unreachable: true, MissedPolls: 5})
	}
	racks, _ = c.byRack("web")
	if racks["r1"]+racks["r2"] != 4 {
		t.Fatalf("after losing rack r0: %v, want the other racks' 4 of 6 kept", racks)
	}
	c.core.Retry()
	c.pass()
	racks, _ = c.byRack("web")
	if racks["r1"] != 3 || racks["r2"] != 3 {
		t.Fatalf("the lost tasks' replacements: %v, want 3-3 on the racks left", racks)
	}
}

// distinct_hosts never puts two tasks of a job on one machine: with more
// tasks than machines the rest wait, and why says so.
func TestDistinctHosts(t *testing.T) {
	c := newSpreadCell(t)
	c.do(commands.SubmitJob{Meta: asAlice, Spec: &events.JobSpec{Name: "db", TaskCount: 11, Command: "/bin/db", Priority: 0,
		Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 1 << 28}, DistinctHosts: true}})
	c.pass()
	_, machines := c.byRack("db")
	if len(machines) != 9 {
		t.Fatalf("distinct hosts: %v, want one task on each of 9 machines", machines)
	}
	for m, n := range machines {
		if n != 1 {
			t.Fatalf("%d tasks of db on %s", n, m)
		}
	}
	c.core.Retry()
	cell, position, _ := c.core.Input(c.s, c.now)
	plan, cmd := c.core.Plan(cell, position)
	if cmd != nil {
		t.Fatalf("a second pass placed %d more", len(cmd.Placements))
	}
	why := fmt.Sprint(plan.Pending)
	if !strings.Contains(why, "distinct_hosts") {
		t.Fatalf("why pending does not name distinct_hosts: %s", why)
	}
	// The applier holds the same rule: a placement beside a task of the
	// job is refused.
	pending := c.s.Job("alice", "db").Task(9)
	m := c.s.Machines["m0"]
	_, err := commandtest.Try(c.s, commands.PlaceTasks{Meta: cellAdmin, Placements: []commands.Placement{{Task: pending.Key(), Machine: "m0", MachineVersion: m.Version}}}, c.now)
	if err == nil || !strings.Contains(err.Error(), "distinct_hosts") {
		t.Fatalf("PlaceTasks beside a task of the job: %v", err)
	}
}

// why says when a job's tasks sit more crowded than spreading by default
// wants, naming the machine, and says nothing for a job that packs or is
// spread.
func TestWhySaysWhenSpreadIsNotMet(t *testing.T) {
	c := newSpreadCell(t)
	explain := NewExplanations()
	placeOn := func(job string, machines ...string) {
		t.Helper()
		var ps []commands.Placement
		for i, m := range machines {
			ps = append(ps, commands.Placement{Task: c.s.Job("alice", job).Task(int32(i)).Key(), Machine: m, MachineVersion: c.s.Machines[m].Version})
		}
		c.do(commands.PlaceTasks{Meta: cellAdmin, Placements: ps})
	}
	for _, name := range []string{"web", "batch", "api"} {
		c.do(commands.SubmitJob{Meta: asAlice, Spec: &events.JobSpec{Name: name, TaskCount: 2, Command: "/bin/x",
			Resources: &events.Resources{CpuMilli: 500, MemoryBytes: 1 << 30}, Pack: name == "batch"}})
	}
	placeOn("web", "m0", "m0")
	placeOn("batch", "m1", "m1")
	placeOn("api", "m2", "m3")
	got := explain.Explain(c.s, c.s.Job("alice", "web")).Spread
	if want := "spread not met: 2 of 2 tasks on m0, where spreading by default wants at most 1 a machine (9 machines up)"; !strings.HasPrefix(got, want) {
		t.Errorf("web on m0 twice: spread %q, want it to start %q", got, want)
	}
	for _, job := range []string{"batch", "api"} {
		if got := explain.Explain(c.s, c.s.Job("alice", job)).Spread; got != "" {
			t.Errorf("%s: spread %q, want nothing said", job, got)
		}
	}
}
