package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// CommitUpdate closes a job's update: it can no longer be rolled back, and
// the job takes updates again. Tasks still on older versions keep rolling.
type CommitUpdate struct {
	Meta
	User string // the job's owner; default: the actor
	Job  string
}

func (c CommitUpdate) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	j, err := liveJob(s, c.Actor, c.User, c.Job)
	if err != nil {
		return nil, err
	}
	if j.Update == nil {
		return nil, refuse(FailedPrecondition, "job", "%s has no uncommitted update", jobRef(j.User, j.Name))
	}
	b := newDraft(s, now)
	b.add(jobStream(j), &events.JobUpdateCommitted{User: j.User, Job: j.Name, SpecVersion: j.Update.To})
	return b.evs, nil
}

// liveJob finds a job the actor may change and that is not dead.
func liveJob(s *projections.State, a Actor, user, name string) (*projections.Job, error) {
	user = owner(a, user)
	j := s.Job(user, name)
	if j == nil {
		return nil, refuse(NotFound, "job", "%s does not exist", jobRef(user, name))
	}
	if err := mayChange(a, j.User, jobRef(j.User, j.Name)); err != nil {
		return nil, err
	}
	if j.Dead() {
		return nil, refuse(FailedPrecondition, "job", "%s is dead (%s)", jobRef(j.User, j.Name), endName(j))
	}
	return j, nil
}
