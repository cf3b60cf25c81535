package workload

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/corralhq/corral/scheduler"
)

// CompactionMode says how machines are taken out of the cell.
type CompactionMode string

const (
	// CompactRandom removes machines at random, as Borg's §5.1 does, so the
	// compacted cell keeps the original mix of machine kinds: a bisection
	// over how many machines of a seeded random order are kept. When the
	// workload does not fit the whole cell, the cell is cloned first.
	CompactRandom CompactionMode = "random"
	// CompactLargestFirst removes the machines with the least capacity in
	// the resource that sets the lower bound first, then, among equals, in
	// the resources the workload asks most of (ties in a seeded random
	// order): the order the lower bound assumes, so the bound of the
	// machines kept is the workload's wherever the binding resource's
	// largest machines hold the other resources too (OpenB), and the ratio
	// to it measures the packing alone. It never clones.
	CompactLargestFirst CompactionMode = "largest-first"
)

// CompactionConfig tunes a cell-compaction run (Borg §5.1).
type CompactionConfig struct {
	Mode      CompactionMode
	Seeds     int              // experiments, each with its own random order; 11 in the paper
	FirstSeed uint64           // seeds are FirstSeed, FirstSeed+1, ...
	Scheduler scheduler.Config // the policy under test is Scheduler.Policy
	// MaxPending is the share of tasks that may stay pending for the
	// workload to count as fitting (the paper let up to 0.2% of very picky
	// tasks go pending).
	MaxPending float64
	// MaxClones bounds the cloning of the cell, in random mode, when the
	// workload does not fit on all its machines (as the paper did: it
	// cloned the cell a few times before compaction). 1: never clone.
	MaxClones int
	// Workers run seeds in parallel; results do not depend on it.
	Workers int
	// Stable is how far above the answer the fit must hold: with relaxed
	// randomization, whether a cell size fits is not monotone (a seed can
	// fit 1,201 machines and miss 1,250), so a bisection alone lands
	// anywhere in such a band. The answer is moved up until every size
	// from it to Stable machines more fits. 0 trusts the bisection.
	Stable int
}

// DefaultCompaction is the paper's setting: random removal, 11 seeds, 0.2%
// of tasks may stay pending, cloning up to four times.
func DefaultCompaction(policy scheduler.Policy) CompactionConfig {
	cfg := scheduler.DefaultConfig()
	cfg.Policy = policy
	return CompactionConfig{
		Mode: CompactRandom, Seeds: 11, FirstSeed: 1, Scheduler: cfg,
		MaxPending: 0.002, MaxClones: 4, Workers: 1,
	}
}

// CompactionResult is the outcome for one policy.
type CompactionResult struct {
	Policy   scheduler.Policy
	Mode     CompactionMode
	Machines []int // machines needed, per seed; 0 where the workload did not fit
	// Unfit counts the seeds whose workload did not fit even the whole
	// (cloned) cell; Pending is the most tasks such a seed left pending.
	Unfit      int
	Pending    int
	P90        int // the 90th percentile of Machines: the result the paper reports; 0 if a seed did not fit
	Min, Max   int
	LowerBound int           // of the original cell
	Binding    scheduler.Dim // the resource that sets the lower bound
	Ratio      float64       // P90 / LowerBound
	// OrderBounds is, per seed, the lower bound for the machines that seed
	// keeps (PrefixBound of its removal order); OrderRatio is the worst
	// seed's machines over its own bound. Under random removal this is
	// the measure of packing: a random subset needs more machines than
	// the largest ones LowerBound counts.
	OrderBounds []int
	OrderRatio  float64
	Clones      int // the largest clone factor a seed needed (1: none)
	Packs       int // from-scratch packings run
}

// Compact finds how few machines the workload fits on under cfg's policy,
// once per seed, re-packing the whole workload from scratch for every probe
// (see CompactionMode). It is pure: no clock, no I/O.
func Compact(w *Workload, cfg CompactionConfig) (CompactionResult, error) {
	res := CompactionResult{Policy: cfg.Scheduler.Policy, Mode: cfg.Mode}
	if res.Mode == "" {
		res.Mode = CompactRandom
	}
	lb, binding, err := LowerBound(w.Machines, w.Tasks)
	if err != nil {
		return res, err
	}
	res.LowerBound, res.Binding = lb, binding
	seeds := max(cfg.Seeds, 1)
	runs := make([]compactRun, seeds)
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(cfg.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				runs[i] = compactOnce(w, cfg, res.Mode, cfg.FirstSeed+uint64(i))
			}
		}()
	}
	for i := range seeds {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, r := range runs {
		if r.err != nil {
			return res, r.err
		}
		res.Machines = append(res.Machines, r.machines)
		res.OrderBounds = append(res.OrderBounds, r.orderBound)
		if r.machines > 0 {
			res.OrderRatio = max(res.OrderRatio, float64(r.machines)/float64(r.orderBound))
		}
		res.Packs += r.packs
		res.Clones = max(res.Clones, r.clones)
		if r.machines == 0 {
			res.Unfit++
			res.Pending = max(res.Pending, r.pending)
		}
	}
	if res.Unfit > 0 {
		return res, nil
	}
	sorted := slices.Sorted(slices.Values(res.Machines))
	res.Min, res.Max = sorted[0], sorted[len(sorted)-1]
	res.P90 = percentile(sorted, 0.9)
	res.Ratio = float64(res.P90) / float64(lb)
	return res, nil
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []int, q float64) int {
	rank := int(float64(len(sorted))*q + 0.999999)
	return sorted[max(rank, 1)-1]
}

type compactRun struct {
	machines, packs, clones, pending, orderBound int
	err                                          error
}

// compactOnce runs one seed.
func compactOnce(w *Workload, cfg CompactionConfig, mode CompactionMode, seed uint64) compactRun {
	var run compactRun
	allowed := int(cfg.MaxPending * float64(len(w.Tasks)))
	// Only the counts are read: no why-pending answers for the probes
	// that do not fit.
	cfg.Scheduler.NoExplanations = true
	pack := func(machines []*scheduler.Machine) *scheduler.Plan {
		run.packs++
		return scheduler.Schedule(&scheduler.Cell{Machines: machines, Pending: w.Tasks}, cfg.Scheduler, seed)
	}
	fits := func(plan *scheduler.Plan) bool { return plan.Stats.Pending-plan.Stats.Placed <= allowed }

	// The cell, cloned as often as needed for the workload to fit.
	cell := w.Machines
	full := pack(cell)
	maxClones := max(cfg.MaxClones, 1)
	if mode == CompactLargestFirst {
		maxClones = 1
	}
	for run.clones = 1; !fits(full); {
		if run.clones >= maxClones {
			run.pending = full.Stats.Pending - full.Stats.Placed
			return run
		}
		run.clones++
		cell = cloneMachines(w.Machines, run.clones)
		full = pack(cell)
	}
	order := RemovalOrder(cell, w.Tasks, mode, seed)
	run.orderBound = PrefixBound(order, w.Tasks)
	run.machines = SmallestFit(max(run.orderBound-1, 0), len(order), cfg.Stable, func(n int) bool { return fits(pack(order[:n])) })
	return run
}

// RemovalOrder is the order a seed keeps the machines in: compaction keeps
// a prefix of it and removes the rest. It is exported so that a harness
// packing the same prefixes with another scheduler (tools/kubepack) keeps
// the very machines corral kept.
func RemovalOrder(cell []*scheduler.Machine, tasks []scheduler.PendingTask, mode CompactionMode, seed uint64) []*scheduler.Machine {
	rng := rand.New(rand.NewPCG(seed, 0xc0a1))
	order := slices.Clone(cell)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	if mode == CompactLargestFirst {
		// Compact has checked that the machines hold the tasks, and
		// largest-first never clones: LowerBound cannot fail here.
		_, binding, _ := LowerBound(cell, tasks)
		value := capacityValue(order, tasks)
		slices.SortStableFunc(order, func(a, b *scheduler.Machine) int {
			return cmp.Or(cmp.Compare(b.Capacity[binding], a.Capacity[binding]), cmp.Compare(value(b), value(a)))
		})
	}
	return order
}

// SmallestFit finds the fewest machines that fit by bisection over
// (lo, hi], where hi fits and lo does not (fewer machines than the lower
// bound never fit), then moves the answer above any size up to stable
// machines over it that misses: fit is not monotone under relaxed
// randomization, and the answer must not be a lucky size below a band of
// misses.
func SmallestFit(lo, hi, stable int, fits func(n int) bool) int {
	// No size is packed twice: the scan above the answer passes sizes the
	// bisection already packed, and a packing can take seconds here and
	// minutes in another scheduler.
	known := map[int]bool{hi: true} // hi fits: the caller's promise
	packed := func(n int) bool {
		ok, seen := known[n]
		if !seen {
			ok = fits(n)
			known[n] = ok
		}
		return ok
	}
	top := hi
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if packed(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	for n := hi; n <= min(hi+stable, top); n++ {
		if !packed(n) {
			hi = n + 1
		}
	}
	return min(hi, top)
}

// capacityValue weighs a machine's capacity by how much of each resource
// the tasks ask for, relative to the cell's total.
func capacityValue(machines []*scheduler.Machine, tasks []scheduler.PendingTask) func(*scheduler.Machine) float64 {
	var capacity, request scheduler.Resources
	for _, m := range machines {
		capacity = capacity.Add(m.Capacity)
	}
	for i := range tasks {
		request = request.Add(tasks[i].Resources)
	}
	var weight [scheduler.ScoredDims]float64
	for d := scheduler.Dim(0); d < scheduler.ScoredDims; d++ {
		if capacity[d] > 0 {
			share := float64(request[d]) / float64(capacity[d])
			weight[d] = share * share / float64(capacity[d])
		}
	}
	return func(m *scheduler.Machine) float64 {
		var v float64
		for d := scheduler.Dim(0); d < scheduler.ScoredDims; d++ {
			v += weight[d] * float64(m.Capacity[d])
		}
		return v
	}
}

// cloneMachines returns n copies of the machines; copies after the first
// are renamed name#2, name#3, ...
func cloneMachines(machines []*scheduler.Machine, n int) []*scheduler.Machine {
	out := slices.Clone(machines)
	for k := 2; k <= n; k++ {
		for _, m := range machines {
			c := *m
			c.Name = fmt.Sprintf("%s#%d", m.Name, k)
			out = append(out, &c)
		}
	}
	return out
}
