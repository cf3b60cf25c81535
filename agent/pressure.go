package agent

import (
	"cmp"
	"slices"
)

// pressureCandidate is a non-prod task the agent may evict when the
// machine is short of memory or disk.
type pressureCandidate struct {
	key          string
	priority     int32
	memory, disk int64 // bytes it uses
	overLimit    bool  // it uses more memory or disk than its limit
}

// pressureNeed is how many bytes of each incompressible resource must be
// freed; zero or less means none.
type pressureNeed struct{ memory, disk int64 }

// pressureVictims picks the tasks to evict to free need, in kill order:
// first those over their own limit (they caused it), then the lowest
// priority, then those that free most of what is short, then the largest,
// so that as few tasks as possible die. A task that frees nothing short is
// never chosen. Prod tasks must not be among cands: reservations were
// wrong, and prod does not pay for it (Borg §5.5). Pure.
func pressureVictims(cands []pressureCandidate, need pressureNeed) []string {
	// What evicting c is worth: its share of each shortfall it frees.
	relief := func(c pressureCandidate) float64 {
		var r float64
		if need.memory > 0 {
			r += float64(min(c.memory, need.memory)) / float64(need.memory)
		}
		if need.disk > 0 {
			r += float64(min(c.disk, need.disk)) / float64(need.disk)
		}
		return r
	}
	cands = slices.Clone(cands)
	slices.SortFunc(cands, func(x, y pressureCandidate) int {
		if x.overLimit != y.overLimit {
			if x.overLimit {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(x.priority, y.priority), cmp.Compare(relief(y), relief(x)),
			cmp.Compare(y.memory+y.disk, x.memory+x.disk), cmp.Compare(x.key, y.key))
	})
	var out []string
	for _, c := range cands {
		if need.memory <= 0 && need.disk <= 0 {
			break
		}
		if (need.memory <= 0 || c.memory == 0) && (need.disk <= 0 || c.disk == 0) {
			continue // frees nothing that is short
		}
		out = append(out, c.key)
		need.memory -= c.memory
		need.disk -= c.disk
	}
	return out
}
