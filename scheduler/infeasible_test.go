package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// A scheduler that remembers infeasible machines plans what a fresh one
// plans, pass after pass, while machines change under it (tasks come and
// go, machines drain, go down and come back, lose attributes), classes
// come back in later passes, and the plans are never applied, so that a
// machine the last pass filled in its head is the same machine again.
// Allocs, tasks inside them, spread and distinct-hosts jobs, crash
// history and prod and non-prod preemption are all in the mix.
//
// Placed tasks belong to the pending jobs too (spread counts them), and
// under odd seeds the scheduler numbers jobs afresh every pass
// (jobNumbersSlack lowered), under even ones it keeps its numbering; under
// every third it keeps the verdicts of a class or two of those it explains.
func TestRememberedInfeasibleIsWhatAFreshPassFinds(t *testing.T) {
	defer func(slack, verdicts int) { jobNumbersSlack, maxExplainedVerdicts = slack, verdicts }(jobNumbersSlack, maxExplainedVerdicts)
	remembered, explained, spread, renumbered := 0, 0, 0, 0
	var numbering *jobNumbers
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 77))
		jobNumbersSlack = []int{1 << 16, -1 << 30}[seed%2]
		maxExplainedVerdicts = []int{1 << 19, 1 << 19, 60}[seed%3] // 60: a class or two
		cfg := DefaultConfig()
		cfg.FeasibleK = []int{0, 4, 64}[seed%3]
		remembering, fresh := New(cfg), New(cfg)
		remembering.RememberMachines()
		machines := make([]*Machine, 30)
		for i := range machines {
			machines[i] = randomTestMachine(rng, i, 1)
		}
		for round := range 60 {
			// Change some machines: a new Machine, as the master builds one.
			for range rng.IntN(4) {
				i := rng.IntN(len(machines))
				machines[i] = changedMachine(rng, machines[i])
			}
			if rng.IntN(10) == 0 { // a machine leaves or joins
				if rng.IntN(2) == 0 && len(machines) > 10 {
					i := rng.IntN(len(machines))
					machines = slices.Delete(machines, i, i+1)
				} else {
					machines = slices.Insert(machines, rng.IntN(len(machines)+1), randomTestMachine(rng, 100+round, int64(round)))
				}
			}
			cell := &Cell{Machines: slices.Clone(machines)}
			for j := range 6 + rng.IntN(6) {
				cell.Pending = append(cell.Pending, randomPending(rng, j+round/20, machines)...)
			}
			if rng.IntN(3) == 0 {
				cell.PendingAllocs = append(cell.PendingAllocs, PendingAlloc{Set: AllocSetRef{User: "u1", Name: "set"},
					Index: int32(rng.IntN(4)), Priority: 5, Resources: Resources{CPU: 4000, Memory: 8 << 30}})
			}
			pos := uint64(seed*1000) + uint64(round)
			a, b := remembering.Schedule(cell, pos), fresh.Schedule(cell, pos)
			remembered += a.Stats.InfeasibleRemembered
			explained += a.Stats.ExplainRemembered
			if remembering.sums.jobs != numbering {
				numbering = remembering.sums.jobs
				renumbered++
			}
			running := map[[2]string]bool{}
			for _, m := range cell.Machines {
				for _, pt := range m.Tasks {
					running[[2]string{pt.Ref.User, pt.Ref.Job}] = true
				}
			}
			for _, pt := range cell.Pending {
				if running[[2]string{pt.Ref.User, pt.Ref.Job}] {
					spread++
				}
			}
			a.Stats, b.Stats = Stats{}, Stats{}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("seed %d round %d: the remembering scheduler planned %d placements, a fresh one %d",
					seed, round, len(a.Placements), len(b.Placements))
			}
		}
	}
	if remembered == 0 {
		t.Fatal("no machine was skipped as known infeasible: the memory is not exercised")
	}
	if explained == 0 {
		t.Fatal("no explanation reused an earlier pass's verdict: its memory is not exercised")
	}
	if spread == 0 || renumbered < 10*60 {
		t.Fatalf("%d pending tasks of jobs already running, jobs numbered afresh %d times: spread and its numbering are not exercised", spread, renumbered)
	}
	t.Logf("%d verdicts remembered, %d reused in explanations; %d pending tasks of running jobs, jobs numbered afresh %d times", remembered, explained, spread, renumbered)
}

var testShapes = []Resources{
	{CPU: 8000, Memory: 32 << 30, Ports: 10},
	{CPU: 16000, Memory: 64 << 30, Ports: 10},
	{CPU: 4000, Memory: 64 << 30, Ports: 10},
}

func randomTestMachine(rng *rand.Rand, i int, version int64) *Machine {
	m := &Machine{Name: fmt.Sprintf("m%03d", i), Version: version, Capacity: testShapes[rng.IntN(len(testShapes))], PortBase: 30000,
		Attributes: map[string]string{"rack": fmt.Sprint("r", i%4), "arch": []string{"x86", "arm"}[rng.IntN(2)]}}
	for range rng.IntN(4) {
		addRandomTask(rng, m)
	}
	if rng.IntN(4) == 0 {
		m.Allocs = append(m.Allocs, PlacedAlloc{Set: AllocSetRef{User: "u1", Name: "set"}, Index: int32(rng.IntN(4)),
			Priority: 5, Capacity: Resources{CPU: 4000, Memory: 8 << 30}})
		if rng.IntN(2) == 0 {
			m.Tasks = append(m.Tasks, PlacedTask{Ref: TaskRef{User: "u1", Job: "inside", Index: int32(rng.IntN(100))}, Priority: 5,
				Limit: Resources{CPU: 2000, Memory: 4 << 30}, Reservation: Resources{CPU: 2000, Memory: 4 << 30},
				AllocSet: "set", AllocIndex: m.Allocs[0].Index})
		}
	}
	return m
}

func addRandomTask(rng *rand.Rand, m *Machine) {
	lim := Resources{CPU: int64(1+rng.IntN(6)) * 1000, Memory: int64(1+rng.IntN(24)) << 30}
	res := lim
	res[CPU] = lim[CPU] * int64(50+rng.IntN(51)) / 100
	// Jobs named as randomPending names them, so that spread counts them.
	j := rng.IntN(15)
	m.Tasks = append(m.Tasks, PlacedTask{Ref: TaskRef{User: fmt.Sprint("u", j%3), Job: fmt.Sprint("job", j), Index: int32(rng.IntN(1000))},
		Priority: int32(rng.IntN(MaxPriority + 1)), Limit: lim, Reservation: res})
}

// changedMachine is m after an event: a copy with a new version.
func changedMachine(rng *rand.Rand, m *Machine) *Machine {
	c := *m
	c.Version++
	c.Tasks = slices.Clone(m.Tasks)
	c.Attributes = map[string]string{}
	for k, v := range m.Attributes {
		c.Attributes[k] = v
	}
	switch rng.IntN(5) {
	case 0:
		addRandomTask(rng, &c)
	case 1:
		if len(c.Tasks) > 0 {
			c.Tasks = slices.Delete(c.Tasks, 0, 1)
		}
	case 2:
		c.State = MachineState(rng.IntN(3))
	case 3:
		delete(c.Attributes, "arch")
	default:
		c.Tasks = nil
	}
	return &c
}

// randomPending is job j's pending tasks, drawn from a few testShapes so that the
// same classes come back pass after pass.
func randomPending(rng *rand.Rand, j int, machines []*Machine) []PendingTask {
	kinds := []PendingTask{
		{Priority: 2, Resources: Resources{CPU: 6000, Memory: 40 << 30}},
		{Priority: 10, Resources: Resources{CPU: 12000, Memory: 16 << 30}},
		{Priority: 7, Resources: Resources{CPU: 3000, Memory: 8 << 30}, Constraints: []Constraint{{Attribute: "arch", Op: OpEq, Values: []string{"arm"}}}},
		{Priority: 0, Resources: Resources{CPU: 1000, Memory: 2 << 30}},
		{Priority: 5, Resources: Resources{CPU: 1000, Memory: 2 << 30}, AllocSet: "set"},
		{Priority: 6, Resources: Resources{CPU: 4000, Memory: 16 << 30}, DistinctHosts: true},
		{Priority: 6, Resources: Resources{CPU: 5000, Memory: 20 << 30}, Spread: []string{"rack"}},
		{Priority: 9, Resources: Resources{CPU: 2000, Memory: 30 << 30, Ports: 2}},
	}
	k := kinds[rng.IntN(len(kinds))]
	if rng.IntN(4) == 0 {
		k.CrashedOn = []string{machines[rng.IntN(len(machines))].Name}
	}
	out := make([]PendingTask, 1+rng.IntN(5))
	for i := range out {
		t := k
		t.Ref = TaskRef{User: "u" + fmt.Sprint(j%3), Job: fmt.Sprint("job", j), Index: int32(i)}
		t.Seq = int64(j)
		out[i] = t
	}
	return out
}

// What a scheduler remembers is bounded: only classes left with pending
// tasks, at most maxRememberedClasses of them, however many classes the
// queue holds.
func TestRememberedInfeasibleIsBounded(t *testing.T) {
	s := New(DefaultConfig())
	s.RememberMachines()
	cell := &Cell{}
	for i := range 50 {
		cell.Machines = append(cell.Machines, &Machine{Name: fmt.Sprintf("m%02d", i), Version: 1, Capacity: Resources{CPU: 4000, Memory: 8 << 30}})
	}
	for i := range maxRememberedClasses + 500 {
		// Each its own class; none fits; and a few that do.
		cpu := int64(5000 + i)
		if i%1000 == 0 {
			cpu = 100
		}
		cell.Pending = append(cell.Pending, PendingTask{Ref: TaskRef{User: "u", Job: fmt.Sprint("j", i)}, Seq: int64(i), Resources: Resources{CPU: cpu}})
	}
	s.Schedule(cell, 1)
	if n := len(s.sums.infeasible); n != maxRememberedClasses {
		t.Fatalf("%d classes remembered, want the bound %d", n, maxRememberedClasses)
	}
	if plan := s.Schedule(cell, 2); plan.Stats.InfeasibleRemembered == 0 || plan.Stats.Placed != 5 {
		t.Fatalf("second pass: %+v", plan.Stats)
	}
}
