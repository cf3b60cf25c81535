package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// RollbackUpdate undoes a job's uncommitted update: the spec it replaced is
// in force again under a new version number, and the tasks roll back to it
// under the same disruption limit (tasks the update had not reached yet
// just change version). Rolling back is not charged against quota: it
// restores what was admitted before.
type RollbackUpdate struct {
	Meta
	User string // the job's owner; default: the actor
	Job  string
}

func (c RollbackUpdate) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	j, err := liveJob(s, c.Actor, c.User, c.Job)
	if err != nil {
		return nil, err
	}
	if j.Update == nil {
		return nil, refuse(FailedPrecondition, "job", "%s has no uncommitted update to roll back (a committed update is final; push the old spec as a new update)", jobRef(j.User, j.Name))
	}
	b := newDraft(s, now)
	if err := b.rollback(j, ""); err != nil {
		return nil, err
	}
	b.finishJobs()
	return b.evs, nil
}
