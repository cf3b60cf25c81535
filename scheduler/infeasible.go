package scheduler

import "slices"

// Across passes, a scheduler that remembers machines also remembers, per
// class, the machines it found infeasible (Borg §3.4 caches scores "until
// the properties of the machine or task change"; this keeps the cheapest
// and most common verdict, "no"). A cell with work that fits nowhere
// otherwise pays, every pass, for every such class, a check of every
// machine; with the memory it checks only the machines that changed since.
//
// The memory is exact. A verdict is kept, and used, only on the machine
// as the pass's input holds it (the pass has not yet placed on or evicted
// from it: an eviction for a small task can free room a large victim held
// for everyone), and the input Machine is never changed once passed: the
// same pointer in a later pass is the same machine, and the same class
// key the same requirements, so the check would fail again. That holds for
// every kind of class: a task inside an alloc set looks at the allocs on
// the machine, and a job with distinct hosts at its own tasks there (the
// key names the job), both part of the machine.

// bitset marks machines by index.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int32) bool { return b != nil && b[i>>6]&(1<<(uint(i)&63)) != 0 }

func (b bitset) set(i int32) { b[i>>6] |= 1 << (uint(i) & 63) }

func (b bitset) any() bool {
	for _, w := range b {
		if w != 0 {
			return true
		}
	}
	return false
}

// recallInfeasible gives each class the verdicts of the last pass on the
// machines that have not changed since, and an empty set for its own.
func (p *pass) recallInfeasible() {
	if p.memo == nil {
		return
	}
	p.memo.mu.Lock()
	prev, last := p.memo.machines, p.memo.infeasible
	p.memo.mu.Unlock()
	n := len(p.machines)
	// where maps each machine to its index in the last pass, -1 when it
	// is new or changed; nil when the cell is the same machine for machine.
	var where []int32
	same := len(prev) == n
	for i := 0; same && i < n; i++ {
		same = prev[i] == p.cell.Machines[i]
	}
	if !same && len(last) > 0 {
		at := make(map[*Machine]int32, len(prev))
		for i, m := range prev {
			at[m] = int32(i)
		}
		where = make([]int32, n)
		for i, m := range p.cell.Machines {
			j, ok := at[m]
			if !ok {
				j = -1
			}
			where[i] = j
		}
	}
	for _, c := range p.classes {
		c.infeasible = newBitset(n)
		old := last[c.key]
		if old == nil {
			continue
		}
		if where == nil {
			c.known = old
			copy(c.infeasible, old)
			continue
		}
		c.known = newBitset(n)
		for i, j := range where {
			if j >= 0 && old.has(j) {
				c.known.set(int32(i))
			}
		}
		copy(c.infeasible, c.known)
	}
}

// rememberInfeasible keeps this pass's verdicts for the next one.
func (p *pass) rememberInfeasible() {
	if p.memo == nil {
		return
	}
	next := map[string]bitset{}
	for _, c := range p.classes {
		if c.infeasible != nil && c.infeasible.any() {
			next[c.key] = c.infeasible
		}
	}
	p.memo.mu.Lock()
	// A copy: the caller may reuse its slice for the next cell.
	p.memo.machines, p.memo.infeasible = slices.Clone(p.cell.Machines), next
	p.memo.mu.Unlock()
}
