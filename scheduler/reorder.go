package scheduler

// A pass places the queue in order, so a task late in the queue can find
// the only machines it fits on already filled by tasks placed before it
// that would have fit elsewhere. On OpenB's whole cell these are batch
// 8-GPU tasks of 88-120 cores that need a machine of the largest kind to
// themselves, after prod tasks (placed first, by priority) took a share of
// each. Borg and kube-scheduler leave such a task pending until something
// leaves. corral notices it within the pass: a class rejected by a machine
// that had room for it before the pass's first change to that machine is
// contested. If a contested class keeps tasks pending, the pass runs again
// from the same input and seed with those classes at the front of the
// queue, and the plan that leaves fewer tasks pending, compared from the
// highest priority down, is kept; on a tie the first (a rerun that falls
// behind stops there). So a higher priority never loses a placement to a
// promoted task, while the room its tasks took from the contested one can
// be found for them elsewhere. Lower priorities
// can lose placements to it: a promoted task outranks them, and had they
// been running it would have preempted them. Both runs are deterministic,
// so the plan is too. The rerun costs one more pass, and only when a task
// that had room was left out; with the new samples and the whole view
// below, and the other rules of portfolio.go, a pass runs at most nine
// times over. A user can make that happen by submitting tasks that
// contend for the last room, once per pass that fills it: the next pass
// sees the winner running, and the loser no longer contested.

// noteContested marks class c contested when machine mi, which this pass
// changed, rejected it for lack of room it had before the change. Classes
// of or inside allocs are left out: their room is the alloc's.
func (p *pass) noteContested(c *class, mi int32, r *checkResult) {
	if c.contested || c.isAlloc || c.inAlloc || p.gens[mi] == 0 || r.reason < ReasonCPU {
		return
	}
	m := &p.machines[mi]
	if c.req.Fits(Available(m.in.Capacity, m.start.usedLim, m.start.usedRes, c.prod)) {
		c.contested = true
	}
}

// contested returns, per queue item, whether it belongs to a contested
// class that kept tasks pending; nil when there is none.
func (p *pass) contested() []bool {
	if p.contestedLeft() == 0 {
		return nil // most passes: no walk over the queue
	}
	promote := make([]bool, len(p.items))
	for ti, ci := range p.classOf {
		if c := p.classes[ci]; c.contested && len(c.unplaced) > 0 {
			promote[ti] = true
		}
	}
	return promote
}

// contestedLeft counts the tasks of contested classes left pending.
func (p *pass) contestedLeft() int {
	n := 0
	for _, c := range p.classes {
		if c.contested {
			n += len(c.unplaced)
		}
	}
	return n
}

// A pass scores a sample of K feasible machines per class (relaxed
// randomization), and the sample decides where the last fractions of a
// nearly full resource end up: on OpenB compacted to between 1,320 and
// 1,523 machines, one sample in twelve left up to a hundred 0.2-GPU tasks
// facing 0.19 GPU on every machine that has the CPU for them, while the
// samples of the sizes around it placed everything. So when the rerun too
// keeps a near miss (contested tasks left pending, at most one in
// nearMissShare of the queue), the pass runs again in its own order with a
// new sample, up to reshuffles times, and keeps the plan that leaves fewer
// pending by the rerun's rule (placesMore: a higher priority never loses a
// placement). A cell the pass sees whole (K at least its machines) draws
// no sample and is not reshuffled; neither is a pass that left many tasks
// out, where a new sample cannot make the room. The seeds are derived from
// the pass's, so the plan stays deterministic. On OpenB compacted
// largest-first (in the weighted order compaction used then), the worst of
// three seeds went from 1,501 machines to 1,396.
const (
	reshuffles     = 2
	nearMissShare  = 64
	reshuffleSeeds = 0x9e3779b97f4a7c15
)

// noReshuffle turns the new samples off, for tests that compare plans
// with and without them.
var noReshuffle bool

// reshuffle runs pass p again with new samples while it keeps a near miss
// (see above) and returns the plan to keep.
func (s *Scheduler) reshuffle(cell *Cell, seed uint64, p *pass) *pass {
	if noReshuffle || p.k >= len(p.perm) {
		return p
	}
	for i := 1; i <= reshuffles; i++ {
		if !p.nearMiss() {
			break
		}
		p = s.runAgain(s.cfg, cell, seed+uint64(i)*reshuffleSeeds, p, nil, 1+i)
	}
	return p
}

// nearMiss reports whether pass p left contested tasks pending, at most
// one in nearMissShare of its queue.
func (p *pass) nearMiss() bool {
	left := p.contestedLeft()
	return left > 0 && left <= max(1, len(p.items)/nearMissShare)
}

// A sample of K machines per class is a budget, not a rule: when the
// rerun, the new samples and the other rules still leave contested tasks
// pending, and a pass that sees every machine costs no more than
// wholeViewShare times the first run (or at most wholeViewChecks checks,
// a cell too small to matter), the pass runs once more with every machine
// in view, kept by the same rule. Its cost is estimated as the classes times the machines:
// each class checks every machine once, and after that only the machines
// the pass changed (OpenB on 1,300 machines, 160 classes: 208,000
// estimated, 215,000 spent). On OpenB compacted to the machines with the
// most GPUs, the samples left 5 to 300 tasks pending on scattered sizes
// from the first that fitted (about 1,243) up to 1,328, while the whole
// view fits every size from 1,281 on: the worst of three seeds went from
// 1,328 machines to 1,281. A cell of many classes costs far more to see
// whole than to sample (synthetic-10k near its answers: 4,976 classes by
// 6,900-8,200 machines, against first runs of about 9 million checks) and
// is not run again.
const (
	wholeViewShare  = 2
	wholeViewChecks = 1 << 16
)

// noWholeView turns the whole-view run off, for tests that compare plans
// with and without it.
var noWholeView bool

// wholeView runs pass p once more with every machine in view when it was
// sampled, still leaves contested tasks pending, and the whole view is
// affordable (see above); firstChecks is the first run's feasibility
// checks.
func (s *Scheduler) wholeView(cell *Cell, seed uint64, p *pass, firstChecks int) *pass {
	if noWholeView || p.k >= len(p.perm) || p.contestedLeft() == 0 {
		return p
	}
	if cost := len(p.classes) * len(p.perm); cost > max(wholeViewShare*firstChecks, wholeViewChecks) {
		return p
	}
	cfg := s.cfg
	cfg.FeasibleK = 0
	return s.runAgain(cfg, cell, seed, p, nil, wholeViewRun)
}

// wholeViewRun is RerunKept for a plan of the whole-view run: after the
// first run, the rerun, the new samples and the alternative rules
// (portfolio.go).
const wholeViewRun = firstAlternativeRun + 2*len(alternatives)

// runAgain runs the pass again from the same cell with seed, the promoted
// items (if any) first, and returns the run that leaves fewer tasks
// pending from the highest priority down (placesMore; p on a tie), its
// Stats counting this run: Reruns one more, RerunKept run if it is the
// new one, FeasibilityChecks both runs'.
func (s *Scheduler) runAgain(cfg Config, cell *Cell, seed uint64, p *pass, promote []bool, run int) *pass {
	q := newPass(cfg, cell, seed, s.sums)
	q.promote, q.bound = promote, p.leftByPriority()
	done := q.placeAll()
	q.spreadChose = q.spreadChose || p.spreadChose
	before := p.plan.Stats
	if done && q.placesMore() {
		p = q
		p.plan.Stats.RerunKept = run
	}
	p.plan.Stats.Reruns = before.Reruns + 1
	p.plan.Stats.FeasibilityChecks = before.FeasibilityChecks + q.plan.Stats.FeasibilityChecks
	return p
}

// promoteFirst moves the promoted items to the front of the queue, ahead
// of higher priorities too, each part in the queue's order. Higher
// priorities lose nothing by it unless the rerun leaves more of them
// pending, and then placesMore keeps the first run's plan. (A promoted task
// cannot be preempted by a later one: a pass preempts running tasks only.)
func promoteFirst(order []int32, promote []bool) []int32 {
	out := make([]int32, 0, len(order))
	for _, first := range []bool{true, false} {
		for _, ti := range order {
			if promote[ti] == first {
				out = append(out, ti)
			}
		}
	}
	return out
}

// leftByPriority counts the tasks left pending per priority.
func (p *pass) leftByPriority() *[MaxPriority + 1]int {
	var left [MaxPriority + 1]int
	for _, c := range p.classes {
		left[clampPriority(c.prio)] += len(c.unplaced)
	}
	return &left
}

// placesMore reports whether a rerun, run to its end, leaves fewer tasks
// pending than the first run at the highest priority where the two differ.
func (q *pass) placesMore() bool {
	for prio := MaxPriority; prio >= 0; prio-- {
		if q.left[prio] != q.bound[prio] {
			return q.left[prio] < q.bound[prio]
		}
	}
	return false
}

// leave records that queue item ti of class c stays pending. In a rerun it
// reports whether the rerun has already lost to the first run: past the
// promoted items the queue runs from high priority to low, so the counts
// of the priorities above c's are final, and when they equal the first
// run's, more pending at c's priority than the first run left loses.
func (p *pass) leave(c *class, ti int32) (lost bool) {
	c.unplaced = append(c.unplaced, ti)
	if p.bound == nil {
		return false
	}
	l := clampPriority(c.prio)
	p.left[l]++
	if p.promote != nil && p.promote[ti] {
		return false // the priorities above are still to come
	}
	for m := int32(MaxPriority); m > l; m-- {
		if p.left[m] != p.bound[m] {
			return p.left[m] > p.bound[m]
		}
	}
	return p.left[l] > p.bound[l]
}
