package scheduler

import (
	"cmp"
	"math"
	"slices"
)

// epvmSteepness is k in the E-PVM-like cost exp(k*u) of a utilisation u in
// [0, 1]: steep enough that filling an emptier machine costs clearly less.
const epvmSteepness = 3

// maxDemandShapes bounds the shapes the hybrid policy's stranding measure
// tests a machine's free room against: the most common pending classes.
const maxDemandShapes = 32

// strandedWeight scales the hybrid policy's stranding penalty against its
// best-fit part (which lies in [0, 1]).
const strandedWeight = 32

// sumDemand adds up the capacity of the usable machines and what the
// whole workload asks for (the limits of what is placed and the requests
// of what is pending), and marks the resources nearly all asked for.
func (p *pass) sumDemand() {
	for i := range p.machines {
		m := &p.machines[i]
		if !m.usable {
			continue
		}
		p.capacity = p.capacity.Add(m.in.Capacity)
		p.request = p.request.Add(m.usedLim)
	}
	for i := range p.items {
		p.request = p.request.Add(p.items[i].Resources)
	}
	for d := Dim(0); d < ScoredDims; d++ {
		p.scarce[d] = p.capacity[d] > 0 && float64(p.request[d]) >= scarceShare*float64(p.capacity[d])
	}
}

// sizes measures each queue item for the queue's largest-first order:
// the share of the usable cell it asks for in each resource, weighted by
// the share of that resource the workload asks for, so that what the cell
// runs short of counts most.
func (p *pass) sizes() []float64 {
	var weight [ScoredDims]float64
	for d := Dim(0); d < ScoredDims; d++ {
		if c := p.capacity[d]; c > 0 {
			weight[d] = math.Min(float64(p.request[d])/float64(c), 1) / float64(c)
		}
	}
	size := make([]float64, len(p.items))
	for i := range p.items {
		r := &p.items[i].Resources
		for d := Dim(0); d < ScoredDims; d++ {
			size[i] += weight[d] * float64(max(r[d], 0))
		}
	}
	return size
}

// scarceShare: a resource the workload asks for at least this share of is
// scarce. Where nearly every unit is wanted, the pick among a sample of
// machines strands what the best machine would not have (a fraction of a
// GPU beside no CPU), and the task that needed it stays pending: a class
// asking for a scarce resource samples scarcePool times as many feasible
// machines. On the OpenB cell (GPUs 98% asked for), at the default K of
// 64, 390-700 tasks stayed pending with one pool size for all, 8-22 with
// this; every machine in view (K=0) leaves 12.
const (
	scarceShare = 0.9
	scarcePool  = 8
)

// demand is the pass's picture of what is waiting to be placed, which the
// hybrid policy uses to tell usable free room from stranded room.
type demand struct {
	shapes []demandShape
	// scarcity weighs each dimension by how much of the cell's capacity the
	// whole workload (placed and pending) asks for: stranding a scarce
	// resource costs more than stranding a plentiful one. Each weight also
	// divides by the mean machine capacity, so room is measured in
	// machines.
	scarcity [ScoredDims]float64
	large    []largeShape
	largeOf  []int32 // per class, its large shape or -1
	anyTight bool
	// mix is what the small pending classes ask for, per resource: the
	// proportions in which work that fits anywhere uses a machine's room,
	// for the stranding the shapes cannot see.
	mix   [ScoredDims]float64
	small float64 // the share of the pending tasks in small classes
}

type demandShape struct {
	req    Resources
	weight float64 // share of the pending tasks
}

// largeShape is a class that needs a large part of a machine.
type largeShape struct {
	req  Resources
	prod bool // counts limits (true) or reservations of placed tasks
	// slots counts the usable machines the shape fits on as they stand;
	// remaining counts its tasks not placed yet. A shape is tight when its
	// slots barely cover its remaining tasks: then taking one of its slots
	// away costs a whole pending task, typically a large one that needs most
	// of a machine and would otherwise find every machine nibbled at.
	slots     int
	remaining int
	tight     bool
}

// buildDemand gathers the most common pending classes and the scarcity of
// each resource.
func (p *pass) buildDemand() {
	capacity, request := p.capacity, p.request
	n := float64(len(p.machines))
	for d := Dim(0); d < ScoredDims; d++ {
		if capacity[d] > 0 {
			share := math.Min(float64(request[d])/float64(capacity[d]), 1)
			p.demand.scarcity[d] = share * n / float64(capacity[d])
		}
	}

	counts := make([]int, len(p.classes))
	for _, ci := range p.classOf {
		counts[ci]++
	}
	p.buildMix(counts, capacity, n)
	p.buildStrandingShapes(counts)
	p.buildLargeShapes(counts, capacity, n)
}

// buildMix sums what the small pending classes ask for (at most
// smallShare of the mean machine in every resource): the mix whose
// proportions the room of a machine should keep. small is their share of
// the pending tasks: only small work fills room as a fluid would.
func (p *pass) buildMix(counts []int, capacity Resources, machines float64) {
	var total, small float64
	for ci, c := range p.classes {
		if c.inAlloc {
			continue
		}
		total += float64(counts[ci])
		share := 0.0
		for d := Dim(0); d < ScoredDims; d++ {
			if capacity[d] > 0 {
				share = max(share, float64(c.req[d])*machines/float64(capacity[d]))
			}
		}
		if share > smallShare {
			continue
		}
		small += float64(counts[ci])
		for d := Dim(0); d < ScoredDims; d++ {
			p.demand.mix[d] += float64(max(c.req[d], 0)) * float64(counts[ci])
		}
	}
	if total > 0 {
		p.demand.small = small / total
	}
}

// smallShare: a class is small when it asks for at most this share of
// the mean machine in every resource, so that a machine holds a dozen or
// more of it and its room fills as a fluid would.
const smallShare = 1.0 / 16

// buildStrandingShapes keeps the most common pending classes, weighted by
// their share of the pending tasks, as the shapes free room is tested
// against.
func (p *pass) buildStrandingShapes(counts []int) {
	idx := make([]int, 0, len(p.classes))
	for ci, c := range p.classes {
		if !c.inAlloc { // allocs hold their own room
			idx = append(idx, ci)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(counts[b], counts[a]) })
	idx = idx[:min(len(idx), maxDemandShapes)]
	var total float64
	for _, ci := range idx {
		total += float64(counts[ci])
	}
	for _, ci := range idx {
		p.demand.shapes = append(p.demand.shapes, demandShape{
			req: p.classes[ci].req, weight: float64(counts[ci]) / total,
		})
	}
}

// buildLargeShapes picks the classes that ask for a large part of a typical
// machine, counts the machines each fits on, and marks the tight ones.
func (p *pass) buildLargeShapes(counts []int, capacity Resources, machines float64) {
	p.demand.largeOf = make([]int32, len(p.classes))
	var idx []int
	for ci, c := range p.classes {
		p.demand.largeOf[ci] = -1
		if c.inAlloc {
			continue
		}
		share := 0.0
		for d := Dim(0); d < ScoredDims; d++ {
			if capacity[d] > 0 {
				share = max(share, float64(c.req[d])*machines/float64(capacity[d]))
			}
		}
		if share >= largeShare {
			idx = append(idx, ci)
		}
	}
	if len(idx) > maxLargeShapes {
		slices.SortStableFunc(idx, func(a, b int) int {
			return cmp.Compare(p.demand.volume(&p.classes[b].req), p.demand.volume(&p.classes[a].req))
		})
		idx = idx[:maxLargeShapes]
	}
	for _, ci := range idx {
		c := p.classes[ci]
		p.demand.largeOf[ci] = int32(len(p.demand.large))
		p.demand.large = append(p.demand.large, largeShape{req: c.req, prod: c.prod, remaining: counts[ci]})
	}
	if len(p.demand.large) == 0 {
		return
	}
	for i := range p.machines {
		m := &p.machines[i]
		if !m.usable {
			continue
		}
		lim, res := m.in.Capacity.Sub(m.usedLim), m.in.Capacity.Sub(m.usedRes)
		for t := range p.demand.large {
			sh := &p.demand.large[t]
			if (sh.prod && sh.req.Fits(lim)) || (!sh.prod && sh.req.Fits(res)) {
				sh.slots++
			}
		}
	}
	for t := range p.demand.large {
		p.demand.updateTight(t)
	}
}

// A class is large when it asks for at least largeShare of the mean
// machine's capacity in some resource; at most maxLargeShapes are tracked.
const (
	largeShare     = 0.5
	maxLargeShapes = 32
)

// tightMargin: a large shape is tight when its slots are fewer than its
// remaining tasks times this. A shape only a few kinds of machine hold is
// protected long before its last slots go: on OpenB's whole cell, 3 batch
// tasks of 120 cores and 8 GPUs fit only the 39 machines of 128 cores, and
// at a margin of 1 nothing kept the smaller tasks placed before them off
// those machines. Margin 1: 59-261 tasks pending on 4 of 10 seeds; 8: 5
// of 30 seeds left some; 16 and 32: none of 30.
const tightMargin = 16

// tightPenalty is what taking a slot of a tight shape away costs: more than
// any difference of fit, less than a preemption.
const tightPenalty = 1

// updateTight recomputes whether large shape t is tight and reports a
// change.
func (d *demand) updateTight(t int) bool {
	sh := &d.large[t]
	tight := sh.remaining > 0 && float64(sh.slots) <= tightMargin*float64(sh.remaining)
	changed := tight != sh.tight
	sh.tight = tight
	if tight {
		d.anyTight = true
	}
	return changed
}

// machineChanged updates the slots of the large shapes after a machine's
// free room went from before to after (per accounting: limits,
// reservations), and reports whether a shape became tight or stopped being
// tight.
func (d *demand) machineChanged(beforeLim, beforeRes, afterLim, afterRes *Resources) bool {
	changed := false
	for t := range d.large {
		sh := &d.large[t]
		b, a := beforeRes, afterRes
		if sh.prod {
			b, a = beforeLim, afterLim
		}
		was, is := sh.req.Fits(*b), sh.req.Fits(*a)
		if was == is {
			continue
		}
		if is {
			sh.slots++
		} else {
			sh.slots--
		}
		if d.updateTight(t) {
			changed = true
		}
	}
	return changed
}

// placed records that a task of class ci was placed, and reports whether a
// shape's tightness changed.
func (d *demand) placed(ci int32) bool {
	if t := d.largeOf[ci]; t >= 0 {
		d.large[t].remaining--
		return d.updateTight(int(t))
	}
	return false
}

// tightCost is the penalty for turning free room `before` into `after` for
// a task of class ci: one tightPenalty per tight large shape, other than
// the task's own, that fitted before and no longer does. The room is
// measured on the placing task's accounting.
func (d *demand) tightCost(ci int32, before, after *Resources) float64 {
	if !d.anyTight {
		return 0
	}
	own := d.largeOf[ci]
	var cost float64
	for t := range d.large {
		sh := &d.large[t]
		if !sh.tight || int32(t) == own {
			continue
		}
		if sh.req.Fits(*before) && !sh.req.Fits(*after) {
			cost += tightPenalty
		}
	}
	return cost
}

// volume is the scarce room a request takes, in machines.
func (d *demand) volume(r *Resources) float64 {
	var v float64
	for k := Dim(0); k < ScoredDims; k++ {
		v += d.scarcity[k] * float64(r[k])
	}
	return v
}

// stranded measures the free room that pending work could not use, on a
// machine of the given capacity. For each demand shape that does not fit
// in free, all of free is stranded for it, weighted by the shape's share:
// an idle GPU machine without the CPU left for any GPU task strands its
// GPUs. For the shapes that fit, the room is stranded as far as it is out
// of proportion with the workload's mix (mixStranded): small tasks fit
// everywhere until the end, so the shapes alone see nothing while a
// machine fills with CPU-heavy work and leaves memory no task will use.
func (d *demand) stranded(free, capacity *Resources) float64 {
	var room float64
	for r := Dim(0); r < ScoredDims; r++ {
		if free[r] > 0 {
			room += d.scarcity[r] * float64(free[r])
		}
	}
	if room == 0 {
		return 0
	}
	var misfit float64
	for i := range d.shapes {
		if !d.shapes[i].req.Fits(*free) {
			misfit += d.shapes[i].weight
		}
	}
	if d.small == 0 {
		return misfit * room
	}
	return misfit*room + (1-misfit)*d.small*d.mixStranded(free, capacity, room)
}

// mixStranded is the part of free room (worth room) that work in the
// workload's mix could not use: as much of the mix as fits (the resource
// the room holds least of, against the mix, bounds it) takes its share of
// each resource, and the rest of the room stays. It is the limit, for
// tasks small against a machine, of the fragmentation measure of Weng et
// al. (ATC '23): room out of proportion with the work is lost however
// small the tasks are. Resources the machine does not have are left out,
// so a CPU-only machine is judged by the CPU and memory of the mix.
func (d *demand) mixStranded(free, capacity *Resources, room float64) float64 {
	t, per := -1.0, 0.0 // how much of the mix fits, and the room one unit of it takes
	for r := Dim(0); r < ScoredDims; r++ {
		if d.mix[r] <= 0 || capacity[r] <= 0 {
			continue
		}
		if f := float64(max(free[r], 0)) / d.mix[r]; t < 0 || f < t {
			t = f
		}
		per += d.scarcity[r] * d.mix[r]
	}
	if t < 0 {
		return 0
	}
	return math.Max(room-t*per, 0)
}

// fit scores leaving `after` free out of `capacity` on a machine (or alloc)
// that had `before` free (and strandedBefore stranded, for hybrid), under
// the pass's policy. Larger is better. Every
// policy's fit lies in [0, 1] except hybrid's, whose stranding term may move
// it by a few units. Dimensions the machine does not have are ignored;
// dimensions the task does not ask for still count, so that a CPU-only task
// on a GPU machine with idle GPUs looks loose to best-fit.
func (p *pass) fit(policy Policy, before, after, capacity *Resources, strandedBefore float64) float64 {
	var n, sumFree, rise, share float64
	for d := Dim(0); d < ScoredDims; d++ {
		c := capacity[d]
		if c <= 0 {
			continue
		}
		free := clamp01(float64(after[d]) / float64(c))
		n++
		sumFree += free
		if policy == PolicyWorstFit {
			free0 := clamp01(float64(before[d]) / float64(c))
			rise += math.Exp(epvmSteepness*(1-free)) - math.Exp(epvmSteepness*(1-free0))
			share += free0 - free
		}
	}
	if n == 0 {
		return 0
	}
	switch policy {
	case PolicyWorstFit:
		// E-PVM: the rise of the exponential cost, per unit of the machine
		// the task takes, against the steepest possible rise (k e^k), so
		// that small tasks see differences between machines as clearly as
		// large ones.
		if share <= 0 {
			return 1
		}
		return 1 - rise/(share*epvmSteepness*math.Exp(epvmSteepness))
	case PolicyBestFit:
		return 1 - sumFree/n
	}
	// Hybrid: best fit, minus the rise in stranded room the placement
	// causes (a fall, which is a gain, when the task uses room that was
	// stranded for everything else).
	rise = p.demand.stranded(after, capacity) - strandedBefore
	return (1-p.demand.small)*(1-sumFree/n) - strandedWeight*rise
}

func clamp01(f float64) float64 {
	if f < 0 {
		return 0
	}
	if f > 1 {
		return 1
	}
	return f
}

// scarceAvoid weighs scarceHeld against the fit.
const scarceAvoid = 1

// scarceHeld is what a task that asks for no scarce resource pays for a
// machine that still has some free: the share of each scarce resource the
// machine keeps free. Such work belongs on machines without it, or whose
// share of it is spent, so that the CPU and memory beside a free GPU stay
// for the GPU work.
func (p *pass) scarceHeld(free, capacity *Resources) float64 {
	var s float64
	for d := Dim(0); d < ScoredDims; d++ {
		if p.scarce[d] && capacity[d] > 0 && free[d] > 0 {
			s += float64(free[d]) / float64(capacity[d])
		}
	}
	return scarceAvoid * s
}
