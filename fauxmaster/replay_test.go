package fauxmaster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/fauxmaster"
	"github.com/corralhq/corral/internal/cellsim"
)

// recordCell runs the whole-cell simulation (the real commands, scheduling
// core and link decisions; simulated agents and processes) without faults
// and returns its log: a recorded cell with submissions, updates, rolling
// updates, kills, alloc sets, drains, health checks and failures.
func recordCell(t *testing.T, seed uint64) events.Store {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if log := recorded[seed]; log != nil {
		return log
	}
	w := cellsim.New(cellsim.Config{Seed: seed, Calm: true, Machines: 12, Clients: 3, Duration: 6 * time.Minute})
	if err := w.Run(); err != nil {
		t.Fatalf("recording the cell (seed %d): %v", seed, err)
	}
	recorded[seed] = w.Log().Open(time.Now)
	return recorded[seed]
}

// recorded keeps each seed's cell for the tests that replay it (the
// replays only read it).
var (
	mu       sync.Mutex
	recorded = map[uint64]events.Store{}
)

func replay(t *testing.T, log events.Store, from int64, opt fauxmaster.Options) *fauxmaster.Report {
	t.Helper()
	ctx := context.Background()
	head, err := log.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := fauxmaster.Load(ctx, log, from, head)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := fauxmaster.Run(rec, opt)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		if err := rep.WriteText(os.Stdout, 10); err != nil {
			t.Fatal(err)
		}
	}
	return rep
}

// minSameShare is the bar: an unchanged replay puts at least 99%
// of the recorded runs on the machines they ran on (these cells: 100%).
const minSameShare = 0.99

func TestUnchangedReplay(t *testing.T) {
	for _, seed := range fauxmaster.ReplaySeeds() {
		log := recordCell(t, seed)
		for _, from := range []int64{0, 400} {
			rep := replay(t, log, from, fauxmaster.Options{})
			pl := rep.Placements
			if pl.Recorded < 300 {
				t.Fatalf("seed %d from %d: only %d placements recorded: not a test", seed, from, pl.Recorded)
			}
			if pl.SameShare() < minSameShare {
				t.Errorf("seed %d from %d: %d of %d placements on the recorded machine (%.1f%%), want %.0f%%",
					seed, from, pl.Same, pl.Recorded, 100*pl.SameShare(), 100*minSameShare)
			}
			for _, d := range pl.Differences {
				if d.Why == "" || d.Task == "" {
					t.Fatalf("a difference without its task or cause: %+v", d)
				}
				t.Logf("seed %d from %d: %s run %d: recorded %s, simulated %s: %s", seed, from, d.Task, d.Run, d.Recorded, d.Simulated, d.Why)
			}
			// Same placements, same cell: the report's two sides agree.
			if r, s := rep.Recorded, rep.Simulated; r.Placed != s.Placed || r.Evicted != s.Evicted || r.Never != s.Never {
				t.Errorf("seed %d from %d: placed %d/%d, evicted %d/%d, pending at the end %d/%d (recorded/simulated)",
					seed, from, r.Placed, s.Placed, r.Evicted, s.Evicted, r.Never, s.Never)
			}
			if rep.Recorded.MachinesUsed != rep.Simulated.MachinesUsed {
				t.Errorf("seed %d from %d: machines used %d recorded, %d simulated", seed, from, rep.Recorded.MachinesUsed, rep.Simulated.MachinesUsed)
			}
		}
	}
}

func TestReplayIsDeterministic(t *testing.T) {
	log := recordCell(t, 1)
	opt := fauxmaster.Options{Seed: 9, Change: fauxmaster.Change{RemovePercent: 30}}
	a, b := replay(t, log, 0, opt), replay(t, log, 0, opt)
	a.WallSeconds, b.WallSeconds = 0, 0
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Fatal("two replays of one recording, change and seed differ")
	}
}

func TestRemovingHalfTheMachinesMakesTasksWait(t *testing.T) {
	for _, seed := range []uint64{2, 3} {
		log := recordCell(t, seed)
		same := replay(t, log, 0, fauxmaster.Options{})
		half := replay(t, log, 0, fauxmaster.Options{Seed: seed, Change: fauxmaster.Change{RemovePercent: 50}})
		if half.Simulated.Pending.Mean <= same.Simulated.Pending.Mean || half.Simulated.Pending.P90 < same.Simulated.Pending.P90 {
			t.Errorf("seed %d: pending mean %.2f s, p90 %.2f s with half the machines; %.2f s, %.2f s with all",
				seed, half.Simulated.Pending.Mean, half.Simulated.Pending.P90, same.Simulated.Pending.Mean, same.Simulated.Pending.P90)
		}
		if half.Simulated.MachinesUsed > 6 {
			t.Errorf("seed %d: %d machines used of the 6 left", seed, half.Simulated.MachinesUsed)
		}
		if half.Placements.SameShare() >= same.Placements.SameShare() {
			t.Errorf("seed %d: half the machines gone, yet %.2f of placements as recorded (unchanged: %.2f)", seed,
				half.Placements.SameShare(), same.Placements.SameShare())
		}
	}
}

func TestAddedMachinesAreUsed(t *testing.T) {
	log := recordCell(t, 1)
	g, err := fauxmaster.ParseMachines("4x64c256g")
	if err != nil {
		t.Fatal(err)
	}
	rep := replay(t, log, 0, fauxmaster.Options{Change: fauxmaster.Change{Add: []fauxmaster.MachineGroup{g}, Policy: "worst-fit"}})
	if rep.Simulated.MachinesUsed <= rep.Recorded.MachinesUsed {
		t.Errorf("4 big machines added under worst-fit: %d machines used, recorded %d", rep.Simulated.MachinesUsed, rep.Recorded.MachinesUsed)
	}
}

func TestBadChangesAreRefused(t *testing.T) {
	for _, s := range []string{"", "x", "0x4c4g", "-1x4c4g", "4x0c4g", "4x4c", "100001x1c1g", "4x4c4g99gpu", "4x1e9c4g"} {
		t.Run("add "+s, func(t *testing.T) {
			if _, err := fauxmaster.ParseMachines(s); err == nil {
				t.Errorf("--add %q accepted", s)
			}
		})
	}
	for _, s := range []string{"", "-1%", "101%", "NaN", "ten"} {
		t.Run("remove "+s, func(t *testing.T) {
			if _, err := fauxmaster.ParseRemove(s); err == nil {
				t.Errorf("--remove %q accepted", s)
			}
		})
	}
	log := recordCell(t, 2)
	ctx := context.Background()
	head, _ := log.Head(ctx)
	for _, w := range [][2]int64{{-1, head}, {10, 10}, {head, head + 1}, {20, 10}} {
		t.Run(fmt.Sprint("window ", w), func(t *testing.T) {
			if _, err := fauxmaster.Load(ctx, log, w[0], w[1]); err == nil {
				t.Errorf("window (%d, %d] of a %d-event log accepted", w[0], w[1], head)
			}
		})
	}
	rec, err := fauxmaster.Load(ctx, log, 0, head)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fauxmaster.Run(rec, fauxmaster.Options{Change: fauxmaster.Change{Policy: "fastest"}}); err == nil {
		t.Error("policy \"fastest\" accepted")
	}
}

// A job given a lower priority waits behind the others, and a quota cut
// refuses the submissions it no longer admits.
func TestJobAndQuotaChanges(t *testing.T) {
	log := recordCell(t, 3)
	low, err := fauxmaster.ParseJobChange("*/*:priority=0")
	if err != nil {
		t.Fatal(err)
	}
	rep := replay(t, log, 0, fauxmaster.Options{Change: fauxmaster.Change{Jobs: []fauxmaster.JobChange{low}}})
	for _, g := range rep.Simulated.Groups {
		if g.Band != "best-effort" {
			t.Errorf("every job at priority 0, yet %s has tasks in %s", g.User, g.Band)
		}
	}
	if !strings.Contains(rep.Change, "--job */*:priority=0") {
		t.Errorf("change: %s", rep.Change)
	}
	q, err := fauxmaster.ParseQuotaChange("u0/production=1m,1Mi")
	if err != nil {
		t.Fatal(err)
	}
	cut := replay(t, log, 0, fauxmaster.Options{Change: fauxmaster.Change{Quotas: []fauxmaster.QuotaChange{q}}})
	if cut.Refused["SubmitJob"] == 0 {
		t.Errorf("u0's production quota cut to nothing, yet no submission refused: %v", cut.Refused)
	}
	// Each refusal says why, as the command did; every one is counted.
	why := map[string]int{}
	for _, r := range cut.RefusedWhy {
		why[r.Command] += r.Count + r.Others
		if r.Reason == "" || r.Count <= 0 {
			t.Errorf("refusal %+v: want a reason and a count", r)
		}
	}
	if !maps.Equal(why, cut.Refused) {
		t.Errorf("refusals by reason add up to %v, want %v", why, cut.Refused)
	}
	if i := slices.IndexFunc(cut.RefusedWhy, func(r fauxmaster.Refusal) bool {
		return r.Command == "SubmitJob" && strings.Contains(r.Reason, "quota")
	}); i < 0 {
		t.Errorf("no submission refused for quota: %v", cut.RefusedWhy)
	}
	for _, bad := range []string{"alice:priority=1", "a/b:priority=12", "a/b:scale=0", "a/b:speed=2", "[/b:priority=1"} {
		t.Run("job "+bad, func(t *testing.T) {
			if _, err := fauxmaster.ParseJobChange(bad); err == nil {
				t.Errorf("--job %q accepted", bad)
			}
		})
	}
	for _, bad := range []string{"alice=1,1Gi", "alice/production=1", "alice/production=-1,1Gi", "alice/production=1,lots"} {
		t.Run("quota "+bad, func(t *testing.T) {
			if _, err := fauxmaster.ParseQuotaChange(bad); err == nil {
				t.Errorf("--quota %q accepted", bad)
			}
		})
	}
}
