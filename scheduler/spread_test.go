package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// A 2-replica job on a 3-machine cell with room everywhere lands on two
// machines, even where packing alone would put both beside the busiest
// machine's other work.
func TestReplicasSpreadByDefault(t *testing.T) {
	for _, policy := range Policies {
		t.Run(string(policy), func(t *testing.T) {
			m1 := machineOf("m1", 8, 32)
			m1.Tasks = []PlacedTask{placedOf("alice", "other", 0, 9, res(4000, 16), res(4000, 16))}
			cell := &Cell{
				Machines: []*Machine{m1, machineOf("m2", 8, 32), machineOf("m3", 8, 32)},
				Pending:  numberSeq(pendingOf("bob", "web", 2, 9, res(1000, 2))),
			}
			cfg := DefaultConfig()
			cfg.Policy = policy
			for seed := uint64(1); seed <= 20; seed++ {
				plan := Schedule(cell, cfg, seed)
				if len(plan.Placements) != 2 {
					t.Fatalf("seed %d: %d placements, want 2", seed, len(plan.Placements))
				}
				if a, b := plan.Placements[0].Machine, plan.Placements[1].Machine; a == b {
					t.Fatalf("seed %d: both replicas on %s", seed, a)
				}
			}
		})
	}
}

// spreadFamilyCell is a cell of 6-40 machines on 2-5 racks, partly
// filled, and a queue of jobs of 2-50 tasks of one shape each asking for
// 70-120% of the free room: the services spreading by default is for.
func spreadFamilyCell(rng *rand.Rand) *Cell {
	cell := &Cell{}
	racks := 2 + rng.IntN(4)
	var free int64
	for i := range 6 + rng.IntN(35) {
		m := machineOf(fmt.Sprintf("m%02d", i), int64(8*(1+rng.IntN(4))), int64(32*(1+rng.IntN(4))), fmt.Sprintf("rack=r%d", i%racks))
		m.State = MachineUp
		for j := range rng.IntN(4) {
			r := res(int64(500*(1+rng.IntN(8))), int64(1+rng.IntN(8)))
			if r.Fits(m.Capacity.Sub(sumLimits(m))) {
				m.Tasks = append(m.Tasks, placedOf("old", fmt.Sprint("j", i, "-", j), 0, int32(rng.IntN(12)), r, r))
			}
		}
		free += m.Capacity[CPU] - sumLimits(m)[CPU]
		cell.Machines = append(cell.Machines, m)
	}
	want := free * int64(70+rng.IntN(51)) / 100
	for j := 0; want > 0; j++ {
		n := 2 + rng.IntN(49)
		r := res(int64(250*(1+rng.IntN(16))), int64(1+rng.IntN(16)))
		user := fmt.Sprint("u", rng.IntN(3))
		cell.Pending = append(cell.Pending, pendingOf(user, fmt.Sprint("job", j), n, int32(rng.IntN(12)), r)...)
		want -= int64(n) * r[CPU]
	}
	return cell
}

func sumLimits(m *Machine) Resources {
	var s Resources
	for _, t := range m.Tasks {
		s = s.Add(t.Limit)
	}
	return s
}

func packed(cell *Cell) *Cell {
	out := *cell
	out.Pending = slices.Clone(cell.Pending)
	for i := range out.Pending {
		out.Pending[i].Pack = true
	}
	return &out
}

func pendingTasks(plan *Plan) int {
	n := 0
	for _, e := range plan.Pending {
		n += len(e.Tasks)
	}
	return n
}

var spreadSeeds uint64 = 300

// Spreading by default never leaves more tasks pending than packing the
// same jobs, on generated cells of jobs of 2-50 tasks at every policy and
// at sampled and whole views.
func TestSpreadNeverLeavesMorePending(t *testing.T) {
	worse, spreadMoved, tight := 0, 0, 0
	for seed := uint64(1); seed <= spreadSeeds; seed++ {
		cell := spreadFamilyCell(rand.New(rand.NewPCG(seed, 36)))
		cfg := DefaultConfig()
		cfg.Policy = Policies[seed%3]
		cfg.FeasibleK = []int{0, 4, 64}[seed/3%3]
		with, without := Schedule(cell, cfg, seed), Schedule(packed(cell), cfg, seed)
		a, b := pendingTasks(with), pendingTasks(without)
		if a > b {
			worse++
			t.Errorf("seed %d (%s, K=%d): %d tasks pending spreading by default, %d packing", seed, cfg.Policy, cfg.FeasibleK, a, b)
		}
		if b > 0 {
			tight++
		}
		if !reflect.DeepEqual(placedOn(with), placedOn(without)) {
			spreadMoved++
		}
	}
	if tight < 30 || spreadMoved < 100 {
		t.Fatalf("%d cells left tasks pending, %d placed differently: the cells test nothing", tight, spreadMoved)
	}
	t.Logf("%d of %d cells left tasks pending packing, %d placed differently spreading", tight, spreadSeeds, spreadMoved)
}
