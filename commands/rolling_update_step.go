package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// RollingUpdateStep advances rolling updates: for one job, or (Job empty,
// admin only: the master's tick) for every job with an open update or
// tasks behind its spec version. Each step judges the open update (commits
// it once every task serves the new version, fails it past its progress
// deadline, reverting it when the policy says) and stops as many tasks as
// the update policy's max_disruptions allows, counting those replaced
// earlier that do not serve yet; it is harmless to call often.
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
	}
	b.finishJobs()
	return b.evs, nil
}
