package scheduler

// The default fit (hybrid) is one rule for every cell, and on some cells
// another of corral's rules fits where it does not: worst-fit's convex
// balance where small work must fill machines whose resources come in
// many proportions, best-fit's tightness where tasks of a quarter of a
// machine must share machines of one kind. Which one wins is not known
// before the pass, but the pass's own outcome says when it matters: a
// close miss (contested tasks left pending after the reruns, at most one
// in closeMissShare of the queue). Then the pass runs under each of the
// other rules as a cell configured with it would (its first run, and its
// rerun with its own contested classes first), with the same seed and so
// the same sample, and keeps a plan only if it leaves fewer tasks pending
// from the highest priority down, the rule every extra run is kept by.
// So at any size where another rule's first run or rerun places the
// queue, the default does too, and a pass that placed everything, or
// missed by far, pays nothing.
//
// The share is wider than the new samples' (nearMissShare): a sample
// mends the last few tasks, another rule a few percent of them. On the
// workload package's cpu-one-large-80 (tasks of a quarter of a machine,
// one machine kind) at 165 machines, hybrid's runs leave 16 of 624 tasks
// pending and relocation places 14 of them, where best-fit's rerun and
// relocation place every task. A far miss (a
// compaction's probe below the answer, a cell short of machines) runs
// no alternative. Only the default runs them: a cell configured with
// worst-fit or best-fit asked for that rule.

// alternatives are the rules a hybrid pass tries on a close miss, in the
// order it tries them.
var alternatives = [...]Policy{PolicyWorstFit, PolicyBestFit}

// closeMissShare: a pass whose contested tasks left pending are at most
// one in closeMissShare of its queue tries the alternative rules.
const closeMissShare = 16

// noPortfolio turns the alternative rules off, for tests that compare
// plans with and without them.
var noPortfolio bool

// tryAlternatives runs hybrid pass p again under each alternative rule
// while it keeps a close miss (see above), and returns the plan to keep.
func (s *Scheduler) tryAlternatives(cell *Cell, seed uint64, p *pass) *pass {
	if noPortfolio || noReshuffle || s.cfg.Policy != PolicyHybrid {
		return p
	}
	for i, policy := range alternatives {
		left := p.contestedLeft()
		if left == 0 || left > len(p.items)/closeMissShare {
			break
		}
		cfg := s.cfg
		cfg.Policy = policy
		run := firstAlternativeRun + 2*i
		q := newPass(cfg, cell, seed, s.sums)
		q.placeAll()
		checks := p.plan.Stats.FeasibilityChecks + q.plan.Stats.FeasibilityChecks
		reruns := p.plan.Stats.Reruns + 1
		if q.leavesFewer(p) {
			p = q
			p.plan.Stats.RerunKept = run
		}
		p.plan.Stats.FeasibilityChecks, p.plan.Stats.Reruns = checks, reruns
		if promote := q.contested(); promote != nil {
			p = s.runAgain(cfg, cell, seed, p, promote, run+1)
		}
	}
	return p
}

// leavesFewer reports whether pass q leaves fewer tasks pending than
// pass p at the highest priority where the two differ.
func (q *pass) leavesFewer(p *pass) bool {
	a, b := q.leftByPriority(), p.leftByPriority()
	for prio := MaxPriority; prio >= 0; prio-- {
		if a[prio] != b[prio] {
			return a[prio] < b[prio]
		}
	}
	return false
}

// firstAlternativeRun is RerunKept for a plan of the first alternative
// rule's first run: after the first run, the rerun and the new samples;
// each rule has two runs, its first and its rerun.
const firstAlternativeRun = 2 + reshuffles
