package cellsim

import (
	"slices"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
)

// TestSimCoversTheCatalogue: across a fixed set of seeds, the simulation
// writes every event type of the catalogue and lands every command, so
// what it proves is proved of every kind of history the master can write.
func TestSimCoversTheCatalogue(t *testing.T) {
	seen, landed := map[string]int{}, map[string]int{}
	for seed := uint64(1); seed <= simCoverageSeeds+1; seed++ {
		cfg := Config{Seed: seed, Duration: 2 * time.Minute}
		if seed == 1 || seed == simCoverageSeeds+1 {
			// Calm and long enough for tasks to outlive the reservation's
			// startup period (5 minutes), so that estimates move. A calm
			// history moves a reservation past the threshold 0-3 times,
			// as its placements fall, so two of them are run: coverage
			// must not hang on one history's luck.
			cfg.Calm, cfg.Duration = true, 7*time.Minute
		}
		w := New(cfg)
		if err := w.Run(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for p := int64(1); p <= w.log.Head(); p++ {
			row, _ := w.log.Row(p)
			seen[row.Type]++
		}
		for name, n := range w.Landed {
			landed[name] += n
		}
	}
	var missing []string
	for _, typ := range events.Types() {
		if seen[typ] == 0 && !slices.Contains(notSimulated, typ) {
			missing = append(missing, typ)
		}
	}
	t.Logf("event types over %d seeds: %v", simCoverageSeeds+1, seen)
	if len(missing) > 0 {
		t.Errorf("no seed wrote %v", missing)
	}
	var notLanded []string
	for _, name := range commands.Names() {
		if landed[name] == 0 {
			notLanded = append(notLanded, name)
		}
	}
	t.Logf("commands landed over %d seeds: %v", simCoverageSeeds+1, landed)
	if len(notLanded) > 0 {
		t.Errorf("no seed landed a %v", notLanded)
	}
}

const simCoverageSeeds = 10

// notSimulated are the catalogue's types no simulated history writes, each
// for a reason.
var notSimulated = []string{
	// Nothing writes it: checkpoints are stored beside the log
	// (SaveCheckpoint), not in it.
	"CheckpointWritten",
}
