package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// RollingUpdateStep advances what disruption budgets hold back: rolling
// updates, for one job, or (Job empty, admin only: the master's tick) for
// every job with an open update or tasks behind its spec version, and then
// the drains of every draining machine that still holds tasks. Each step
// judges the open update (commits it once every task serves the new
// version, fails it past its progress deadline, reverting it when the
// policy says) and stops as many tasks as the job's disruption budget
// allows (disruptionBudget: max_disruptions less the tasks that do not
// serve now), rolls before drains, both from the one budget; it is
// harmless to call often.
type RollingUpdateStep struct {
	Meta
	User string // the job's owner; default: the actor
	Job  string
}

func (c RollingUpdateStep) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	b := newDraft(s, now)
	if c.Job != "" {
		j, err := liveJob(s, c.Actor, c.User, c.Job)
		if err != nil {
			return nil, err
		}
		b.stepUpdate(j)
		b.rollForward(j)
	} else {
		if err := mustBeAdmin(c.Actor, "stepping every job's update"); err != nil {
			return nil, err
		}
		for _, j := range s.SortedJobs() {
			if !j.Dead() && (j.Update != nil || j.Behind()) {
				b.stepUpdate(j)
				b.rollForward(j)
			}
		}
		for _, m := range s.SortedMachines() {
			if m.Draining && m.TaskCount() > 0 {
				b.stepDrain(m)
			}
		}
	}
	b.finishJobs()
	return b.evs, nil
}

// DrainsOpen reports whether a draining machine still holds tasks, which
// RollingUpdateStep moves as budgets allow: the master's tick steps while
// one does.
func DrainsOpen(s *projections.State) bool {
	for _, m := range s.Machines {
		if m.Draining && m.TaskCount() > 0 {
			return true
		}
	}
	return false
}
