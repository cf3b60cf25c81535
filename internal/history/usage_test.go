package history

import (
	"testing"

	"github.com/corralhq/corral/internal/usagecheck"
)

// TestUsageWindowsTile: over generated histories (restarts, crash loops,
// kills, evictions, machines lost and back, jobs submitted again under
// their names, late reports), every machine's usage windows tile its time
// and every task's intervals lie inside its runs without overlapping; and
// a task is billed every moment it ran up to its machine's last window.
func TestUsageWindowsTile(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		evs := Golden{Seed: seed, Events: 3000}.Generate()
		c := usagecheck.New()
		for _, e := range evs {
			if err := c.Apply(e); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		if c.Windows == 0 {
			t.Fatalf("seed %d: no usage window in %d events", seed, len(evs))
		}
		for k := range c.Runs {
			if u := c.Unbilled(k); u != 0 {
				t.Errorf("seed %d: task %v ran %s that no window billed", seed, k, u)
			}
		}
	}
}
