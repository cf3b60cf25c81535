package commands

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// The disruption budget: the one rule every voluntary eviction (a rolling
// update's restarts, a drain) asks before it stops a task that serves.
// Preemption by a higher priority and machine loss are not voluntary and
// do not ask it.

// disrupted reports whether a task does not serve at the draft's time, and
// so counts against its job's max_disruptions whatever disrupted it: the
// draft stopped or resubmitted it; it waits to be placed or to start; its
// health check fails; or it replaces a task a roll or a drain stopped and
// has not settled yet (Task.Disrupted: healthy, or without a check run for
// min_healthy_time). A task that has run since before any of that and has
// no failing check serves. Stopping a disrupted task disrupts nothing more.
func (b *draft) disrupted(t *projections.Task) bool {
	switch {
	case b.dead(t):
		return false
	case b.changed(t):
		return true
	}
	return !t.Serving(b.now.UnixMicro())
}

// disruptionBudget is how many more of j's serving tasks may be stopped
// voluntarily now: the update policy's max_disruptions of the spec in
// force, less the tasks already disrupted. It may be negative.
func (b *draft) disruptionBudget(j *projections.Job) int {
	n := maxDisruptions(b.currentOf(j).Spec)
	for _, t := range j.Tasks {
		if t != nil && b.disrupted(t) {
			n--
		}
	}
	return n
}

// drainedFreely reports whether a job's tasks leave a draining machine at
// once, without a budget: batch jobs, as Nomad drains batch allocations
// and applies migrate.max_parallel to services only. A batch task loses
// its progress either way; holding it only delays the maintenance.
func drainedFreely(spec *events.JobSpec) bool { return spec.GetAppclass() == "batch" }

// DrainHold is a job whose disruption budget keeps its tasks on a draining
// machine for now.
type DrainHold struct {
	User, Job string
	Tasks     int // its tasks left on the machine
	Budget    int // its max_disruptions
	Disrupted int // its tasks that do not serve now
}

func (h DrainHold) String() string {
	return fmt.Sprintf("%s: %d task(s) held, %d of at most %d disrupted", jobRef(h.User, h.Job), h.Tasks, h.Disrupted, h.Budget)
}

// stepDrain evicts from a draining machine what the disruption budgets
// allow: every task that does not serve, every batch task, and of each
// other job as many serving tasks as its budget leaves. What stays is
// evicted by later steps (RollingUpdateStep), as replacements settle.
// Allocs go once no live task is left on the machine. It returns the
// holds: the jobs whose tasks stay, by job.
func (b *draft) stepDrain(m *projections.Machine) []DrainHold {
	reason := projections.DrainReason
	budgets := map[*projections.Job]int{}
	holds := map[*projections.Job]*DrainHold{}
	var order []*projections.Job
	left := 0
	for _, t := range m.Tasks() {
		if b.changed(t) || !t.Live() || t.Machine != m.Name {
			continue // the step's roll has replaced it already, or it left
		}
		j := t.Job
		free := b.jobEnded(j) || drainedFreely(t.Spec()) || b.disrupted(t)
		if !free {
			n, ok := budgets[j]
			if !ok {
				n = b.disruptionBudget(j)
			}
			if free = n > 0; free {
				n--
			}
			budgets[j] = n
		}
		if free {
			b.evict(t, reason, "", nil, true)
			if b.state(t) == projections.TaskPending {
				b.replace[t] = true // the projection's rule for a drain's resubmission
			}
			continue
		}
		left++
		h := holds[j]
		if h == nil {
			h = &DrainHold{User: j.User, Job: j.Name, Budget: maxDisruptions(b.currentOf(j).Spec)}
			holds[j] = h
			order = append(order, j)
		}
		h.Tasks++
	}
	if left == 0 {
		for _, a := range m.Allocs() {
			b.add(events.AllocSetStream(a.Set.User, a.Set.Name), &events.AllocEvicted{User: a.Set.User, Name: a.Set.Name, Index: a.Index, Machine: m.Name, Reason: reason})
		}
	}
	out := make([]DrainHold, 0, len(order))
	for _, j := range order {
		h := holds[j]
		for _, t := range j.Tasks {
			if t != nil && b.disrupted(t) {
				h.Disrupted++
			}
		}
		out = append(out, *h)
	}
	slices.SortFunc(out, func(x, y DrainHold) int { return cmp.Or(cmp.Compare(x.User, y.User), cmp.Compare(x.Job, y.Job)) })
	return out
}

// DrainHolds is what keeps tasks on a draining machine at now: the jobs
// whose disruption budgets hold them, as a drain step would leave them
// (empty when m is not draining or nothing is held). The read API shows
// it, for the CLI's drain --wait and --force.
func DrainHolds(s *projections.State, m *projections.Machine, now time.Time) []DrainHold {
	if m == nil || !m.Draining {
		return nil
	}
	return newDraft(s, now).stepDrain(m)
}
