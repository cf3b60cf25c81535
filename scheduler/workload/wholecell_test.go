package workload

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/corralhq/corral/scheduler"
)

// OpenB's whole cell in one pass at the settings a cell runs with (hybrid,
// K=64): 4,654 prod tasks (priority 9), 100 batch (4) and 3,398
// best-effort (0); its GPUs are 98% asked for. Every task fits: this test
// fails if the default leaves any pending. History of what it took: a pool
// of 64 random machines per class left 390-700 fractional-GPU tasks
// pending; a larger pool for classes asking for a scarce resource, 8-22;
// the rerun (reorder.go), 22-150 best-effort ones. Then largest first
// within a user's priority, CPU work kept off machines with free GPUs, and
// large shapes protected while their slots are fewer than 16 times their
// tasks: none, on each of 30 seeds tried (seeds 1-5 here).
func TestOpenBWholeCellAtDefaults(t *testing.T) {
	w := openB(t)
	for seed := uint64(1); seed <= 5; seed++ {
		plan := scheduler.Schedule(w.Cell(), scheduler.DefaultConfig(), seed)
		var left [scheduler.MaxPriority + 1]int
		for _, ex := range plan.Pending {
			left[ex.Priority] += len(ex.Tasks)
		}
		t.Logf("seed %d: %d of %d tasks unplaced; rerun %d, kept %d; relocation placed %d, moving %d",
			seed, plan.Stats.Pending-plan.Stats.Placed, len(w.Tasks), plan.Stats.Reruns, plan.Stats.RerunKept, plan.Stats.Unblocked, plan.Stats.Relocated)
		if plan.Stats.Placed != len(w.Tasks) {
			t.Errorf("seed %d: pending prod %d, batch %d, best-effort %d; want every task placed", seed, left[9], left[4], left[0])
		}
	}
}

// The smallest subset of OpenB's machines that holds every task at the
// default settings, one seed per removal order, the fit holding 25
// machines above it: under random removal within 3% of the bound for the
// machines kept (1.015 at worst over three seeds when written;
// kube-scheduler's best profile needs 1,658 machines, 11% above that
// bound); keeping the machines with the most GPU, whose bound is the
// workload's (1,139), within 15% (1.125 at worst over three seeds).
func TestOpenBCompactionAtDefaults(t *testing.T) {
	w := openB(t)
	for _, tc := range []struct {
		mode   CompactionMode
		within float64
	}{{CompactRandom, 1.03}, {CompactLargestFirst, 1.15}} {
		t.Run(fmt.Sprint(tc.mode), func(t *testing.T) {
			cfg := DefaultCompaction(scheduler.PolicyHybrid)
			cfg.Mode, cfg.Seeds, cfg.MaxPending, cfg.Stable = tc.mode, 1, 0, 25
			r, err := Compact(w, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d machines, the bound for those kept %d: %.3f", tc.mode, r.Machines[0], r.OrderBounds[0], r.OrderRatio)
			if r.Unfit > 0 || r.OrderRatio > tc.within {
				t.Errorf("%s: %d machines (unfit seeds %d, %d pending), %.3f of the bound for the machines kept; want within %.0f%%",
					tc.mode, r.Machines[0], r.Unfit, r.Pending, r.OrderRatio, (tc.within-1)*100)
			}
		})
	}
}

// OpenB's 1,248 machines with the most GPU (seed 1's largest-first
// order): the first pass and its rerun leave a near miss, and a new sample
// of machines (reorder.go) places every task. (1,298 until the hybrid
// policy weighed room out of proportion with the small work, which
// places every task there in the first run.)
func TestANewSampleMendsANearMiss(t *testing.T) {
	plan := largestFirstPass(t, 1248)
	if plan.Stats.Placed != plan.Stats.Pending || plan.Stats.RerunKept < 2 || plan.Stats.RerunKept > 3 {
		t.Errorf("%d of %d placed by run %d: want every task placed by a new sample", plan.Stats.Placed, plan.Stats.Pending, plan.Stats.RerunKept)
	}
}

// On 1,288 of them the sampled runs leave tasks pending, too many for a
// new sample, and the other rules tried for a close miss (portfolio.go)
// leave some too, while every machine in view fits them all: the
// whole-view run (reorder.go), the last, places every task. (1,286 until
// the hybrid policy weighed room out of proportion with the small work.)
func TestAWholeViewMendsASampledMiss(t *testing.T) {
	const wholeViewRun = 8 // after the rerun, two new samples and two runs of each other rule
	plan := largestFirstPass(t, 1288)
	if plan.Stats.Placed != plan.Stats.Pending || plan.Stats.RerunKept != wholeViewRun {
		t.Errorf("%d of %d placed by run %d: want every task placed by the whole view (run %d)", plan.Stats.Placed, plan.Stats.Pending, plan.Stats.RerunKept, wholeViewRun)
	}
}

// largestFirstPass runs one pass at the defaults over the first n machines
// of OpenB's largest-first order for seed 1.
func largestFirstPass(t *testing.T, n int) *scheduler.Plan {
	w := openB(t)
	order := RemovalOrder(w.Machines, w.Tasks, CompactLargestFirst, 1)
	plan := scheduler.Schedule(&scheduler.Cell{Machines: order[:n], Pending: w.Tasks}, scheduler.DefaultConfig(), 1)
	t.Logf("%d machines: reruns %d, kept run %d; relocation placed %d", n, plan.Stats.Reruns, plan.Stats.RerunKept, plan.Stats.Unblocked)
	return plan
}

// openB loads the shared OpenB workload.
func openB(t *testing.T) *Workload {
	t.Helper()
	w, err := LoadWorkload(filepath.Join(workloadsDir(t), "openb"))
	if err != nil {
		t.Fatal(err)
	}
	return w
}
