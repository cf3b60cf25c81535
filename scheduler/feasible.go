package scheduler

import (
	"cmp"
	"slices"
)

// checkResult is the verdict of one class on one machine.
type checkResult struct {
	ok         bool
	reason     Reason // why not, when !ok
	constraint int    // the failing hard constraint, for ReasonConstraint
	score      float64
	alloc      int32   // the alloc instance chosen, for tasks inside an alloc set
	victims    []int32 // tasks to preempt, nil when the task fits as is
	// holdsScarce: the machine keeps some of a scarce resource free after
	// the placement (scored for a class that avoids scarce resources).
	holdsScarce bool
}

// check runs the feasibility checks of class c on machine m, cheapest first
// (state, crash history, constraints, alloc, resources), and scores the
// machine when it is feasible and score is set. The first failing check is
// the reason.
func (p *pass) check(c *class, m *machine, mi int32, score bool) checkResult {
	if r := p.admits(c, m, mi); !r.ok {
		return r
	}
	if c.inAlloc {
		return p.checkAlloc(c, m, score)
	}

	// Prod tasks count the limits of the tasks already there, so they never
	// rely on reclaimed resources; non-prod tasks count reservations.
	avail := Available(m.in.Capacity, m.usedLim, m.usedRes, c.prod)
	var victims []int32
	if !c.req.Fits(avail) {
		if c.isAlloc {
			return checkResult{reason: reasonForDim(c.req.shortDim(avail))} // allocs never preempt
		}
		// The most preemption could free: every non-prod task for a prod
		// task, and for a non-prod task a bound refined below.
		upper := avail.Add(m.npRes)
		if c.prod {
			upper = avail.Add(m.npLim)
		}
		if d := c.req.shortDim(upper); d != NumDims {
			return checkResult{reason: reasonForDim(d)}
		}
		var freed Resources
		victims, freed = p.victims(c, m, avail)
		if victims == nil {
			return checkResult{reason: reasonForDim(c.req.shortDim(avail.Add(freed)))}
		}
		avail = avail.Add(freed)
	}
	r := checkResult{ok: true, victims: victims}
	if score {
		after := avail.Sub(c.req)
		var strandedBefore float64
		if p.cfg.Policy == PolicyHybrid {
			if victims != nil {
				strandedBefore = p.demand.stranded(&avail, &m.in.Capacity)
			} else {
				strandedBefore = p.strandedNow(m, mi, c.prod, &avail)
			}
		}
		r.score = p.fit(p.cfg.Policy, &avail, &after, &m.in.Capacity, strandedBefore) + p.preferences(c, m, victims)
		if p.cfg.Policy == PolicyHybrid {
			r.score -= p.demand.tightCost(c.id, &avail, &after)
			if c.avoidsScarce {
				held := p.scarceHeld(&after, &m.in.Capacity)
				r.score -= held
				r.holdsScarce = held > 0
			}
		}
	}
	return r
}

// admits runs the checks of class c on machine m that do not count
// resources: the machine's state, the class's crash history, its hard
// constraints and distinct hosts.
func (p *pass) admits(c *class, m *machine, mi int32) checkResult {
	switch {
	case m.in.State == MachineDown:
		return checkResult{reason: ReasonDown}
	case m.in.State == MachineDraining:
		return checkResult{reason: ReasonDraining}
	}
	if len(c.avoid) > 0 {
		if _, hit := slices.BinarySearch(c.avoid, mi); hit {
			return checkResult{reason: ReasonCrashedHere}
		}
	}
	for i := range c.hard {
		if !c.hard[i].matches(m.in.Attributes) {
			return checkResult{reason: ReasonConstraint, constraint: i}
		}
	}
	if c.distinct {
		if js := p.jobs[c.job]; js != nil && DistinctHostsExclude(c.distinct, int(js.machines[mi])) {
			return checkResult{reason: ReasonDistinctHosts}
		}
	}
	return checkResult{ok: true}
}

// DistinctHostsExclude reports whether distinct_hosts keeps a task off a
// machine where other tasks of its job run already: the pass's rule, and
// the placement handler's when it re-checks a plan.
func DistinctHostsExclude(distinct bool, others int) bool { return distinct && others > 0 }

// strandedNow is the stranded room of the machine as it stands, cached
// until the machine changes.
func (p *pass) strandedNow(m *machine, mi int32, prod bool, avail *Resources) float64 {
	acc := 0
	if prod {
		acc = 1
	}
	if gen := p.gens[mi] + 1; m.strandedGen[acc] != gen {
		m.stranded[acc] = p.demand.stranded(avail, &m.in.Capacity)
		m.strandedGen[acc] = gen
	}
	return m.stranded[acc]
}

// checkAlloc checks a task that runs inside an alloc set: it needs an
// instance of the set on the machine with room for it, counting the limits
// of the tasks already inside (an alloc is the user's own reservation).
func (p *pass) checkAlloc(c *class, m *machine, score bool) checkResult {
	found := false
	best := int32(-1)
	var bestFit float64
	for i := range m.allocs {
		a := &m.allocs[i]
		if a.set != c.allocSet {
			continue
		}
		found = true
		avail := a.cap.Sub(a.used)
		if !c.req.Fits(avail) {
			continue
		}
		after := avail.Sub(c.req)
		f := p.fit(PolicyBestFit, &avail, &after, &a.cap, 0)
		if best < 0 || f > bestFit {
			best, bestFit = int32(i), f
		}
	}
	switch {
	case !found:
		return checkResult{reason: ReasonNoAlloc}
	case best < 0:
		return checkResult{reason: ReasonAllocFull}
	}
	r := checkResult{ok: true, alloc: best}
	if score {
		r.score = bestFit + p.preferences(c, m, nil)
	}
	return r
}

// preferences adds the built-in and user preferences to a machine's fit:
// soft constraints, the package already there, a mix of bands, and the
// cost of preemption (fewest and lowest-priority victims first). Spreading
// a job across failure domains depends on the job, not the class, and is
// added when picking.
func (p *pass) preferences(c *class, m *machine, victims []int32) float64 {
	w := &p.cfg.Weights
	var s float64
	if len(c.soft) > 0 {
		held := 0
		for i := range c.soft {
			if c.soft[i].matches(m.in.Attributes) {
				held++
			}
		}
		s += w.Soft * float64(held) / float64(len(c.soft))
	}
	if c.pkg != "" && m.hasPackage(c.pkg) {
		s += w.Package
	}
	if used := m.usedLim[CPU]; used > 0 && w.Mix != 0 {
		// A prod task placed beside non-prod ones can grow into their room
		// in a spike; a non-prod task beside prod ones uses what prod
		// reserved but does not use.
		other := m.npLim[CPU]
		if !c.prod {
			other = used - other
		}
		s += w.Mix * float64(other) / float64(used)
	}
	for _, vi := range victims {
		s -= w.Preemption * (1 + float64(m.in.Tasks[vi].Priority)/float64(MaxPriority+1))
	}
	return s
}

// victims chooses the tasks to preempt on m so that class c fits, lowest
// priority first (larger tasks first within a priority, so fewer go), then
// drops any victim the others make unnecessary, highest priority first. It
// returns nil when even every preemptible task is not enough, with what
// evicting all of them would free.
func (p *pass) victims(c *class, m *machine, avail Resources) ([]int32, Resources) {
	var cands []int32
	for i := range m.in.Tasks {
		t := &m.in.Tasks[i]
		if t.AllocSet != "" && m.alloc(AllocSetRef{User: t.Ref.User, Name: t.AllocSet}, t.AllocIndex) != nil {
			continue // inside an alloc: evicting it frees the alloc, not the machine
		}
		if (m.evicted != nil && m.evicted[i]) || !CanPreempt(c.prio, t.Priority) {
			continue
		}
		cands = append(cands, int32(i))
	}
	usage := func(i int32) Resources {
		t := &m.in.Tasks[i]
		if c.prod {
			return t.Limit
		}
		return taskReservation(t)
	}
	// Most machines a class is checked against cannot make room even by
	// evicting every candidate: say so before paying for the sort (the
	// loop below would add them all up to the same sum).
	var all Resources
	for _, i := range cands {
		all = all.Add(usage(i))
	}
	if !c.req.Fits(avail.Add(all)) {
		return nil, all
	}
	slices.SortFunc(cands, func(a, b int32) int {
		x, y := &m.in.Tasks[a], &m.in.Tasks[b]
		if r := cmp.Compare(x.Priority, y.Priority); r != 0 {
			return r
		}
		if r := cmp.Compare(dominantShare(usage(b), &m.in.Capacity), dominantShare(usage(a), &m.in.Capacity)); r != 0 {
			return r
		}
		if x.Ref.less(y.Ref) {
			return -1
		}
		if y.Ref.less(x.Ref) {
			return 1
		}
		return 0
	})
	var freed Resources
	n := 0
	for n < len(cands) && !c.req.Fits(avail.Add(freed)) {
		freed = freed.Add(usage(cands[n]))
		n++
	}
	if !c.req.Fits(avail.Add(freed)) {
		return nil, freed
	}
	chosen := cands[:n]
	for i := n - 1; i >= 0; i-- {
		without := freed.Sub(usage(chosen[i]))
		if c.req.Fits(avail.Add(without)) {
			freed = without
			chosen = slices.Delete(chosen, i, i+1)
		}
	}
	return slices.Clip(chosen), freed
}

// dominantShare is the largest share of the machine a vector takes.
func dominantShare(r Resources, capacity *Resources) float64 {
	var s float64
	for d := Dim(0); d < NumDims; d++ {
		if capacity[d] > 0 {
			s = max(s, float64(r[d])/float64(capacity[d]))
		}
	}
	return s
}
