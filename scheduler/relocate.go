package scheduler

import (
	"cmp"
	"slices"
)

// A pass places the queue in order and never looks back, so a task late in
// the queue can find every machine it fits on nibbled at by tasks placed
// before it, which would have fitted elsewhere: typically a GPU task whose
// GPU is left on machines whose CPU went to earlier CPU work. The rerun
// (reorder.go) promotes such classes and replays the pass; relocation
// repairs the plan instead. The tasks this pass placed have not started:
// moving one to another machine costs nothing but the move. For a task
// left pending, relocation looks for a machine where moving a few of this
// pass's placements (relocateMoves at most) would make room, finds each of
// them another machine it is feasible on, as the pass would (the best
// score of its pool), and places the pending task in the room made. If any
// of them finds no other machine, nothing changes. A moved task keeps its
// placement, so no priority loses one; the task placed gains one. Moved
// placements go to the end of the plan, after any preemption that made
// their new room, as the applier checks the plan in order.
//
// Only plain placements move: not those that preempted, took ports, run
// inside an alloc or belong to a job spread over failure domains or
// distinct hosts. Pending tasks are taken in queue order; a class stops at
// its first task that finds no room (its other tasks are the same), and a
// class asking for at least what a failed one asked for is not tried.
// Relocation spends at most half the feasibility checks the pass before it
// made, counting each machine it weighs as one.

// relocateMoves bounds the placements moved to make room for one task;
// relocateTries bounds the machines tried for one task.
// relocateDepth is how many times over room may be made for a moved
// placement in turn (a chain of relocateDepth+1 machines);
// relocateNestedTries bounds the machines tried for a moved placement.
const (
	relocateMoves       = 3
	relocateTries       = 16
	relocateDepth       = 1
	relocateNestedTries = 4
)

// noRelocation turns relocation off, for tests that compare plans with
// and without it.
var noRelocation bool

// planned is a placement of this pass: the queue item it serves and its
// machine.
type planned struct {
	ti, mi int32
}

// relocation is relocate's working state.
type relocation struct {
	// on lists, per machine, the movable placements (indices into
	// p.planned) on it; machines lists the machines that have any, in the
	// order they gained their first.
	on       map[int32][]int32
	free     map[int32]Resources // per machine, what its movable placements hold
	machines []int32
	gone     []bool         // placements moved, to drop from the plan
	moving   map[int32]bool // placements moved by the chain being tried
	// spent counts the feasibility checks relocation made and the machines
	// it weighed as options (each about a check's work); budget is what it
	// may spend.
	spent, budget int
	// failed lists the requests of classes that found no room, per
	// accounting (0: reservations, 1: limits): a class asking for as much
	// or more in every resource, with no more constraints, finds none
	// either.
	failed [2][]Resources
}

// relocateShare: relocation spends at most 1/relocateShare of the checks
// the pass before it made.
const relocateShare = 2

// relocate places tasks left pending by moving this pass's placements to
// make room for them (see above). It runs on the plan the pass keeps,
// before the pending classes are explained.
func (p *pass) relocate() {
	if noRelocation {
		return
	}
	var need []*class
	for _, c := range p.classes {
		if len(c.unplaced) > 0 && !c.isAlloc && !c.inAlloc {
			need = append(need, c)
		}
	}
	if len(need) == 0 || len(p.planned) == 0 {
		return
	}
	r := &relocation{on: map[int32][]int32{}, free: map[int32]Resources{}, moving: map[int32]bool{},
		gone: make([]bool, len(p.planned)), budget: p.plan.Stats.FeasibilityChecks / relocateShare}
	for i := range p.planned {
		r.add(p, int32(i))
	}
	if len(r.machines) == 0 {
		return
	}
	checks := p.plan.Stats.FeasibilityChecks
	for _, c := range need {
		for len(c.unplaced) > 0 && r.spent < r.budget && !r.hopeless(c) {
			if !p.makeRoomFor(r, c, c.unplaced[0]) {
				if plain(c) {
					r.failed[acct(c)] = append(r.failed[acct(c)], c.req)
				}
				break
			}
			c.unplaced = c.unplaced[1:]
			p.plan.Stats.Unblocked++
		}
	}
	p.dropMoved(r.gone)
	p.plan.Stats.Placed = len(p.plan.Placements) + len(p.plan.AllocPlacements)
	p.plan.Stats.RelocationChecks = p.plan.Stats.FeasibilityChecks - checks
	p.plan.Stats.FeasibilityChecks = checks
}

// hopeless reports whether a class with no placement rules, asking for no
// more than c in every resource, found no room: c, no easier to fit, is
// not tried.
func (r *relocation) hopeless(c *class) bool {
	for _, f := range r.failed[acct(c)] {
		if f.Fits(c.req) {
			return true
		}
	}
	return false
}

// plain reports whether class c has no placement rule beyond its request:
// any class of the same accounting asking for as much fits where it fits.
func plain(c *class) bool {
	return len(c.hard) == 0 && len(c.avoid) == 0 && !c.distinct && len(c.spread) == 0
}

// acct is the accounting class c's room is counted in: 1 for limits
// (prod), 0 for reservations.
func acct(c *class) int {
	if c.prod {
		return 1
	}
	return 0
}

// movable reports whether placement i of the pass may move.
func (p *pass) movable(i int32) bool {
	pl := &p.plan.Placements[i]
	if len(pl.Preempted) > 0 || len(pl.Ports) > 0 || pl.AllocSet != "" {
		return false
	}
	c := p.classes[p.classOf[p.planned[i].ti]]
	return !c.inAlloc && len(c.spread) == 0 && !c.distinct
}

// add lists placement i on its machine when it may move.
func (r *relocation) add(p *pass, i int32) {
	if !p.movable(i) {
		return
	}
	mi := p.planned[i].mi
	if _, seen := r.on[mi]; !seen {
		r.machines = append(r.machines, mi)
	}
	r.on[mi] = append(r.on[mi], i)
	r.free[mi] = r.free[mi].Add(p.placedClass(i).req)
}

// remove unlists placement k from machine mi.
func (r *relocation) remove(p *pass, k, mi int32) {
	r.on[mi] = slices.DeleteFunc(r.on[mi], func(x int32) bool { return x == k })
	r.free[mi] = r.free[mi].Sub(p.placedClass(k).req)
}

// makeRoomFor tries the machines where moving placements could make room
// for queue item ti of class c, those short of the least first, and
// reports whether ti was placed.
func (p *pass) makeRoomFor(r *relocation, c *class, ti int32) bool {
	opts := p.roomOptions(r, c, nil)
	var moves []move
	var res checkResult
	mi := p.tryOptions(opts, relocateTries, func(mi int32) bool {
		checks := p.plan.Stats.FeasibilityChecks
		defer func() { r.spent += p.plan.Stats.FeasibilityChecks - checks }()
		var ok bool
		if moves, ok = p.room(r, c, mi, relocateDepth, []int32{mi}); !ok {
			return false
		}
		if res, ok = p.roomMade(r, c, mi, moves); !ok {
			return false
		}
		return true
	})
	if mi < 0 {
		return false
	}
	p.commitMoves(r, moves)
	js := p.jobs[p.keyOf(ti)]
	p.place(c, ti, js, p.cand(mi, p.gens[mi], &res), res.score+p.spread(js, mi), int32(len(opts)))
	r.gone = append(r.gone, false)
	r.add(p, int32(len(p.planned)-1))
	return true
}

// tryOptions runs try on the options in order until it succeeds, at most
// tries times, skipping a machine that looks like one that failed (look);
// it returns the machine it succeeded on, or -1.
func (p *pass) tryOptions(opts []int32, tries int, try func(mi int32) bool) int32 {
	failed := map[[2]Resources]bool{}
	for _, mi := range opts {
		if tries == 0 {
			break
		}
		if failed[p.look(mi)] {
			continue
		}
		tries--
		if try(mi) {
			return mi
		}
		failed[p.look(mi)] = true
	}
	return -1
}

// roomMade is class c's check on machine mi once moves made room there.
// Room is counted by the same rule check counts it by (Available), so it
// passes; should it not, the moves are undone and the try fails.
func (p *pass) roomMade(r *relocation, c *class, mi int32, moves []move) (checkResult, bool) {
	res := p.check(c, &p.machines[mi], mi, true)
	if !res.ok || res.victims != nil {
		p.undoMoves(r, moves)
		return res, false
	}
	return res, true
}

// roomOptions lists the machines, other than those in chain, that admit
// class c and would hold it if their movable placements left, those short
// of the least first.
func (p *pass) roomOptions(r *relocation, c *class, chain []int32) []int32 {
	type option struct {
		mi    int32
		short float64
	}
	var opts []option
	r.spent += len(r.machines)
	for _, mi := range r.machines {
		m := &p.machines[mi]
		if len(r.on[mi]) == 0 || !m.usable || slices.Contains(chain, mi) {
			continue
		}
		avail := Available(m.in.Capacity, m.usedLim, m.usedRes, c.prod)
		if !c.req.Fits(avail.Add(r.free[mi])) || !p.admits(c, m, mi).ok {
			continue
		}
		opts = append(opts, option{mi, shortShare(c.req, avail, &m.in.Capacity)})
	}
	slices.SortStableFunc(opts, func(a, b option) int { return cmp.Compare(a.short, b.short) })
	out := make([]int32, len(opts))
	for i, o := range opts {
		out[i] = o.mi
	}
	return out
}

// look is what a machine offers relocation: its capacity and free room.
// Machines that look alike nearly always fail alike, so a try that failed
// on one skips the others: the tries go to machines that differ.
func (p *pass) look(mi int32) [2]Resources {
	m := &p.machines[mi]
	return [2]Resources{m.in.Capacity, m.in.Capacity.Sub(m.usedRes)}
}

// placedClass is the class of placement k.
func (p *pass) placedClass(k int32) *class { return p.classes[p.classOf[p.planned[k].ti]] }

// shortShare is how far avail falls short of req: the sum over dimensions
// of the shortfall's share of the machine.
func shortShare(req, avail Resources, capacity *Resources) float64 {
	var s float64
	for d := Dim(0); d < NumDims; d++ {
		if short := req[d] - avail[d]; short > 0 && capacity[d] > 0 {
			s += float64(short) / float64(capacity[d])
		}
	}
	return s
}

// move is a placement relocation applies: placement k from one machine to
// another, with the score and machines examined there.
type move struct {
	k, from, to int32
	score       float64
	looked      int32
}

// room moves at most relocateMoves of the placements on machine mi to
// other machines until class c fits there. Each goes where its class's
// pool scores best, or, while depth is above zero, to a machine where room
// is made for it in turn. No machine in chain (mi and the machines the
// moves serve) receives one. The moves are applied to the machines' sums;
// when c cannot be made to fit, every one is undone.
func (p *pass) room(r *relocation, c *class, mi int32, depth int, chain []int32) ([]move, bool) {
	m := &p.machines[mi]
	fits := func() bool { return c.req.Fits(Available(m.in.Capacity, m.usedLim, m.usedRes, c.prod)) }
	if fits() {
		return nil, true
	}
	short := c.req.Sub(Available(m.in.Capacity, m.usedLim, m.usedRes, c.prod))
	for d := range short {
		short[d] = max(short[d], 0)
	}
	covers := func(k int32) float64 {
		req := p.placedClass(k).req
		var s float64
		for d := Dim(0); d < NumDims; d++ {
			if short[d] > 0 && m.in.Capacity[d] > 0 {
				s += float64(min(req[d], short[d])) / float64(m.in.Capacity[d])
			}
		}
		return s
	}
	scarce := func(k int32) int {
		if p.placedClass(k).wantsScarce {
			return 1
		}
		return 0
	}
	// Placements that ask for no scarce resource first (they find another
	// machine most easily), then those covering most of the shortfall,
	// then the smaller, then the earlier. One that finds no other machine
	// stays and the next is tried.
	list := slices.DeleteFunc(slices.Clone(r.on[mi]), func(k int32) bool { return r.moving[k] || covers(k) == 0 })
	slices.SortStableFunc(list, func(a, b int32) int {
		return cmp.Or(cmp.Compare(scarce(a), scarce(b)), cmp.Compare(covers(b), covers(a)),
			cmp.Compare(dominantShare(p.placedClass(a).req, &m.in.Capacity), dominantShare(p.placedClass(b).req, &m.in.Capacity)))
	})
	var moves []move
	taken := 0
	for _, k := range list {
		if fits() || taken == relocateMoves {
			break
		}
		sub, ok := p.rehome(r, k, mi, depth, chain)
		if ok {
			moves = append(moves, sub...)
			taken++
		}
	}
	if !fits() {
		p.undoMoves(r, moves)
		return nil, false
	}
	return moves, true
}

// rehome moves placement k off machine mi: to the best machine of its
// class's pool outside chain, or, while depth is above zero, to a machine
// where room is made for it. It changes nothing when neither works.
func (p *pass) rehome(r *relocation, k, mi int32, depth int, chain []int32) ([]move, bool) {
	vc := p.placedClass(k)
	js := p.jobs[p.keyOf(p.planned[k].ti)]
	r.moving[k] = true
	p.shift(k, mi, false)
	rejected := p.refresh(vc)
	if best, score := p.choose(vc, js, chain, true); best >= 0 { // a move preempts nothing
		e := vc.pool[best]
		p.shift(k, e.m, true)
		return []move{{k: k, from: mi, to: e.m, score: score, looked: rejected + int32(len(vc.pool))}}, true
	}
	if depth > 0 {
		opts := p.roomOptions(r, vc, chain)
		var sub []move
		var res checkResult
		to := p.tryOptions(opts, relocateNestedTries, func(to int32) bool {
			var ok bool
			if sub, ok = p.room(r, vc, to, depth-1, append(slices.Clip(chain), to)); !ok {
				return false
			}
			res, ok = p.roomMade(r, vc, to, sub)
			return ok
		})
		if to >= 0 {
			p.shift(k, to, true)
			return append(sub, move{k: k, from: mi, to: to, score: res.score + p.spread(js, to), looked: int32(len(opts))}), true
		}
	}
	p.shift(k, mi, true)
	r.moving[k] = false
	return nil, false
}

// undoMoves takes moves back, last first.
func (p *pass) undoMoves(r *relocation, moves []move) {
	for i := len(moves) - 1; i >= 0; i-- {
		mv := moves[i]
		p.shift(mv.k, mv.to, false)
		p.shift(mv.k, mv.from, true)
		r.moving[mv.k] = false
	}
}

// commitMoves writes moves into the plan: each moved placement leaves its
// place and goes to the end, with its new machine.
func (p *pass) commitMoves(r *relocation, moves []move) {
	for _, mv := range moves {
		pl := p.plan.Placements[mv.k]
		to := &p.machines[mv.to]
		pl.Machine, pl.MachineVersion, pl.Score, pl.MachinesExamined = to.in.Name, to.in.Version, mv.score, mv.looked
		r.gone[mv.k] = true
		r.moving[mv.k] = false
		r.remove(p, mv.k, mv.from)
		p.plan.Placements = append(p.plan.Placements, pl)
		p.planned = append(p.planned, planned{ti: p.planned[mv.k].ti, mi: mv.to})
		r.gone = append(r.gone, false)
		r.add(p, int32(len(p.planned)-1))
		p.plan.Stats.Relocated++
	}
}

// shift adds (or takes away) placement k's task to machine mi's sums, as
// place does, without touching the plan.
func (p *pass) shift(k int32, mi int32, add bool) {
	c := p.placedClass(k)
	js := p.jobs[p.keyOf(p.planned[k].ti)]
	m := &p.machines[mi]
	beforeLim, beforeRes := m.in.Capacity.Sub(m.usedLim), m.in.Capacity.Sub(m.usedRes)
	req := c.req
	if !add {
		req = Resources{}.Sub(req)
	}
	m.usedLim, m.usedRes = m.usedLim.Add(req), m.usedRes.Add(req)
	if !c.prod {
		m.npLim, m.npRes = m.npLim.Add(req), m.npRes.Add(req)
	}
	if js != nil {
		if add {
			p.addToJob(js, mi)
		} else {
			p.removeFromJob(js, mi)
		}
	}
	p.roomChanged(m, mi, &beforeLim, &beforeRes)
}

func (p *pass) removeFromJob(js *jobSpread, mi int32) {
	js.placed--
	js.machines[mi]--
	for k, d := range p.machines[mi].domains {
		if d >= 0 {
			js.domains[k][d]--
		}
	}
}

// dropMoved removes the placements marked gone, keeping each alloc
// placement after the same task placements as before.
func (p *pass) dropMoved(gone []bool) {
	if !slices.Contains(gone, true) {
		return
	}
	kept := make([]int, len(gone)+1) // kept[i]: placements kept among the first i
	out := p.plan.Placements[:0]
	planned := p.planned[:0]
	for i := range gone {
		kept[i+1] = kept[i]
		if !gone[i] {
			kept[i+1]++
			out = append(out, p.plan.Placements[i])
			planned = append(planned, p.planned[i])
		}
	}
	p.plan.Placements, p.planned = out, planned
	for i := range p.plan.AllocPlacements {
		a := &p.plan.AllocPlacements[i]
		a.Before = kept[min(a.Before, len(gone))]
	}
}
