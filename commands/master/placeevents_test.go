package master

import (
	"slices"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// A pass's placement becomes events only through the shipped path: the
// master turns the plan into PlaceTasks and the handler records the
// eviction naming the preemptor, then the placement with the ports, the
// victims and the machine version the pass saw.
func TestPlacementEventsComeFromThePlan(t *testing.T) {
	c := &spreadCell{t: t, s: projections.New(), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), core: NewSchedulingCore(SchedulerConfig{})}
	c.do(commands.RegisterMachine{Meta: cellAdmin, Machine: "m1", Address: "10.0.0.1:7000",
		Capacity: projections.Resources{CPUMilli: 8000, MemoryBytes: 64 << 30, DiskBytes: 100 << 30, Ports: 100}})
	c.do(commands.SubmitJob{Meta: asAlice, Spec: &events.JobSpec{Name: "be", TaskCount: 1, Command: "/bin/be", Priority: 0,
		Resources: &events.Resources{CpuMilli: 8000, MemoryBytes: 1 << 30}}})
	c.pass()
	c.do(commands.SetQuota{Meta: cellAdmin, User: "alice", Band: "production", Resources: projections.Resources{CPUMilli: 4000, MemoryBytes: 4 << 30, Ports: 4}})
	c.do(commands.SubmitJob{Meta: asAlice, Spec: &events.JobSpec{Name: "web", TaskCount: 1, Command: "/bin/web", Priority: 9,
		Resources: &events.Resources{CpuMilli: 2000, MemoryBytes: 1 << 30, Ports: 2}}})
	version := c.s.Machines["m1"].Version

	cell, position, _ := c.core.Input(c.s, c.now)
	plan, cmd := c.core.Plan(cell, position)
	if cmd == nil || len(plan.Placements) != 1 {
		t.Fatalf("plan: %+v", plan)
	}
	var evicted *events.TaskEvicted
	var scheduled *events.TaskScheduled
	for _, e := range c.do(*cmd) {
		switch d := e.Data.(type) {
		case *events.TaskEvicted:
			evicted = d
		case *events.TaskScheduled:
			scheduled = d
		}
	}
	if evicted == nil || evicted.GetJob() != "be" || evicted.GetReason() != "preempted" || evicted.GetMachine() != "m1" ||
		evicted.GetPreemptor().GetJob() != "web" {
		t.Errorf("TaskEvicted: %v", evicted)
	}
	if scheduled == nil || scheduled.GetJob() != "web" || scheduled.GetIndex() != 0 || scheduled.GetMachine() != "m1" ||
		scheduled.GetMachineVersion() != version || scheduled.GetMachinesExamined() != 1 ||
		!slices.Equal(scheduled.GetPorts(), plan.Placements[0].Ports) || len(scheduled.GetPorts()) != 2 ||
		len(scheduled.GetPreempted()) != 1 || scheduled.GetPreempted()[0].GetJob() != "be" || scheduled.GetPassPosition() != position {
		t.Errorf("TaskScheduled: %v", scheduled)
	}
}
