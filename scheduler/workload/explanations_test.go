package workload

import (
	"reflect"
	"testing"

	"github.com/corralhq/corral/scheduler"
)

// A pass without explanations places exactly what a pass with them does,
// preemptions included, and lists the same tasks as left pending; only
// the rejections and hints are missing.
func TestNoExplanationsPlacesTheSame(t *testing.T) {
	w := Synthetic(SyntheticConfig{Seed: 5, Machines: 300, Tasks: 6000, Jobs: 300, Users: 20, CPUFill: 1.3,
		RackSize: 20, RacksPerPower: 4, ConstrainedJobs: 0.2})
	cfg := scheduler.DefaultConfig()
	quiet := cfg
	quiet.NoExplanations = true

	// First the cell fills up; then the tasks left over come back at a
	// higher priority, preempting what they may.
	first := scheduler.Schedule(w.Cell(), cfg, 1)
	byRef := map[scheduler.TaskRef]*scheduler.PendingTask{}
	for i := range w.Tasks {
		byRef[w.Tasks[i].Ref] = &w.Tasks[i]
	}
	machines := map[string]*scheduler.Machine{}
	var cell scheduler.Cell
	for _, m := range w.Machines {
		c := *m
		c.Tasks = nil
		machines[m.Name] = &c
		cell.Machines = append(cell.Machines, &c)
	}
	placed := map[scheduler.TaskRef]bool{}
	for _, p := range first.Placements {
		task := byRef[p.Task]
		m := machines[p.Machine]
		m.Tasks = append(m.Tasks, scheduler.PlacedTask{Ref: p.Task, Priority: task.Priority, Limit: task.Resources,
			Reservation: task.Resources, Ports: p.Ports, Package: task.Package})
		placed[p.Task] = true
	}
	for _, task := range w.Tasks {
		if !placed[task.Ref] {
			task.Priority = min(task.Priority+4, scheduler.MaxPriority)
			cell.Pending = append(cell.Pending, task)
		}
	}
	if len(cell.Pending) == 0 {
		t.Fatal("the first pass placed every task: the cell is not full")
	}
	for _, c := range []*scheduler.Cell{w.Cell(), &cell} {
		want := scheduler.Schedule(c, cfg, 2)
		got := scheduler.Schedule(c, quiet, 2)
		if !reflect.DeepEqual(got.Placements, want.Placements) {
			t.Fatalf("placements differ without explanations: %d against %d", len(got.Placements), len(want.Placements))
		}
		if len(got.Pending) != len(want.Pending) || len(want.Pending) == 0 {
			t.Fatalf("%d classes left pending without explanations, %d with", len(got.Pending), len(want.Pending))
		}
		for i := range want.Pending {
			if !reflect.DeepEqual(got.Pending[i].Tasks, want.Pending[i].Tasks) {
				t.Fatalf("class %d: other tasks listed as pending", i)
			}
			if len(got.Pending[i].Rejections)+len(got.Pending[i].Hints) != 0 {
				t.Fatalf("class %d explained anyway", i)
			}
		}
	}
	if p := scheduler.Schedule(&cell, cfg, 2); p.Stats.Preemptions == 0 {
		t.Fatal("the second pass preempted nothing: the test does not reach victims")
	}
}
