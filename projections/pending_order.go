package projections

import "slices"

// PendingOrder is PendingTasks for a caller that asks on every pass (the
// scheduling core): it keeps the last order and sorts in only the tasks
// that entered the queue or changed their spec version since, instead of
// sorting the whole queue again. The order is PendingTasks', always.
//
// It reads the state like any reader (under the caller's consistent view)
// and writes only itself: one PendingOrder per caller.
type PendingOrder struct {
	state  *State
	cursor int64 // the state's pendingLog position read up to
	sorted []prioritized
}

// Tasks returns s's pending tasks in PendingTasks' order.
func (o *PendingOrder) Tasks(s *State) []*Task {
	end := s.pendingLogBase + int64(len(s.pendingLog))
	if o.state != s || o.cursor < s.pendingLogBase || end-o.cursor > int64(len(s.pending)) {
		// Another state, a log trimmed past what was read, or more news
		// than queue: sort afresh.
		o.state, o.cursor, o.sorted = s, end, s.sortedPending()
		return tasksOf(o.sorted)
	}
	news := s.pendingLog[o.cursor-s.pendingLogBase:]
	o.cursor = end
	if len(news) == 0 && len(o.sorted) == len(s.pending) {
		return tasksOf(o.sorted) // nothing entered, so nothing left either
	}
	// Those in the news are placed afresh; the others keep their place if
	// still pending (a task whose priority moved is in the news).
	moved := make(map[*Task]struct{}, len(news))
	var added []prioritized
	for _, t := range news {
		if _, seen := moved[t]; seen {
			continue
		}
		moved[t] = struct{}{}
		if _, ok := s.pending[t]; ok {
			added = append(added, prioritized{t.Priority(), t})
		}
	}
	kept := make([]prioritized, 0, len(s.pending))
	for _, p := range o.sorted {
		if _, ok := moved[p.t]; ok {
			continue
		}
		if _, ok := s.pending[p.t]; ok {
			kept = append(kept, p)
		}
	}
	slices.SortFunc(added, comparePending)
	o.sorted = mergePending(kept, added)
	return tasksOf(o.sorted)
}

// mergePending merges two lists in the queue's order.
func mergePending(a, b []prioritized) []prioritized {
	if len(b) == 0 {
		return a
	}
	out := make([]prioritized, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if comparePending(b[0], a[0]) < 0 {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	out = append(out, a...)
	return append(out, b...)
}
