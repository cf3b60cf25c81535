package workload

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"github.com/corralhq/corral/scheduler"
)

// benchWorkload is the 10,000-machine, 100,000-task cell of the shared
// synthetic-10k folder (or of -workloads). A benchmark that cannot read it
// fails: a figure measured on some other cell would pass for this one.
func benchWorkload(b *testing.B) *Workload { return sharedWorkload(b, "synthetic-10k") }

// sharedWorkload loads the shared workload folder name, failing the
// benchmark when it cannot.
func sharedWorkload(b *testing.B, name string) *Workload {
	b.Helper()
	w, err := LoadWorkload(filepath.Join(workloadsDir(b), name))
	if err != nil {
		b.Fatalf("the %s workload: %v", name, err)
	}
	return w
}

// BenchmarkGrid places each shared workload's whole cell in one pass, per
// policy and relaxed-randomization budget K, and reports the speed, the
// tasks left pending and the machines used, side by side.
func BenchmarkGrid(b *testing.B) {
	for _, name := range []string{"openb", "synthetic-10k"} {
		w := sharedWorkload(b, name)
		cell := w.Cell()
		for _, policy := range scheduler.Policies {
			for _, k := range []int{16, 64, 256} {
				b.Run(fmt.Sprintf("%s/%s/K=%d", name, policy, k), func(b *testing.B) {
					cfg := scheduler.DefaultConfig()
					cfg.Policy, cfg.FeasibleK, cfg.NoExplanations = policy, k, true
					var plan *scheduler.Plan
					for b.Loop() {
						plan = scheduler.Schedule(cell, cfg, 1)
					}
					used := map[string]bool{}
					for _, p := range plan.Placements {
						used[p.Machine] = true
					}
					b.ReportMetric(float64(plan.Stats.Placed)*float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
					b.ReportMetric(float64(plan.Stats.Pending-plan.Stats.Placed), "unplaced")
					b.ReportMetric(float64(len(used)), "machines")
				})
			}
		}
	}
}

// BenchmarkScheduleFromScratch places a whole cell's workload (10,000
// machines, 100,000 tasks in about 5,000 jobs) on empty machines in one
// pass. Target: at least 100,000 tasks/s, the README's Performance row.
func BenchmarkScheduleFromScratch(b *testing.B) {
	w := benchWorkload(b)
	for _, policy := range scheduler.Policies {
		b.Run(string(policy), func(b *testing.B) {
			cfg := scheduler.DefaultConfig()
			cfg.Policy = policy
			cell := w.Cell()
			var plan *scheduler.Plan
			b.ReportAllocs()
			for b.Loop() {
				plan = scheduler.Schedule(cell, cfg, 1)
			}
			b.ReportMetric(float64(plan.Stats.Placed)*float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
			b.ReportMetric(float64(plan.Stats.Pending-plan.Stats.Placed), "unplaced")
			b.StopTimer()
			b.ReportMetric(peakHeapMiB(func() { plan = scheduler.Schedule(cell, cfg, 1) }), "peak-heap-MiB")
		})
	}
}

// peakHeapMiB runs f and returns the largest heap of live and not yet
// collected objects seen while it ran (the input it reads included),
// sampled every millisecond.
func peakHeapMiB(f func()) float64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	read := func() {
		metrics.Read(sample)
		peak = max(peak, sample[0].Value.Uint64())
	}
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				read()
			}
		}
	}()
	f()
	close(done)
	<-sampled
	read()
	return float64(peak) / (1 << 20)
}

// BenchmarkOnlinePass schedules 1,000 new tasks (50 new jobs of 20 tasks,
// shaped like jobs of the workload) into the 10,000-machine cell once its workload is placed (80% of
// its CPU requested). Target: at most 100 ms per pass.
func BenchmarkOnlinePass(b *testing.B) {
	w := benchWorkload(b)
	full := scheduler.Schedule(w.Cell(), scheduler.DefaultConfig(), 1)
	cell := occupied(w, full)
	cell.Pending = newArrivals(w, 50, 20)
	for _, policy := range scheduler.Policies {
		b.Run(string(policy), func(b *testing.B) {
			cfg := scheduler.DefaultConfig()
			cfg.Policy = policy
			var plan *scheduler.Plan
			b.ReportAllocs()
			for b.Loop() {
				plan = scheduler.Schedule(cell, cfg, 2)
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/pass")
			b.ReportMetric(float64(plan.Stats.Placed), "placed")
			b.ReportMetric(float64(plan.Stats.Preemptions), "preempted")
		})
	}
}

// occupied returns the workload's cell with a plan's placements applied, as
// the projection would hold it.
func occupied(w *Workload, plan *scheduler.Plan) *scheduler.Cell {
	byName := map[string]*scheduler.Machine{}
	cell := &scheduler.Cell{}
	for _, m := range w.Machines {
		c := *m
		c.Tasks = nil
		byName[c.Name] = &c
		cell.Machines = append(cell.Machines, &c)
	}
	byRef := map[scheduler.TaskRef]*scheduler.PendingTask{}
	for i := range w.Tasks {
		byRef[w.Tasks[i].Ref] = &w.Tasks[i]
	}
	for _, p := range plan.Placements {
		t := byRef[p.Task]
		m := byName[p.Machine]
		m.Version++
		m.Tasks = append(m.Tasks, scheduler.PlacedTask{Ref: t.Ref, Priority: t.Priority, Limit: t.Resources, Reservation: t.Resources,
			Ports: p.Ports, Package: t.Package})
	}
	return cell
}

// BenchmarkPassSize is a grid of cell sizes (machines x 10 tasks each, from
// the generator) for the default configuration.
func BenchmarkPassSize(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		w := Synthetic(SyntheticConfig{Seed: 5, Machines: n, Tasks: 10 * n, Jobs: max(n/2, 1), Users: 50, CPUFill: 0.8,
			RackSize: 40, RacksPerPower: 5, ConstrainedJobs: 0.1})
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
			cell := w.Cell()
			var plan *scheduler.Plan
			for b.Loop() {
				plan = scheduler.Schedule(cell, scheduler.DefaultConfig(), 1)
			}
			b.ReportMetric(float64(plan.Stats.Placed)*float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// newArrivals makes jobs new jobs of size tasks each, copying the
// requirements of jobs spread evenly through the workload.
func newArrivals(w *Workload, jobs, size int) []scheduler.PendingTask {
	var out []scheduler.PendingTask
	for j := range jobs {
		like := w.Tasks[j*len(w.Tasks)/jobs]
		for i := range size {
			t := like
			t.Ref = scheduler.TaskRef{User: "new-" + like.Ref.User, Job: fmt.Sprintf("new-%d-%s", j, like.Ref.Job), Index: int32(i)}
			t.Seq = int64(1<<32 + j*size + i)
			out = append(out, t)
		}
	}
	return out
}

// BenchmarkStuckQueue is the pass of a busy cell whose queue holds work
// that fits nowhere: the 10,000-machine cell with its workload placed,
// 1,000 pending tasks too large for any machine's free room, and 1% of
// the machines changing between passes (a task ended, one started). A
// scheduler that remembers machines checks a stuck class against the
// machines that changed; a fresh one against all of them. Explaining the
// stuck classes (the master does, every pass) re-examines every machine
// either way.
func BenchmarkStuckQueue(b *testing.B) {
	w := benchWorkload(b)
	full := scheduler.Schedule(w.Cell(), scheduler.DefaultConfig(), 1)
	base := occupied(w, full)
	stuck := newArrivals(w, 50, 20)
	for i := range stuck {
		stuck[i].Resources[scheduler.CPU] = 50_000 // more than any machine has free
		stuck[i].Priority = 0                      // and nothing to preempt
	}
	for _, c := range []struct{ remember, explain bool }{{false, true}, {true, true}, {false, false}, {true, false}} {
		b.Run(fmt.Sprintf("remember=%v/explain=%v", c.remember, c.explain), func(b *testing.B) {
			cfg := scheduler.DefaultConfig()
			cfg.NoExplanations = !c.explain
			s := scheduler.New(cfg)
			if c.remember {
				s.RememberMachines()
			}
			cell := &scheduler.Cell{Machines: slices.Clone(base.Machines), Pending: stuck}
			rng := rand.New(rand.NewPCG(3, 4))
			var plan *scheduler.Plan
			for b.Loop() {
				for range len(cell.Machines) / 100 {
					i := rng.IntN(len(cell.Machines))
					m := *cell.Machines[i]
					m.Version++
					cell.Machines[i] = &m
				}
				plan = s.Schedule(cell, uint64(b.N))
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/pass")
			b.ReportMetric(float64(plan.Stats.Placed), "placed")
		})
	}
}
