package cellsim

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	seedFlag   = flag.Uint64("seed", 0, "run this one seed of TestSim, with its trace (0: a time-bounded batch of seeds)")
	budgetFlag = flag.Duration("sim.budget", 15*time.Second, "wall time TestSim spends on its batch of seeds")
)

// seedToReplay is -seed, or CORRAL_SIM_SEED when the flag is not given.
func seedToReplay(t *testing.T) uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	if v := os.Getenv("CORRAL_SIM_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CORRAL_SIM_SEED=%q: %v", v, err)
		}
		return n
	}
	return 0
}

// TestSim runs seeds of the whole-cell simulation for a wall-time budget
// (-sim.budget; 3 s with -short), or exactly one with -seed N or
// CORRAL_SIM_SEED=N. The batch's seeds are new on every run, from
// CORRAL_SIM_BASE when set; a failure names its seed.
func TestSim(t *testing.T) {
	if seed := seedToReplay(t); seed != 0 {
		replay(t, seed)
		return
	}
	budget := *budgetFlag
	if testing.Short() {
		budget = 3 * time.Second
	}
	base := uint64(time.Now().UnixNano())
	if v := os.Getenv("CORRAL_SIM_BASE"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CORRAL_SIM_BASE=%q: %v", v, err)
		}
		base = n
	}
	start := time.Now()
	var (
		next, seeds, steps, simTime atomic.Int64
		mu                          sync.Mutex
		failed                      []string
		wg                          sync.WaitGroup
		total                       World // the counters, summed
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < budget {
				seed := base + uint64(next.Add(1))
				w := New(Config{Seed: seed})
				err := w.Run()
				seeds.Add(1)
				steps.Add(w.Steps)
				simTime.Add(int64(w.now.Sub(epoch0)))
				mu.Lock()
				total.add(w)
				mu.Unlock()
				if err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("seed %d: %v\n\treplay it: go test ./internal/cellsim -run 'TestSim$' -seed %d -v", seed, err, seed))
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	perMin := func(n int64) float64 { return float64(n) / took.Minutes() }
	t.Logf("%d seeds (from %d), %d steps, %s simulated in %s: %.0f seeds and %.0f steps per minute",
		seeds.Load(), base+1, steps.Load(), time.Duration(simTime.Load()).Round(time.Second), took.Round(time.Millisecond), perMin(seeds.Load()), perMin(steps.Load()))
	t.Logf("in all: %s", total.counts())
	for _, f := range failed {
		t.Error(f)
	}
}

// replay runs one seed with its trace: the last lines before a failure,
// or all of it in the file CORRAL_SIM_TRACE names.
func replay(t *testing.T, seed uint64) {
	var lines []string
	var file *os.File
	if path := os.Getenv("CORRAL_SIM_TRACE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		file = f
	}
	w := New(Config{Seed: seed, Trace: func(s string) {
		if file != nil {
			fmt.Fprintln(file, s)
		}
		lines = append(lines, s)
		if len(lines) > 4000 {
			lines = append(lines[:0], lines[2000:]...)
		}
	}})
	t.Logf("seed %d: faults %+v", seed, w.faults)
	err := w.Run()
	t.Logf("seed %d: %s", seed, w.Summary())
	if err != nil {
		if len(lines) > 400 {
			lines = lines[len(lines)-400:]
		}
		t.Logf("trace (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
		t.Fatalf("seed %d: %v", seed, err)
	}
}

// Seeds that once found a fault, run on every test run so it stays found.
// Each names what it found.
var seedsThatFoundFaults = []struct {
	seed  uint64
	found string
}{
	{1796672853333027078, "a master's clock stepped back stamped a run's start before another run of the task ended: billed twice"},
	{1796672853333027079, "the same, across a failover to a leader with a slower clock"},
}

func TestSimSeedsThatFoundFaults(t *testing.T) {
	for _, s := range seedsThatFoundFaults {
		t.Run(strconv.FormatUint(s.seed, 10), func(t *testing.T) {
			if err := New(Config{Seed: s.seed}).Run(); err != nil {
				t.Fatalf("seed %d (%s): %v\n\treplay it: go test ./internal/cellsim -run 'TestSim$' -seed %d -v", s.seed, s.found, err, s.seed)
			}
		})
	}
}

// One seed is one history: the same log, byte for byte, and the same
// counts, however often it runs.
func TestSimDeterministic(t *testing.T) {
	run := func() string {
		w := New(Config{Seed: 42, Duration: time.Minute, Settle: 20 * time.Second})
		if err := w.Run(); err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		for p := int64(1); p <= w.log.Head(); p++ {
			row, epoch := w.log.Row(p)
			fmt.Fprintf(h, "%d %s %s %d %d %s\n", p, row.Stream, row.Type, epoch, row.OccurredAt.UnixMicro(), row.IdempotencyKey)
			h.Write(row.Payload)
		}
		return fmt.Sprintf("%x %s", h.Sum(nil), w.Summary())
	}
	a, b := run(), run()
	if a != b {
		t.Fatalf("seed 42 ran twice differently:\n%s\n%s", a, b)
	}
}

// BenchmarkSim reports how many seeds (of the default shape: three
// simulated minutes of faults and 45 s to settle) and steps run per minute
// of wall time on one core.
func BenchmarkSim(b *testing.B) {
	var steps int64
	start := time.Now()
	for i := 0; i < b.N; i++ {
		w := New(Config{Seed: uint64(i + 1)})
		if err := w.Run(); err != nil {
			b.Fatalf("seed %d: %v", i+1, err)
		}
		steps += w.Steps
	}
	mins := time.Since(start).Minutes()
	b.ReportMetric(float64(b.N)/mins, "seeds/min")
	b.ReportMetric(float64(steps)/mins, "steps/min")
	b.ReportMetric(float64(steps)/float64(b.N), "steps/seed")
}
