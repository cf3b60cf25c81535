package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// KillTask kills one task; the job does not replace it. When it was the
// job's last task left, the job finishes.
type KillTask struct {
	Meta
	User   string // the job's owner; default: the actor
	Job    string
	Index  int32
	Reason string
}

func (c KillTask) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	user := owner(c.Actor, c.User)
	j := s.Job(user, c.Job)
	if j == nil {
		return nil, refuse(NotFound, "job", "%s does not exist", jobRef(user, c.Job))
	}
	if err := mayChange(c.Actor, j.User, jobRef(j.User, j.Name)); err != nil {
		return nil, err
	}
	t := j.Task(c.Index)
	if t == nil {
		return nil, refuse(NotFound, "index", "%s has no task %d", jobRef(user, c.Job), c.Index)
	}
	if t.State == projections.TaskDead {
		return nil, refuse(FailedPrecondition, "index", "task %s is already dead (%s)", t.Key(), t.End)
	}
	reason := c.Reason
	if reason == "" {
		reason = "killed by " + c.Actor.User
	}
	b := newDraft(s, now)
	b.kill(t, reason)
	b.finishJobs()
	return b.evs, nil
}
