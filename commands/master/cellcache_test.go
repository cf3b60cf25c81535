package master

import (
	"reflect"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/history"
	"github.com/corralhq/corral/scheduler"
)

// The machines a pass reuses from the last one are the machines a fresh
// build makes: at every step of random histories (placements, failures,
// evictions, drains, machines down and removed, updates), the cell built
// with the core's cache equals the cell built from nothing, and the
// scheduler that remembers machines plans what a fresh one plans.
func TestCachedCellIsTheFreshCell(t *testing.T) {
	remembered := 0
	for seed := uint64(1); seed <= 4; seed++ {
		h := history.New(history.Config{Machines: 20, Users: 3, JobNames: 8, MaxTasks: 8, MaxPending: 60}, seed)
		var cache MachineCache
		remembering, fresh := scheduler.New(scheduler.DefaultConfig()), scheduler.New(scheduler.DefaultConfig())
		remembering.RememberMachines()
		for step := 0; step < 3000; step++ {
			h.Step()
			now := h.Now.Add(time.Second)
			limiter := func() *scheduler.RescheduleLimiter { return scheduler.NewRescheduleLimiter(1e9, 1e9, 0.5) }
			cached := buildCell(h.S, now, 5*time.Minute, limiter(), &cache)
			want := BuildCell(h.S, now, 5*time.Minute, limiter())
			if !reflect.DeepEqual(cached, want) {
				t.Fatalf("seed %d step %d (position %d): the cached cell differs from a fresh build", seed, step, h.S.Position)
			}
			// Every step: the remembering scheduler's verdicts from one
			// pass must hold in the next.
			a, b := remembering.Schedule(cached, uint64(h.S.Position)), fresh.Schedule(want, uint64(h.S.Position))
			remembered += a.Stats.InfeasibleRemembered
			a.Stats, b.Stats = scheduler.Stats{}, scheduler.Stats{}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("seed %d step %d: the remembering scheduler planned otherwise", seed, step)
			}
		}
	}
	if remembered == 0 {
		t.Fatal("no pass skipped a machine known infeasible: the memory is not exercised")
	}
	t.Logf("%d checks skipped as known infeasible", remembered)
}
