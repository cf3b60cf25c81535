package fauxmaster

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/internal/cellsim"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// ReplaySeeds are the cells the replay tests record (exported for the
// package's external tests): three in make test,
// the first alone under -short (make check), each a minute of a loaded
// host.
func ReplaySeeds() []uint64 {
	if testing.Short() {
		return []uint64{1}
	}
	return []uint64{1, 2, 3}
}

// Stronger than the placements agreeing: at every recorded pass, the cell
// the replay's pass reads is the cell the recorded pass read (the log
// folded to the pass's position), but for machine versions and submission
// numbers, which are positions of two different logs.
func TestReplayReadsTheRecordedCells(t *testing.T) {
	for _, seed := range ReplaySeeds() {
		w := cellsim.New(cellsim.Config{Seed: seed, Calm: true, Machines: 12, Clients: 3, Duration: 6 * time.Minute})
		if err := w.Run(); err != nil {
			t.Fatal(err)
		}
		log := w.Log().Open(time.Now)
		ctx := context.Background()
		head, _ := log.Head(ctx)
		for _, from := range []int64{0, 400} {
			rec, err := Load(ctx, log, from, head)
			if err != nil {
				t.Fatal(err)
			}
			s, err := newSim(rec, Options{})
			if err != nil {
				t.Fatal(err)
			}
			reads := 0
			s.onRead = func(pos int64) {
				reads++
				recorded, err := projections.StateAt(ctx, log, pos)
				if err != nil {
					t.Fatal(err)
				}
				now := time.UnixMicro(s.rec.passes[s.nextPass-1].commitUS)
				limiter := func() *scheduler.RescheduleLimiter { return scheduler.NewRescheduleLimiter(1e9, 1e9, 0.5) }
				want := comparable(t, master.BuildCell(recorded, now, 5*time.Minute, limiter()))
				got := comparable(t, master.BuildCell(s.st, now, 5*time.Minute, limiter()))
				if got != want {
					t.Fatalf("seed %d from %d: the pass seeded %d (%d of %d) reads another cell than the recorded one", seed, from, pos, s.nextPass, len(s.rec.passes))
				}
			}
			if err := s.run(); err != nil {
				t.Fatal(err)
			}
			if reads < 200 {
				t.Fatalf("seed %d from %d: %d recorded passes read", seed, from, reads)
			}
		}
	}
}

// comparable is a cell as JSON without what differs between two logs of
// the same history: positions (machine versions, submission numbers).
func comparable(t *testing.T, c *scheduler.Cell) string {
	b, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, `"Version"`) && !strings.Contains(l, `"Seq"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
