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
	b.commitUpdate(j, "")
	b.rollForward(j)
	b.finishJobs()
	return b.evs, nil
}

// PromoteUpdate promotes an update's canaries: the rest of the tasks roll,
// and the update commits itself once all are healthy (auto_commit).
type PromoteUpdate struct {
	Meta
	User string // the job's owner; default: the actor
	Job  string
}

func (c PromoteUpdate) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	j, err := liveJob(s, c.Actor, c.User, c.Job)
	if err != nil {
		return nil, err
	}
	u := j.Update
	switch {
	case u == nil:
		return nil, refuse(FailedPrecondition, "job", "%s has no open update to promote", jobRef(j.User, j.Name))
	case j.Spec().GetUpdate().GetCanary() == 0:
		return nil, refuse(FailedPrecondition, "job", "%s: the update to spec version %d has no canaries (update.canary)", jobRef(j.User, j.Name), u.To)
	case u.Promoted:
		return nil, refuse(FailedPrecondition, "job", "%s: the update to spec version %d is promoted already", jobRef(j.User, j.Name), u.To)
	case u.Halted != "":
		return nil, refuse(FailedPrecondition, "job", "%s: the update to spec version %d failed (%s): roll it back, or commit it to force it through", jobRef(j.User, j.Name), u.To, u.Halted)
	}
	b := newDraft(s, now)
	b.add(jobStream(j), &events.JobUpdatePromoted{User: j.User, Job: j.Name, SpecVersion: u.To})
	promoted := *u
	promoted.Promoted = true
	b.updates[j] = &promoted
	b.rollForward(j)
	b.finishJobs()
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
