package scheduler

import (
	"fmt"
	"testing"
)

// placedOn maps each placed task to its machine.
func placedOn(plan *Plan) map[TaskRef]string {
	out := map[TaskRef]string{}
	for _, pl := range plan.Placements {
		out[pl.Task] = pl.Machine
	}
	return out
}

// prodThenBatch is a large machine of 8 cores and a small one, a prod task
// of 4 cores and a batch task of 8, in that order in the queue, placed
// with policy.
func prodThenBatch(smallCores int64, policy Policy) *Plan {
	cfg := DefaultConfig()
	cfg.Policy = policy
	return Schedule(&Cell{
		Machines: []*Machine{machineOf("large", 8, 64), machineOf("small", smallCores, 64)},
		Pending: numberSeq(append(pendingOf("u", "prod", 1, 9, res(4000, 1)),
			pendingOf("u", "batch", 1, 4, res(8000, 1))...)),
	}, cfg, 1)
}

// A prod task placed first by worst-fit takes the large machine; a batch
// task that fits only there, empty, would stay pending. The rerun places
// the batch task first, and the prod task fits on the small machine.
func TestRerunPlacesATaskThatLostItsRoom(t *testing.T) {
	plan := prodThenBatch(4, PolicyWorstFit)
	on := placedOn(plan)
	if on[ref("u", "prod", 0)] != "small" || on[ref("u", "batch", 0)] != "large" || len(plan.Pending) != 0 {
		t.Fatalf("placements %v, pending %d: want prod on small, batch on large", on, len(plan.Pending))
	}
	if plan.Stats.Reruns != 1 || plan.Stats.RerunKept != 1 {
		t.Errorf("stats %+v: want one rerun, kept", plan.Stats)
	}
}

// When the only room for the batch task is the only room for a prod task,
// the rerun would leave the prod task pending: the first run's plan stands.
func TestRerunNeverCostsAHigherPriority(t *testing.T) {
	for _, policy := range Policies {
		plan := prodThenBatch(2, policy)
		on := placedOn(plan)
		if on[ref("u", "prod", 0)] != "large" || len(plan.Pending) != 1 || plan.Pending[0].Tasks[0] != ref("u", "batch", 0) {
			t.Errorf("%s: placements %v: want prod on large, batch pending", policy, on)
		}
		if plan.Stats.Reruns != 1 || plan.Stats.RerunKept != 0 {
			t.Errorf("%s: stats %+v: want one rerun, not kept", policy, plan.Stats)
		}
	}
}

// A task that fits on no machine even empty, or only on machines full
// before the pass, costs no rerun.
func TestNoRerunForATaskThatNeverFit(t *testing.T) {
	full := machineOf("full", 8, 64)
	full.Tasks = []PlacedTask{placedOf("u", "running", 0, 9, res(8000, 1), res(8000, 1))}
	// a is full too but for the two small tasks' room.
	a := machineOf("a", 8, 64)
	a.Tasks = []PlacedTask{placedOf("u", "running", 1, 9, res(6000, 1), res(6000, 1))}
	cell := &Cell{
		Machines: []*Machine{a, full},
		Pending: numberSeq(append(append(pendingOf("u", "small", 2, 9, res(1000, 1)),
			pendingOf("u", "huge", 1, 4, res(16000, 1))...),
			pendingOf("u", "waits", 1, 2, res(4000, 1))...)),
	}
	plan := Schedule(cell, DefaultConfig(), 1)
	if plan.Stats.Reruns != 0 {
		t.Errorf("stats %+v: a rerun for tasks that never had room", plan.Stats)
	}
	if len(plan.Placements) != 2 {
		t.Errorf("placements %v: want the two small tasks", placedOn(plan))
	}
}

func TestPromoteFirst(t *testing.T) {
	got := promoteFirst([]int32{4, 2, 0, 1, 3}, []bool{true, false, false, true, false})
	want := []int32{0, 3, 4, 2, 1}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// A new sample, and the whole-view run, are kept only when they leave
// fewer tasks pending at the highest priority where the plans differ: on
// random cells sampled at K=2 (every policy, GPUs contested on a
// quarter), the plan with them never leaves more pending than the plan
// without them, at that priority and so at any higher one, it still
// applies in its order, and the same seed gives the same plan. Relocation
// is off: its budget counts every run's checks, so an extra run not kept
// still lets it try more.
func TestExtraRunsKeepOnlyAFullerPlan(t *testing.T) {
	noRelocation = true
	defer func() { noRelocation = false }()
	kept := map[string]int{}
	drawn := 0
	for seed := uint64(1); seed <= 400; seed++ {
		cell := propertyCell(seed, 17)
		cfg := DefaultConfig()
		cfg.Policy = Policies[seed%3]
		cfg.FeasibleK = 2
		with := Schedule(cell, cfg, seed)
		noReshuffle, noWholeView = true, true
		without := Schedule(cell, cfg, seed)
		noReshuffle, noWholeView = false, false
		if again := Schedule(cell, cfg, seed); fmt.Sprint(again.Placements) != fmt.Sprint(with.Placements) {
			t.Fatalf("seed %d: two plans from one input and seed", seed)
		}
		drawn += with.Stats.Reruns - without.Stats.Reruns
		// The bound scheduler/doc.go states: at most five runs, the first,
		// the rerun, the new samples and the whole view.
		if with.Stats.Reruns > wholeViewRun || with.Stats.RerunKept > wholeViewRun {
			t.Fatalf("seed %d: %d reruns (run %d kept), more than the %d the pass allows", seed, with.Stats.Reruns, with.Stats.RerunKept, wholeViewRun)
		}
		switch {
		case with.Stats.RerunKept == wholeViewRun:
			kept["whole view"]++
		case with.Stats.RerunKept >= 2:
			kept["new sample"]++
		}
		lw, lo := leftPerPriority(with), leftPerPriority(without)
		for prio := MaxPriority; prio >= 0; prio-- {
			if lw[prio] != lo[prio] {
				if lw[prio] > lo[prio] {
					t.Fatalf("seed %d: priority %d left %d pending with the extra runs, %d without", seed, prio, lw[prio], lo[prio])
				}
				break
			}
		}
		if with.Stats.RerunKept < 2 && fmt.Sprint(with.Placements) != fmt.Sprint(without.Placements) {
			t.Fatalf("seed %d: no extra run kept, yet the plan changed", seed)
		}
		if err := appliesInOrder(cell, with); err != nil {
			t.Fatalf("seed %d (%s): %v", seed, cfg.Policy, err)
		}
	}
	if kept["new sample"] == 0 || kept["whole view"] == 0 {
		t.Fatalf("%d extra runs, kept %v: the cells test nothing", drawn, kept)
	}
	t.Logf("%d extra runs, kept %v", drawn, kept)
}

// leftPerPriority counts a plan's tasks left pending per priority.
func leftPerPriority(plan *Plan) [MaxPriority + 1]int {
	var left [MaxPriority + 1]int
	for _, ex := range plan.Pending {
		left[clampPriority(ex.Priority)] += len(ex.Tasks)
	}
	return left
}

// A pass that sees every machine draws no sample, and a pass that left
// many contested tasks out is no near miss: neither runs again with a new
// sample.
func TestNoReshuffleWithoutASampleOrForAFarMiss(t *testing.T) {
	// Every machine in view: the prod-then-batch rerun case at the default K.
	if plan := prodThenBatch(2, PolicyHybrid); plan.Stats.Reruns != 1 {
		t.Errorf("a cell seen whole: %d reruns, want the one rerun", plan.Stats.Reruns)
	}
	// 100 machines of 4 cores sampled 2 at a time, and 200 batch tasks of
	// 3 cores behind 100 prod tasks of 2: the prod tasks take room the
	// batch tasks had, and at least 100 of them stay pending, far more
	// than a near miss.
	var machines []*Machine
	for i := range 100 {
		machines = append(machines, machineOf(fmt.Sprintf("m%03d", i), 4, 64))
	}
	cfg := DefaultConfig()
	cfg.FeasibleK = 2
	noWholeView = true // a cell this small is seen whole (wholeView)
	defer func() { noWholeView = false }()
	plan := Schedule(&Cell{Machines: machines, Pending: numberSeq(append(pendingOf("u", "prod", 100, 9, res(2000, 1)),
		pendingOf("u", "batch", 200, 4, res(3000, 1))...))}, cfg, 1)
	if left := plan.Stats.Pending - plan.Stats.Placed; left < 100 || plan.Stats.Reruns > 1 {
		t.Errorf("%d left, %d reruns: want at least 100 left and no new sample", left, plan.Stats.Reruns)
	}
}

// A pass that would cost far more to run with every machine in view than
// it cost sampled is not run again whole: 3,000 machines of 4 cores seen 2
// at a time, 60 prod jobs of 2-core tasks ahead of 6,000 batch tasks of 3
// cores, most of which stay pending. The same cell cut to 300 machines is
// seen whole.
func TestNoWholeViewWhenItCostsTooMuch(t *testing.T) {
	for _, tc := range []struct {
		machines int
		whole    bool
	}{{3000, false}, {300, true}} {
		t.Run(fmt.Sprintf("%d machines", tc.machines), func(t *testing.T) {
			var machines []*Machine
			for i := range tc.machines {
				machines = append(machines, machineOf(fmt.Sprintf("m%04d", i), 4, 64))
			}
			var pending []PendingTask
			for j := range 60 {
				pending = append(pending, pendingOf("u", fmt.Sprintf("prod%02d", j), tc.machines/60, 9, res(2000, int64(1+j)))...)
			}
			pending = append(pending, pendingOf("u", "batch", 2*tc.machines, 4, res(3000, 1))...)
			cfg := DefaultConfig()
			cfg.FeasibleK = 2
			plan := Schedule(&Cell{Machines: machines, Pending: numberSeq(pending)}, cfg, 1)
			t.Logf("%d machines: %+v", tc.machines, plan.Stats)
			// A far miss draws no new sample: a run after the rerun is the
			// whole view.
			if ran := plan.Stats.Reruns == 2; ran != tc.whole {
				t.Errorf("%d machines: %d reruns, want the whole view run %v", tc.machines, plan.Stats.Reruns, tc.whole)
			}
		})
	}
}
