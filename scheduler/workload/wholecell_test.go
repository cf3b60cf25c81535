package workload

import (
	"path/filepath"
	"testing"

	"github.com/corralhq/corral/scheduler"
)

// OpenB's whole cell in one pass at the settings a cell runs with (hybrid,
// K=64): 4,654 prod tasks (priority 9), 100 batch (4) and 3,398
// best-effort (0); its GPUs are 98% asked for. A pool of 64 random machines
// per class left 390-700 fractional-GPU tasks pending beside GPUs stranded
// on machines without CPU; the larger pool for classes asking for a scarce
// resource brought that to 8-22, nearly all batch 8-GPU tasks of 88-120
// cores that need a machine of the largest kind to themselves. The rerun
// (scheduler/reorder.go) places those first when that costs no prod task,
// at the price of best-effort tasks, as a later pass would by preemption.
// So: every prod task placed, batch tasks left pending only where placing
// them would cost prod, and best-effort within bounds that the stranding
// of the small pool would break.
func TestOpenBWholeCellAtDefaults(t *testing.T) {
	w, err := LoadWorkload(filepath.Join(workloadsDir(t), "openb"))
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 3; seed++ {
		plan := scheduler.Schedule(w.Cell(), scheduler.DefaultConfig(), seed)
		var left [scheduler.MaxPriority + 1]int
		for _, ex := range plan.Pending {
			left[ex.Priority] += len(ex.Tasks)
		}
		t.Logf("seed %d: %d of %d tasks unplaced: prod %d, batch %d, best-effort %d; rerun %d, kept %d",
			seed, plan.Stats.Pending-plan.Stats.Placed, len(w.Tasks), left[9], left[4], left[0], plan.Stats.Reruns, plan.Stats.RerunKept)
		if left[9] != 0 || left[4] > 10 || left[0] > 200 {
			t.Errorf("seed %d: pending prod %d (want 0), batch %d (want <= 10), best-effort %d (want <= 200)", seed, left[9], left[4], left[0])
		}
		if left[4] > 0 && plan.Stats.Reruns == 0 {
			t.Errorf("seed %d: batch tasks pending and no rerun tried", seed)
		}
	}
}
