package scheduler

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// class is an equivalence class: pending tasks with identical requirements
// and constraints (usually the tasks of one job). Feasibility and scores are
// computed once per class and machine, and kept in the pool until the
// machine changes.
type class struct {
	id       int32
	t        *PendingTask // the first task of the class, standing for all
	prio     int32
	prod     bool
	req      Resources
	hard     []compiledConstraint
	soft     []compiledConstraint
	avoid    []int32 // sorted machine indices where the task crashed
	inAlloc  bool    // a task that runs inside an alloc of allocSet
	allocSet AllocSetRef
	isAlloc  bool // a class of pending allocs: placed like tasks, never preempting
	pkg      string
	// spread and distinct are the job's placement rules (PendingTask);
	// a class with either holds the tasks of one job, job.
	spread   []string
	distinct bool
	job      jobKey
	// wantsScarce: the class asks for a resource the workload nearly
	// exhausts; its pool is larger (scarceShare).
	wantsScarce bool
	// avoidsScarce: the cell has a scarce resource and the class does not
	// ask for it; it pays for machines keeping some free (scarceHeld).
	avoidsScarce bool

	// Relaxed randomization: the class walks the pass's random machine order
	// from start; scanned counts the machines examined so far.
	start     int
	scanned   int
	exhausted bool
	pool      []cand // feasible machines with their cached scores

	unplaced []int32 // pending tasks left without a machine, in queue order
	// contested: a machine with room for the class at the start of the
	// pass was filled by the pass before the class got to it (reorder.go).
	contested bool

	// key is the class's identity across passes (classKey). known marks
	// the machines an earlier pass found infeasible for the class while
	// they were what this pass's input holds; rejected lists those this
	// pass rejected before touching them (infeasible.go). Both empty
	// unless the scheduler remembers machines.
	key      string
	known    bitset
	rejected []int32
}

// cand is a feasible machine in a class's pool, with the score computed at
// the machine's gen.
type cand struct {
	m         int32
	gen       uint32
	scoresGen uint32
	alloc     int32 // the alloc instance, for tasks inside an alloc set
	// victims indexes the pass's victim sets (tasks to preempt), -1: none.
	// Kept out of line: pools are scanned for every task, preemption is rare.
	victims int32
	score   float64
	// holdsScarce: the machine keeps some of a scarce resource free after
	// the placement (for classes that avoid it).
	holdsScarce bool
}

// queueOrder returns the pending items' indices in scheduling order: from
// high to low priority; within a priority allocs (items from nTasks on)
// before tasks, each round-robin between users so that a large job cannot
// block the line. Users take turns in the order of their oldest item. Each
// user's items go largest first by size (nil: in submission order), and
// items of one size in submission order.
//
// Largest first is the packing rule of first-fit decreasing: small items
// fill the gaps the large ones leave, where placed first they would have
// cut up the room a large one needs. On OpenB's whole cell in submission
// order, 22-150 tasks of 8,152 stayed pending; largest first, 0 on two of
// three seeds. Within one pass it only reorders one user's tasks of one
// priority among themselves; what fits is placed either way.
func queueOrder(pending []PendingTask, nTasks int, size []float64) []int32 {
	idx := make([]int32, len(pending))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		x, y := &pending[a], &pending[b]
		if c := cmp.Compare(clampPriority(y.Priority), clampPriority(x.Priority)); c != 0 {
			return c
		}
		if xa, ya := int(a) >= nTasks, int(b) >= nTasks; xa != ya {
			if xa {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(x.Ref.User, y.Ref.User); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Seq, y.Seq); c != 0 {
			return c
		}
		if x.Ref.less(y.Ref) {
			return -1
		}
		if y.Ref.less(x.Ref) {
			return 1
		}
		return 0
	})
	out := make([]int32, 0, len(idx))
	// A run is one user's items of one priority and kind; oldest is its
	// oldest item's Seq, the order users take turns in.
	type run struct {
		tasks  []int32
		oldest int64
	}
	roundRobin := func(runs []run) {
		slices.SortStableFunc(runs, func(a, b run) int { return cmp.Compare(a.oldest, b.oldest) })
		for len(runs) > 0 {
			live := runs[:0]
			for _, r := range runs {
				out = append(out, r.tasks[0])
				if r.tasks = r.tasks[1:]; len(r.tasks) > 0 {
					live = append(live, r)
				}
			}
			runs = live
		}
	}
	// Split the sorted indices into runs of one priority, kind and user.
	for lo := 0; lo < len(idx); {
		prio, alloc := clampPriority(pending[idx[lo]].Priority), int(idx[lo]) >= nTasks
		hi := lo
		var runs []run
		for hi < len(idx) && clampPriority(pending[idx[hi]].Priority) == prio && (int(idx[hi]) >= nTasks) == alloc {
			u := hi
			for u < len(idx) && clampPriority(pending[idx[u]].Priority) == prio && (int(idx[u]) >= nTasks) == alloc &&
				pending[idx[u]].Ref.User == pending[idx[hi]].Ref.User {
				u++
			}
			oldest := pending[idx[hi]].Seq // sorted by Seq within the run
			if size != nil {
				slices.SortStableFunc(idx[hi:u], func(a, b int32) int { return cmp.Compare(size[b], size[a]) })
			}
			runs = append(runs, run{idx[hi:u], oldest})
			hi = u
		}
		roundRobin(runs)
		lo = hi
	}
	return out
}

func clampPriority(p int32) int32 { return max(0, min(p, MaxPriority)) }

// buildClasses groups the pending tasks into equivalence classes, numbering
// classes in queue order so the pass is deterministic.
func (p *pass) buildClasses(order []int32) {
	pending := p.items
	p.classOf = make([]int32, len(pending))
	byKey := map[string]int32{}
	var keys []string // by class number, before renumbering
	var key []byte
	// Tasks of one job are usually adjacent and identical: compare with the
	// previous task before building a key.
	for i := range pending {
		if i > 0 && i != p.nTasks && sameRequirements(&pending[i-1], &pending[i]) {
			p.classOf[i] = p.classOf[i-1]
			continue
		}
		key = key[:0]
		if i >= p.nTasks {
			key = append(key, 'A') // allocs never share a class with tasks
		}
		key = classKey(key, &pending[i])
		ci, ok := byKey[string(key)]
		if !ok {
			ci = int32(len(byKey))
			byKey[string(key)] = ci
			keys = append(keys, string(key))
		}
		p.classOf[i] = ci
	}
	// Renumber by first appearance in queue order.
	renum := make([]int32, len(byKey))
	for i := range renum {
		renum[i] = -1
	}
	for _, ti := range order {
		old := p.classOf[ti]
		if renum[old] < 0 {
			renum[old] = int32(len(p.classes))
			c := p.newClass(&pending[ti])
			c.id = renum[old]
			c.key = keys[old]
			c.isAlloc = int(ti) >= p.nTasks
			p.classes = append(p.classes, c)
		}
	}
	for i := range p.classOf {
		p.classOf[i] = renum[p.classOf[i]]
	}
}

func (p *pass) newClass(t *PendingTask) *class {
	c := &class{
		t:    t,
		prio: clampPriority(t.Priority),
		req:  t.Resources,
		pkg:  t.Package,
	}
	c.prod = IsProd(c.prio)
	for d := range c.req {
		c.req[d] = max(c.req[d], 0)
	}
	for _, k := range t.Constraints {
		if k.Soft {
			c.soft = append(c.soft, compileConstraint(k))
		} else {
			c.hard = append(c.hard, compileConstraint(k))
		}
	}
	if len(t.Spread) > 0 || t.DistinctHosts {
		c.spread, c.distinct = t.Spread, t.DistinctHosts
		c.job = jobKey{t.Ref.User, t.Ref.Job, false}
	}
	if t.AllocSet != "" {
		c.inAlloc = true
		c.allocSet = AllocSetRef{User: t.Ref.User, Name: t.AllocSet}
	}
	for _, name := range t.CrashedOn {
		if mi, ok := p.machineIndex(name); ok {
			c.avoid = append(c.avoid, mi)
		}
	}
	slices.Sort(c.avoid)
	if n := len(p.perm); n > 0 {
		c.start = p.rng.IntN(n)
	}
	return c
}

func sameRequirements(a, b *PendingTask) bool {
	return a.Priority == b.Priority && a.Resources == b.Resources && a.AllocSet == b.AllocSet &&
		a.Package == b.Package && a.Ref.User == b.Ref.User &&
		slices.EqualFunc(a.Constraints, b.Constraints, func(x, y Constraint) bool {
			return x.Attribute == y.Attribute && x.Op == y.Op && x.Soft == y.Soft && slices.Equal(x.Values, y.Values)
		}) &&
		slices.Equal(a.CrashedOn, b.CrashedOn) &&
		slices.Equal(a.Spread, b.Spread) && a.DistinctHosts == b.DistinctHosts &&
		(len(a.Spread) == 0 && !a.DistinctHosts || a.Ref.Job == b.Ref.Job)
}

// classKey encodes everything that decides feasibility and the cached score.
// The user is part of it because alloc sets are named per user; it does not
// split classes otherwise in practice (a user's jobs differ anyway).
func classKey(b []byte, t *PendingTask) []byte {
	b = binary.AppendVarint(b, int64(t.Priority))
	for _, v := range t.Resources {
		b = binary.AppendVarint(b, v)
	}
	b = appendString(b, t.Package)
	b = appendString(b, t.AllocSet)
	if t.AllocSet != "" {
		b = appendString(b, t.Ref.User)
	}
	b = binary.AppendUvarint(b, uint64(len(t.Constraints)))
	for _, k := range t.Constraints {
		b = appendString(b, k.Attribute)
		b = appendString(b, string(k.Op))
		if k.Soft {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(len(k.Values)))
		for _, v := range k.Values {
			b = appendString(b, v)
		}
	}
	if len(t.Spread) > 0 || t.DistinctHosts {
		// Spread and distinct hosts count the job's own tasks: one job a class.
		b = append(b, 'J')
		b = appendString(b, t.Ref.User)
		b = appendString(b, t.Ref.Job)
		b = binary.AppendUvarint(b, uint64(len(t.Spread)))
		for _, a := range t.Spread {
			b = appendString(b, a)
		}
		if t.DistinctHosts {
			b = append(b, 1)
		}
	}
	crashed := t.CrashedOn
	if len(crashed) > 1 && !slices.IsSorted(crashed) {
		crashed = slices.Sorted(slices.Values(crashed))
	}
	b = binary.AppendUvarint(b, uint64(len(crashed)))
	for _, m := range crashed {
		b = appendString(b, m)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
