package scheduler

import "slices"

// Across passes, a scheduler that remembers machines also remembers, per
// class left with pending tasks, the machines it found infeasible (Borg
// §3.4 caches scores "until the properties of the machine or task change";
// this keeps the cheapest and most common verdict, "no"). A cell with work
// that fits nowhere otherwise pays, every pass, for every such class, a
// check of every machine; with the memory it checks only the machines that
// changed since. At most maxRememberedClasses classes are kept, a bitset
// of the cell's machines each.
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

// maxRememberedClasses bounds the classes whose verdicts are kept: a
// bitset of the cell's machines each (1.25 KiB for 10,000 machines).
const maxRememberedClasses = 4096

// recallInfeasible gives each class the verdicts of the last pass on the
// machines that have not changed since.
func (p *pass) recallInfeasible() {
	if p.memo == nil {
		return
	}
	p.memo.mu.Lock()
	prev, last := p.memo.machines, p.memo.infeasible
	p.memo.mu.Unlock()
	if len(last) == 0 {
		return
	}
	n := len(p.machines)
	where := indexIn(prev, p.cell.Machines)
	for _, c := range p.classes {
		old := last[c.key]
		switch {
		case old == nil:
		case where == nil:
			c.known = old // read only: the next pass gets a new set
		default:
			c.known = newBitset(n)
			for i, j := range where {
				if j >= 0 && old.has(j) {
					c.known.set(int32(i))
				}
			}
		}
	}
}

// indexIn maps each machine of cur to its index in prev, -1 when it is new
// or changed; nil when the cell is the same machine for machine. Cells keep
// their machines in one order, so a position is compared first; a map is
// built only when machines came or went.
func indexIn(prev, cur []*Machine) []int32 {
	n := len(cur)
	same := len(prev) == n
	for i := 0; same && i < n; i++ {
		same = prev[i] == cur[i]
	}
	if same {
		return nil
	}
	where := make([]int32, n)
	var at map[*Machine]int32
	if len(prev) != n {
		at = make(map[*Machine]int32, len(prev))
		for i, m := range prev {
			at[m] = int32(i)
		}
	}
	for i, m := range cur {
		switch j, ok := at[m]; {
		case at == nil && prev[i] == m:
			where[i] = int32(i)
		case ok:
			where[i] = j
		default:
			where[i] = -1
		}
	}
	return where
}

// rememberInfeasible keeps, for the classes left with pending tasks (the
// ones a later pass will try again), the machines known infeasible for
// them: those carried from earlier passes and those this pass rejected
// before touching them. A class placed whole leaves nothing to remember.
func (p *pass) rememberInfeasible() {
	if p.memo == nil {
		return
	}
	next := map[string]bitset{}
	for _, c := range p.classes {
		if len(c.unplaced) == 0 || (c.known == nil && len(c.rejected) == 0) {
			continue
		}
		if len(next) == maxRememberedClasses {
			break
		}
		b := newBitset(len(p.machines))
		copy(b, c.known)
		for _, mi := range c.rejected {
			b.set(mi)
		}
		next[c.key] = b
	}
	p.memo.mu.Lock()
	// A copy: the caller may reuse its slice for the next cell.
	p.memo.machines, p.memo.infeasible = slices.Clone(p.cell.Machines), next
	p.memo.mu.Unlock()
}
