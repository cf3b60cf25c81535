package fauxmaster_test

import (
	"flag"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/corralhq/corral/fauxmaster"
	"github.com/corralhq/corral/internal/shareddata"
)

var googleShareFlag = flag.Float64("google.share", 0.02, "share of the Google trace's machines (and their tasks) to replay")

// googleTrace is the public trace beside the checkout.
func googleTrace(t *testing.T) string {
	t.Helper()
	return shareddata.Dir(t, shareddata.GoogleTrace)
}

// The Google trace's seven hours replayed through corral: the trace's
// submissions and kills made again, corral's scheduler placing them on the
// published machine mix, against what Borg recorded. make test replays a
// 2% slice; make google-replay the whole cell.
func TestGoogleTraceReplay(t *testing.T) {
	start := time.Now()
	st, evs, err := fauxmaster.GoogleTrace(googleTrace(t), fauxmaster.GoogleOptions{Share: *googleShareFlag, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := fauxmaster.FromEvents(st, evs)
	if err != nil {
		t.Fatal(err)
	}
	loaded := time.Since(start)
	// Borg's passes took seconds on this cell; corral's own run a second
	// after a change (the trace has no pass positions to replay).
	defer debug.SetGCPercent(debug.SetGCPercent(400)) // as corral sim runs it
	rep, err := fauxmaster.Run(rec, fauxmaster.Options{PassDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events, loaded in %s", len(evs), loaded.Round(time.Millisecond))
	if testing.Verbose() {
		rep.WriteText(os.Stdout, 10)
	}
	if rep.Recorded.Placed < 1000 || rep.Recorded.Evicted == 0 {
		t.Fatalf("the trace as recorded: %d placements, %d evictions: not the trace", rep.Recorded.Placed, rep.Recorded.Evicted)
	}
	if rep.Simulated.Placed < rep.Recorded.Placed/2 {
		t.Errorf("corral placed %d tasks, Borg %d", rep.Simulated.Placed, rep.Recorded.Placed)
	}
	// Prod quota may not exceed the cell (Borg's rule too), so the trace's
	// prod quotas are scaled to the cell's; a few prod jobs are refused.
	jobs := 0
	for _, e := range evs {
		if e.Type == "JobSubmitted" {
			jobs++
		}
	}
	if n := rep.Refused["SubmitJob"]; n*20 > jobs {
		t.Errorf("%d of the trace's %d jobs refused at submission", n, jobs)
	}
}
