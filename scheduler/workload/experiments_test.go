package workload

import (
	"flag"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/shareddata"
	"github.com/corralhq/corral/scheduler"
)

// The full §5 experiments on the Google trace's cell run behind
// `make borg-experiments`:
//
//	go test ./scheduler/workload/ -run TestBorgExperiments -borg.share 1 -borg.seeds 11 -timeout 3h -v
//
// make test runs a seeded sample of the cell (1%) with three seeds.
var (
	borgShareFlag = flag.Float64("borg.share", 0.01, "share of the Google cell's machines and tasks to pack")
	borgSeedsFlag = flag.Int("borg.seeds", 3, "compaction seeds per experiment")
)

// googleTraceDir is the public trace beside the shared workloads.
func googleTraceDir(tb testing.TB) string {
	tb.Helper()
	return shareddata.Dir(tb, shareddata.GoogleTrace)
}

func TestBorgExperiments(t *testing.T) {
	w, err := LoadGoogleTrace(googleTraceDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Tasks) < 100_000 || len(w.Machines) != GoogleCellMachines {
		t.Fatalf("the Google cell: %d machines, %d tasks running at the end of the parts", len(w.Machines), len(w.Tasks))
	}
	if *borgShareFlag < 1 {
		w = w.Sample(*borgShareFlag, 1)
	}
	cfg := DefaultCompaction(scheduler.PolicyHybrid)
	cfg.Seeds, cfg.Workers = *borgSeedsFlag, 2
	start := time.Now()
	exps, err := BorgExperiments(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d machines, %d tasks, %d seeds, %s\n%s", w.Name, len(w.Machines), len(w.Tasks), cfg.Seeds,
		time.Since(start).Round(time.Second), ExperimentTable(w, exps))
	byName := map[string]Experiment{}
	for _, e := range exps {
		if e.Machines == 0 {
			t.Errorf("%s: does not fit (%d seeds, %d tasks left pending)", e.Name, e.Result.Unfit, e.Result.Pending)
		}
		byName[e.Name] = e
	}
	// The paper's shape: segregating prod from non-prod, and bucketing
	// requests, each cost machines.
	if e := byName["prod and non-prod segregated"]; e.Versus <= 1 {
		t.Errorf("segregated prod and non-prod need %d machines, %.2fx the baseline: no cost", e.Machines, e.Versus)
	}
	if e := byName["requests in power-of-two buckets"]; e.Versus <= 1 {
		t.Errorf("bucketed requests need %d machines, %.2fx the baseline: no cost", e.Machines, e.Versus)
	}
}
