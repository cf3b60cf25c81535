package agent

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/events"
)

// TestUsageWindowsTileCrashLoops: a task's windows, polled through crash
// loops, samples, restarts and a clock stepped back, never overlap and
// leave no gap: each starts where the last one ended (a window runs to
// the poll, not to the process's exit).
func TestUsageWindowsTileCrashLoops(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		ref := &events.TaskRef{User: "u", Job: "j"}
		now := time.Unix(1_700_000_000, 0)
		var u usage
		u.begin(now)
		running := true
		var lastEnd int64
		for step := range 400 {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			switch r := rng.IntN(10); {
			case r < 3 && running:
				u.sample(now, cgroup.Stats{CPUNanos: uint64(step) * 1e7, MemoryBytes: int64(rng.IntN(1 << 20))})
			case r < 5 && running:
				u.finish(now, nil)
				running = false
			case r < 7 && !running:
				u.begin(now)
				running = true
			case r == 7:
				now = now.Add(-time.Duration(rng.IntN(5000)) * time.Millisecond) // a clock step back
			default:
				s := u.report(ref, now, true)
				if s.WindowEndUs <= s.WindowStartUs {
					continue // empty: the clock stepped back; nothing moved
				}
				if lastEnd != 0 && s.WindowStartUs != lastEnd {
					t.Fatalf("seed %d step %d: window [%d, %d] after one that ended at %d", seed, step, s.WindowStartUs, s.WindowEndUs, lastEnd)
				}
				if s.Window.CpuCoreSeconds < 0 || s.Window.MemoryBytes < 0 {
					t.Fatalf("seed %d step %d: negative usage %v", seed, step, s.Window)
				}
				lastEnd = s.WindowEndUs
			}
		}
		if lastEnd == 0 {
			t.Fatalf("seed %d: no window", seed)
		}
	}
}
