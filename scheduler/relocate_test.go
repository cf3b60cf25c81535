package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// A task placed early took the only machine a later one fits on, while it
// fitted elsewhere: relocation moves it there and places the later one.
// Worst-fit may send the prod task to the GPU machine (its idle GPU makes
// it look emptiest), which leaves the GPU task no CPU. (Schedule's rerun
// would mend this case by itself; the pass is driven by hand to test
// relocation alone.)
func TestRelocationMakesRoom(t *testing.T) {
	g := machineOf("g", 8, 64)
	g.Capacity[GPU] = 1000
	c := machineOf("c", 8, 64)
	gpuTask := res(4000, 1)
	gpuTask[GPU] = 1000
	pending := numberSeq(append(pendingOf("a", "svc", 1, 9, res(6000, 1)), pendingOf("a", "train", 1, 5, gpuTask)...))
	cfg := DefaultConfig()
	cfg.Policy = PolicyWorstFit
	moved := 0
	for seed := uint64(1); seed <= 20; seed++ {
		p := newPass(cfg, &Cell{Machines: []*Machine{g, c}, Pending: pending}, seed, nil)
		p.placeAll()
		if p.plan.Stats.Placed == 2 {
			continue // the prod task went to c by itself
		}
		p.relocate()
		p.finish()
		var got []string
		for _, pl := range p.plan.Placements {
			got = append(got, pl.Task.Job+"->"+pl.Machine)
		}
		// The moved placement goes to the end of the plan, then the task
		// it made room for.
		if want := []string{"svc->c", "train->g"}; !slices.Equal(got, want) {
			t.Fatalf("seed %d: placements %v, want %v", seed, got, want)
		}
		if s := p.plan.Stats; s.Placed != 2 || s.Unblocked != 1 || s.Relocated != 1 || len(p.plan.Pending) != 0 {
			t.Errorf("seed %d: stats %+v, pending %d; want 2 placed, 1 unblocked by 1 move", seed, s, len(p.plan.Pending))
		}
		moved++
	}
	if moved == 0 {
		t.Fatal("the prod task never went to the GPU machine: the test tests nothing")
	}
}

// Relocation only adds placements: on random cells (running tasks of every
// priority, allocs, tasks inside them, ports, spread and distinct-hosts
// jobs, crash history, preemption), under every policy and several K, every
// task the pass places without relocation is placed with it, and the plan
// still applies in its order: each placement fits its machine after the
// placements and preemptions before it, and no task or alloc is placed
// twice.
func TestRelocationOnlyAddsPlacements(t *testing.T) {
	unblocked := 0
	for seed := uint64(1); seed <= 300; seed++ {
		cell := propertyCell(seed, 91)
		cfg := DefaultConfig()
		cfg.Policy = Policies[seed%3]
		cfg.FeasibleK = []int{0, 2, 64}[seed/3%3]
		var with, without *Plan
		if seed%2 == 0 {
			// Every job packs: a pass that spread runs again packing when
			// tasks are left (spread.go), and relocation may decide which
			// of the two runs is kept.
			cell = packed(cell)
			with = Schedule(cell, cfg, seed)
			noRelocation = true
			without = Schedule(cell, cfg, seed)
			noRelocation = false
		} else { // the pass without its rerun, which mends some cases first
			p := newPass(cfg, cell, seed, nil)
			p.placeAll()
			p.finish()
			without = &p.plan
			p = newPass(cfg, cell, seed, nil)
			p.placeAll()
			p.relocate()
			p.finish()
			with = &p.plan
		}
		unblocked += with.Stats.Unblocked
		if with.Stats.Placed != without.Stats.Placed+with.Stats.Unblocked {
			t.Fatalf("seed %d: placed %d with relocation, %d without, unblocked %d", seed, with.Stats.Placed, without.Stats.Placed, with.Stats.Unblocked)
		}
		placed := map[TaskRef]bool{}
		for _, p := range with.Placements {
			placed[p.Task] = true
		}
		for _, p := range without.Placements {
			if !placed[p.Task] {
				t.Fatalf("seed %d: %s placed without relocation, not with it", seed, p.Task)
			}
		}
		if err := appliesInOrder(cell, without); err != nil {
			t.Fatalf("without: seed %d (%s, K=%d): %v", seed, cfg.Policy, cfg.FeasibleK, err)
		}
		if err := appliesInOrder(cell, with); err != nil {
			t.Fatalf("seed %d (%s, K=%d): %v", seed, cfg.Policy, cfg.FeasibleK, err)
		}
	}
	if unblocked == 0 {
		t.Fatal("relocation never placed a task: the cells test nothing")
	}
	t.Logf("%d tasks unblocked", unblocked)
}

// propertyCell is the random cell of a property test's seed (drawn from
// stream): one in four has its GPUs contested (gpuContestedCell), the
// others are randomCell's.
func propertyCell(seed, stream uint64) *Cell {
	rng := rand.New(rand.NewPCG(seed, stream))
	if seed%4 == 1 {
		return gpuContestedCell(rng)
	}
	return randomCell(rng)
}

// randomCell is a cell of up to 16 machines, some with GPUs, running tasks
// and allocs, and a queue of every kind of task.
func randomCell(rng *rand.Rand) *Cell {
	machines := make([]*Machine, 4+rng.IntN(12))
	for i := range machines {
		machines[i] = randomTestMachine(rng, i, 1)
		machines[i].State = MachineUp
		if rng.IntN(3) == 0 {
			machines[i].Capacity[GPU] = 2000
		}
	}
	cell := &Cell{Machines: machines}
	for j := range 4 + rng.IntN(30) {
		cell.Pending = append(cell.Pending, randomPending(rng, j, machines)...)
	}
	if rng.IntN(3) == 0 {
		cell.PendingAllocs = append(cell.PendingAllocs, PendingAlloc{Set: AllocSetRef{User: "u1", Name: "set"},
			Index: int32(rng.IntN(4)), Priority: 5, Resources: Resources{CPU: 4000, Memory: 8 << 30}})
	}
	for i := range cell.Pending {
		if rng.IntN(4) == 0 {
			cell.Pending[i].Resources[GPU] = int64(1+rng.IntN(4)) * 500
		}
	}
	return cell
}

// gpuContestedCell is an empty cell of GPU and CPU machines and a queue
// that asks for nearly every GPU: prod CPU work first, then GPU work of
// lower priorities, so that what the CPU work takes decides what fits.
func gpuContestedCell(rng *rand.Rand) *Cell {
	cell := &Cell{}
	gpus := 0
	for i := range 4 + rng.IntN(10) {
		m := machineOf(fmt.Sprintf("g%02d", i), int64(8+4*rng.IntN(3)), 64)
		m.Capacity[GPU] = int64(1+rng.IntN(4)) * 1000
		gpus += int(m.Capacity[GPU] / 500)
		cell.Machines = append(cell.Machines, m)
	}
	for i := range 1 + rng.IntN(3) {
		cell.Machines = append(cell.Machines, machineOf(fmt.Sprintf("c%02d", i), int64(8+4*rng.IntN(3)), 64))
	}
	for j := range 2 + rng.IntN(4) {
		cell.Pending = append(cell.Pending, pendingOf("u", fmt.Sprint("svc", j), 1+rng.IntN(3), 9, res(int64(2+rng.IntN(6))*1000, 1))...)
	}
	for j := 0; gpus > 0; j++ {
		r := res(int64(1+rng.IntN(4))*1000, 1)
		r[GPU] = int64(1+rng.IntN(min(gpus, 4))) * 500
		gpus -= int(r[GPU] / 500)
		cell.Pending = append(cell.Pending, pendingOf("u", fmt.Sprint("train", j), 1, int32(rng.IntN(6)), r)...)
	}
	numberSeq(cell.Pending)
	return cell
}

// appliesInOrder checks that plan applies to cell in its order, as the
// applier takes it: allocs at their place among the task placements, each
// preemption before its placement's fit, each task placed directly fitting
// Available of its machine, each task inside an alloc fitting the alloc.
func appliesInOrder(cell *Cell, plan *Plan) error {
	a := newPlanApplier(cell, plan)
	seen := map[TaskRef]bool{}
	for i, p := range plan.Placements {
		if err := a.placeAllocs(i); err != nil {
			return err
		}
		if seen[p.Task] {
			return fmt.Errorf("%s placed twice", p.Task)
		}
		seen[p.Task] = true
		if err := a.place(i, p); err != nil {
			return err
		}
	}
	if err := a.placeAllocs(len(plan.Placements)); err != nil {
		return err
	}
	if a.next != len(plan.AllocPlacements) {
		return fmt.Errorf("%d alloc placements after the last task placement's index", len(plan.AllocPlacements)-a.next)
	}
	return nil
}

// planApplier is what appliesInOrder tracks: each machine's use and each
// alloc's room left, as the plan's steps apply.
type planApplier struct {
	cell   *Cell
	plan   *Plan
	byName map[string]*Machine
	used   map[string]*machineUse
	allocs map[string]Resources // machine/set/index: room left
	req    map[TaskRef]*PendingTask
	next   int // the first alloc placement not applied
}

type machineUse struct{ lim, res Resources }

func newPlanApplier(cell *Cell, plan *Plan) *planApplier {
	a := &planApplier{cell: cell, plan: plan, byName: map[string]*Machine{}, used: map[string]*machineUse{},
		allocs: map[string]Resources{}, req: map[TaskRef]*PendingTask{}}
	for _, m := range cell.Machines {
		a.byName[m.Name] = m
		u := &machineUse{}
		for _, pa := range m.Allocs {
			u.lim, u.res = u.lim.Add(pa.Capacity), u.res.Add(pa.Capacity)
			a.allocs[fmt.Sprint(m.Name, pa.Set, pa.Index)] = pa.Capacity
		}
		for _, t := range m.Tasks {
			if t.AllocSet != "" {
				k := fmt.Sprint(m.Name, AllocSetRef{User: t.Ref.User, Name: t.AllocSet}, t.AllocIndex)
				if room, ok := a.allocs[k]; ok {
					a.allocs[k] = room.Sub(t.Limit)
					continue
				}
			}
			u.lim, u.res = u.lim.Add(t.Limit), u.res.Add(taskReservation(&t))
		}
		a.used[m.Name] = u
	}
	for i := range cell.Pending {
		a.req[cell.Pending[i].Ref] = &cell.Pending[i]
	}
	return a
}

// placeAllocs applies the alloc placements that come before task
// placement index before.
func (a *planApplier) placeAllocs(before int) error {
	for ; a.next < len(a.plan.AllocPlacements) && a.plan.AllocPlacements[a.next].Before <= before; a.next++ {
		ap := a.plan.AllocPlacements[a.next]
		u := a.used[ap.Machine]
		var r Resources
		var prio int32
		for _, pa := range a.cell.PendingAllocs {
			if pa.Set == ap.Alloc.Set && pa.Index == ap.Alloc.Index {
				r, prio = pa.Resources, pa.Priority
			}
		}
		if !r.Fits(Available(a.byName[ap.Machine].Capacity, u.lim, u.res, IsProd(prio))) {
			return fmt.Errorf("alloc %s does not fit %s", ap.Alloc, ap.Machine)
		}
		u.lim, u.res = u.lim.Add(r), u.res.Add(r)
		a.allocs[fmt.Sprint(ap.Machine, ap.Alloc.Set, ap.Alloc.Index)] = r
	}
	return nil
}

// place applies task placement i, p, after its preemptions.
func (a *planApplier) place(i int, p Placement) error {
	t, m, u := a.req[p.Task], a.byName[p.Machine], a.used[p.Machine]
	for _, v := range p.Preempted {
		for _, rt := range m.Tasks {
			if rt.Ref == v {
				u.lim, u.res = u.lim.Sub(rt.Limit), u.res.Sub(taskReservation(&rt))
			}
		}
	}
	if p.AllocSet != "" {
		k := fmt.Sprint(p.Machine, AllocSetRef{User: p.Task.User, Name: p.AllocSet}, p.AllocIndex)
		if !t.Resources.Fits(a.allocs[k]) {
			return fmt.Errorf("%s does not fit alloc %s", p.Task, k)
		}
		a.allocs[k] = a.allocs[k].Sub(t.Resources)
		return nil
	}
	if !t.Resources.Fits(Available(m.Capacity, u.lim, u.res, IsProd(t.Priority))) {
		return fmt.Errorf("placement %d, %s, does not fit %s after those before it", i, p.Task, p.Machine)
	}
	u.lim, u.res = u.lim.Add(t.Resources), u.res.Add(t.Resources)
	return nil
}
