package scheduler

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// explain builds the why-pending explanation of a class that kept tasks
// pending. It re-examines every machine against the state at the end of the
// pass, so counts and hints describe what the next pass will see unless the
// cell changes. With Config.NoExplanations it only lists the tasks.
func (p *pass) explain(c *class) Explanation {
	e := p.listUnplaced(c)
	if p.cfg.NoExplanations {
		return e
	}
	// Machines failing only on room (resources or alloc), and the most
	// each could offer: scratch space the pass reuses class after class.
	t := verdictTally{byConstraint: make([]int, len(c.hard)), eligible: p.scratch.eligible[:0], maxAvail: p.scratch.maxAvail[:0]}
	defer func() { p.scratch.eligible, p.scratch.maxAvail = t.eligible[:0], t.maxAvail[:0] }()
	p.tallyVerdicts(c, &t)
	e.Rejections = t.rejections(c)
	e.Hints = p.constraintHints(c, t.matchAll, t.matchUsable, t.byReason)
	e.Hints = append(e.Hints, p.roomHints(c, len(c.unplaced), t.eligible, t.maxAvail)...)
	if c.inAlloc && t.byReason[ReasonNoAlloc] == len(p.machines) {
		e.Hints = append(e.Hints, fmt.Sprintf("alloc set %s has no instance on any machine", c.allocSet.Name))
	}
	return e
}

// listUnplaced is the explanation of class c without its reasons: what
// it asks for and the tasks or allocs it left pending.
func (p *pass) listUnplaced(c *class) Explanation {
	e := Explanation{
		Priority:    c.prio,
		Resources:   c.req,
		Constraints: c.t.Constraints,
		Machines:    len(p.machines),
	}
	if c.inAlloc {
		e.AllocSet = c.allocSet.Name
	}
	for _, ti := range c.unplaced {
		r := p.items[ti].Ref
		if c.isAlloc {
			e.Allocs = append(e.Allocs, AllocRef{Set: AllocSetRef{User: r.User, Name: r.Job}, Index: r.Index})
		} else {
			e.Tasks = append(e.Tasks, r)
		}
	}
	return e
}

// verdictTally counts why the machines rejected a class.
type verdictTally struct {
	byReason     [numReasons]int
	byConstraint []int // by index into the class's hard constraints
	matchAll     int   // machines satisfying every hard constraint, any state
	matchUsable  int   // ... and up, not draining, no crash there
	eligible     []int32
	maxAvail     []Resources // of each eligible machine
}

// tallyVerdicts counts every machine's verdict on class c into t.
func (p *pass) tallyVerdicts(c *class, t *verdictTally) {
	// The verdicts are kept for the next pass within the memo's bound;
	// past it, one scratch verdict serves every machine.
	var verdicts []verdict
	if p.memo != nil && p.explainedVerdicts+len(p.machines) <= maxExplainedVerdicts {
		verdicts = make([]verdict, len(p.machines))
		p.explainedVerdicts += len(p.machines)
	}
	var scratch verdict
	last := p.lastExplained[c.key]
	for mi := range p.machines {
		v := &scratch
		if verdicts != nil {
			v = &verdicts[mi]
		}
		if before, ok := p.explainedBefore(last, int32(mi)); ok {
			*v = before
			p.plan.Stats.ExplainRemembered++
		} else {
			*v = p.verdictOn(c, int32(mi))
		}
		if v.ok {
			continue // only when the pass stopped short; nothing to explain
		}
		t.byReason[v.reason]++
		if v.reason == ReasonConstraint {
			t.byConstraint[v.constraint]++
		}
		if v.reason <= ReasonCrashedHere && v.matchHard {
			t.matchAll++
		}
		if v.reason > ReasonConstraint {
			t.matchAll++
			t.matchUsable++
			if v.reason != ReasonNoAlloc && v.reason != ReasonDistinctHosts {
				t.eligible = append(t.eligible, int32(mi))
				t.maxAvail = append(t.maxAvail, v.avail)
			}
		}
	}
	if verdicts != nil {
		p.explained = append(p.explained, explainedClass{c.key, verdicts})
	}
}

// rejections lists the tally's reasons, most machines first.
func (t *verdictTally) rejections(c *class) []Rejection {
	var out []Rejection
	for r := Reason(0); r < numReasons; r++ {
		if r == ReasonConstraint {
			for i, n := range t.byConstraint {
				if n > 0 {
					out = append(out, Rejection{Reason: r, Constraint: c.hard[i].String(), Machines: n})
				}
			}
			continue
		}
		if t.byReason[r] > 0 {
			out = append(out, Rejection{Reason: r, Machines: t.byReason[r]})
		}
	}
	slices.SortStableFunc(out, func(a, b Rejection) int { return cmp.Compare(b.Machines, a.Machines) })
	return out
}

// verdictOn is what explain reads of class c on machine mi: the check, and
// what the hints need of a machine that fails.
func (p *pass) verdictOn(c *class, mi int32) verdict {
	m := &p.machines[mi]
	r := p.check(c, m, mi, false)
	v := verdict{ok: r.ok, reason: r.reason, constraint: int32(r.constraint), kept: p.gens[mi] == 0}
	switch {
	case r.ok:
	case r.reason <= ReasonCrashedHere:
		v.matchHard = p.matchesHard(c, m)
	case r.reason > ReasonConstraint && r.reason != ReasonNoAlloc && r.reason != ReasonDistinctHosts:
		v.avail = p.maxAvail(c, m)
	}
	return v
}

func (p *pass) matchesHard(c *class, m *machine) bool {
	for i := range c.hard {
		if !c.hard[i].matches(m.in.Attributes) {
			return false
		}
	}
	return true
}

func (p *pass) constraintHints(c *class, matchAll, matchUsable int, byReason [numReasons]int) []string {
	var hints []string
	if len(c.hard) > 0 && matchAll == 0 {
		single := false
		for i := range c.hard {
			n := 0
			for mi := range p.machines {
				if c.hard[i].matches(p.machines[mi].in.Attributes) {
					n++
				}
			}
			if n == 0 {
				single = true
				hints = append(hints, fmt.Sprintf("the constraint %s matches no machine", c.hard[i].String()))
			}
		}
		if !single {
			hints = append(hints, "the constraints match no machine together, though each matches some")
		}
		return hints
	}
	if matchAll > 0 && matchUsable == 0 {
		what := "machines"
		if len(c.hard) > 0 {
			what = "machines that satisfy its constraints"
		}
		hints = append(hints, fmt.Sprintf("all %d %s are down, draining, or where it crashed recently", matchAll, what))
	}
	return hints
}

// maxAvail is the most a machine could offer the class: free room plus
// everything the class may preempt (or, inside an alloc, the roomiest
// instance of its set).
func (p *pass) maxAvail(c *class, m *machine) Resources {
	if c.inAlloc {
		var best Resources
		bestShare := -1.0
		for i := range m.allocs {
			a := &m.allocs[i]
			if a.set != c.allocSet {
				continue
			}
			free := a.cap.Sub(a.used)
			if s := dominantShare(free, &a.cap); s > bestShare {
				best, bestShare = free, s
			}
		}
		return best
	}
	if c.isAlloc {
		if c.prod {
			return m.in.Capacity.Sub(m.usedLim)
		}
		return m.in.Capacity.Sub(m.usedRes)
	}
	if c.prod {
		return m.in.Capacity.Sub(m.usedLim).Add(m.npLim)
	}
	avail := m.in.Capacity.Sub(m.usedRes)
	for i := range m.in.Tasks {
		t := &m.in.Tasks[i]
		if t.AllocSet != "" || (m.evicted != nil && m.evicted[i]) || !CanPreempt(c.prio, t.Priority) {
			continue
		}
		avail = avail.Add(taskReservation(t))
	}
	return avail
}

// roomHints says, for each resource that is short, how much the class could
// ask for to fit on as many machines as it has pending tasks (or on all
// machines it could fit on at all); and, for prod, where only evicting other
// prod tasks would make room.
func (p *pass) roomHints(c *class, pendingTasks int, eligible []int32, maxAvail []Resources) []string {
	if len(eligible) == 0 {
		return nil
	}
	var hints []string
	for d := Dim(0); d < NumDims; d++ {
		if c.req[d] > 0 {
			hints = append(hints, p.shrinkHints(c, d, pendingTasks, maxAvail)...)
		}
	}
	oneDimHint := len(hints) > 0
	if c.inAlloc {
		if !oneDimHint {
			hints = append(hints, roomiestInstanceHint(c, maxAvail))
		}
		return hints
	}
	if !oneDimHint {
		if h := mostFreeHint(c, maxAvail); h != "" {
			hints = append(hints, h)
		}
	}
	if c.prod && !c.isAlloc {
		if h := p.preemptionHint(c, eligible); h != "" {
			hints = append(hints, h)
		}
	}
	return hints
}

// shrinkHints says how much of dimension d class c could ask for to fit
// on machines short of d alone: the largest request that would fit
// somewhere, and, when that is fewer machines than tasks pending, the
// request that would fit them all (or on every machine that could take
// one). None when no machine is short of d alone.
func (p *pass) shrinkHints(c *class, d Dim, pendingTasks int, maxAvail []Resources) []string {
	values := p.scratch.values[:0]
	for i := range maxAvail {
		a := maxAvail[i]
		if a[d] >= c.req[d] || a[d] <= 0 {
			continue
		}
		a[d] = c.req[d]
		if c.req.Fits(a) {
			values = append(values, maxAvail[i][d])
		}
	}
	p.scratch.values = values[:0]
	if len(values) == 0 {
		return nil
	}
	count := func(x int64) int {
		n := 0
		for _, v := range values {
			if v >= x {
				n++
			}
		}
		return n
	}
	hint := func(x int64) string {
		n := count(x)
		return fmt.Sprintf("with %s <= %s it would fit on %d machine%s", d, formatFloor(d, x), n, plural(n))
	}
	top := slices.Max(values)
	hints := []string{hint(top)}
	if all := kthLargest(values, min(pendingTasks, len(values))); all < top && count(top) < pendingTasks {
		hints = append(hints, hint(all))
	}
	return hints
}

// roomiestInstanceHint names the most an instance of c's alloc set has
// free.
func roomiestInstanceHint(c *class, maxAvail []Resources) string {
	var most Resources
	for _, a := range maxAvail {
		if dominantShare(a, &c.req) > dominantShare(most, &c.req) {
			most = a
		}
	}
	return fmt.Sprintf("every instance of alloc set %s is too full; the roomiest has %s free", c.allocSet.Name, most)
}

// mostFreeHint names, for each resource c asks more of than any machine
// has free, the most free anywhere; "" when there is none.
func mostFreeHint(c *class, maxAvail []Resources) string {
	var most Resources
	for _, a := range maxAvail {
		for d := range most {
			most[d] = max(most[d], a[d])
		}
	}
	var parts []string
	for d := Dim(0); d < NumDims; d++ {
		if c.req[d] > most[d] {
			parts = append(parts, fmt.Sprintf("%s %s (asks %s)", d, formatFloor(d, max(most[d], 0)), FormatQuantity(d, c.req[d])))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "no machine has room even in one short resource alone; the most free anywhere: " + strings.Join(parts, ", ")
}

// preemptionHint counts the machines where only evicting lower-priority
// production tasks would make room for prod class c; "" when none.
func (p *pass) preemptionHint(c *class, eligible []int32) string {
	n := 0
	for _, mi := range eligible {
		m := &p.machines[mi]
		avail := m.in.Capacity.Sub(m.usedLim)
		for i := range m.in.Tasks {
			t := &m.in.Tasks[i]
			if t.AllocSet == "" && t.Priority < c.prio && (m.evicted == nil || !m.evicted[i]) {
				avail = avail.Add(t.Limit)
			}
		}
		if c.req.Fits(avail) {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d machine%s would have room only by preempting lower-priority production tasks, which production never does", n, plural(n))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// formatFloor prints a quantity rounded down, so that "<= x" stays true.
func formatFloor(d Dim, v int64) string {
	switch d {
	case CPU, GPU:
		return trimFloat(floorDigits(float64(v) / 1000))
	case Memory, Disk:
		for _, u := range []struct {
			size int64
			name string
		}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
			if v >= u.size {
				return trimFloat(floorDigits(float64(v)/float64(u.size))) + u.name
			}
		}
		return fmt.Sprintf("%dB", v)
	}
	return fmt.Sprint(v)
}

// floorDigits rounds down to the digits trimFloat prints. The tolerance (a
// millionth of the unit) keeps 3.2 GiB less a byte from printing as 3.19.
func floorDigits(f float64) float64 {
	const tolerance = 1e-6
	if f >= 10 {
		return math.Floor(f*10+tolerance) / 10
	}
	return math.Floor(f*100+tolerance) / 100
}

// kthLargest returns the k-th largest of values (1 <= k <= len(values)),
// reordering them: a selection, not a sort (a class stuck on a large cell
// has a value per machine, and is explained every pass).
func kthLargest(values []int64, k int) int64 {
	lo, hi, want := 0, len(values)-1, k-1 // want: its index in descending order
	for lo < hi {
		// Median of three as the pivot, then a three-way partition:
		// [lo, lt) larger, [lt, gt] equal, (gt, hi] smaller.
		mid := lo + (hi-lo)/2
		a, b, c := values[lo], values[mid], values[hi]
		pivot := max(min(a, b), min(max(a, b), c))
		lt, i, gt := lo, lo, hi
		for i <= gt {
			switch v := values[i]; {
			case v > pivot:
				values[lt], values[i] = values[i], values[lt]
				lt++
				i++
			case v < pivot:
				values[gt], values[i] = values[i], values[gt]
				gt--
			default:
				i++
			}
		}
		switch {
		case want < lt:
			hi = lt - 1
		case want > gt:
			lo = gt + 1
		default:
			return pivot
		}
	}
	return values[want]
}
