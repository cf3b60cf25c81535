package workload

import (
	"reflect"
	"slices"
	"testing"

	"github.com/corralhq/corral/scheduler"
)

func ref(user, job string, index int32) scheduler.TaskRef {
	return scheduler.TaskRef{User: user, Job: job, Index: index}
}

// TestDeterminism: the same cell and seed give the same plan; another seed
// examines machines in another order.
func TestDeterminism(t *testing.T) {
	cfg := SyntheticConfig{Seed: 7, Machines: 500, Tasks: 5000, Jobs: 250, Users: 20, CPUFill: 0.8,
		RackSize: 20, RacksPerPower: 4, ConstrainedJobs: 0.2}
	w := Synthetic(cfg)
	cell := w.Cell()
	// Some machines down or draining, some tasks already placed.
	for i, m := range cell.Machines {
		switch i % 50 {
		case 3:
			c := *m
			c.State = scheduler.MachineDown
			cell.Machines[i] = &c
		case 4:
			c := *m
			c.State = scheduler.MachineDraining
			cell.Machines[i] = &c
		}
	}
	for _, policy := range scheduler.Policies {
		sc := scheduler.DefaultConfig()
		sc.Policy = policy
		p1 := scheduler.Schedule(cell, sc, 42)
		p2 := scheduler.Schedule(cell, sc, 42)
		if !reflect.DeepEqual(p1, p2) {
			t.Errorf("%s: two passes with seed 42 differ", policy)
		}
		p3 := scheduler.Schedule(cell, sc, 43)
		if reflect.DeepEqual(p1.Placements, p3.Placements) {
			t.Errorf("%s: seeds 42 and 43 gave the same placements", policy)
		}
		if p1.Stats.Placed < 4000 {
			t.Errorf("%s: placed only %d of 5000", policy, p1.Stats.Placed)
		}
		// Every machine is counted once in every explanation.
		for _, e := range p1.Pending {
			n := 0
			for _, r := range e.Rejections {
				n += r.Machines
			}
			if n != e.Machines || e.Machines != len(cell.Machines) {
				t.Errorf("%s: explanation counts %d of %d machines: %s", policy, n, e.Machines, e.String())
			}
		}
	}
}

// TestInputUntouched: a pass does not write to its input.
func TestInputUntouched(t *testing.T) {
	w := Synthetic(SyntheticConfig{Seed: 3, Machines: 50, Tasks: 600, Jobs: 30, Users: 5, CPUFill: 0.95,
		RackSize: 10, RacksPerPower: 2, ConstrainedJobs: 0.3})
	cell := w.Cell()
	// Fill a few machines with low-priority work so that preemption happens.
	for i := range 10 {
		m := *cell.Machines[i]
		m.Tasks = []scheduler.PlacedTask{{Ref: ref("z", "be", int32(i)), Priority: 0, Limit: m.Capacity, Reservation: m.Capacity}}
		m.Tasks[0].Limit[scheduler.Ports] = 0
		m.Tasks[0].Reservation[scheduler.Ports] = 0
		cell.Machines[i] = &m
	}
	before := deepCopyCell(cell)
	plan := scheduler.Schedule(cell, scheduler.DefaultConfig(), 1)
	if plan.Stats.Preemptions == 0 {
		t.Log("no preemption happened; the test is weaker")
	}
	if !reflect.DeepEqual(before, deepCopyCell(cell)) {
		t.Error("the pass changed its input")
	}
}

func deepCopyCell(c *scheduler.Cell) scheduler.Cell {
	out := scheduler.Cell{Pending: slices.Clone(c.Pending)}
	for _, m := range c.Machines {
		cp := *m
		cp.Tasks = slices.Clone(m.Tasks)
		cp.Allocs = slices.Clone(m.Allocs)
		cp.Packages = slices.Clone(m.Packages)
		out.Machines = append(out.Machines, &cp)
	}
	return out
}
