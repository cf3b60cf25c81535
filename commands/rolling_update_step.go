package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// RollingUpdateStep advances rolling updates: for one job, or (Job empty,
// admin only: the master's tick) for every job with tasks behind its spec
// version. Each step stops as many tasks as the update policy's
// max_disruptions allows, counting those stopped earlier whose
// replacements have not started yet; it is harmless to call often.
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
		b.rollForward(j)
	} else {
		if err := mustBeAdmin(c.Actor, "stepping every job's update"); err != nil {
			return nil, err
		}
		for _, j := range s.SortedJobs() {
			if !j.Dead() && j.Behind() {
				b.rollForward(j)
			}
		}
	}
	b.finishJobs()
	return b.evs, nil
}
