package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// KillJob kills one job by name, or every live job a label selector
// matches: their tasks are killed, then the jobs, then the jobs deferred
// until they finished (which now never will).
type KillJob struct {
	Meta
	User     string // the jobs' owner; default: the actor
	Name     string
	Selector string
	Reason   string
}

func (c KillJob) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	var jobs []*projections.Job
	switch {
	case c.Name != "" && c.Selector != "":
		return nil, invalid("selector", "give a name or a selector, not both")
	case c.Name != "":
		user := owner(c.Actor, c.User)
		j := s.Job(user, c.Name)
		if j == nil {
			return nil, refuse(NotFound, "name", "%s does not exist", jobRef(user, c.Name))
		}
		if err := mayChange(c.Actor, j.User, jobRef(j.User, j.Name)); err != nil {
			return nil, err
		}
		if j.Dead() {
			return nil, refuse(FailedPrecondition, "name", "%s is already dead (%s)", jobRef(j.User, j.Name), endName(j))
		}
		jobs = []*projections.Job{j}
	case c.Selector != "":
		var err error
		if jobs, err = selectJobs(s, c.Actor, c.User, c.Selector); err != nil {
			return nil, err
		}
	default:
		return nil, invalid("name", "give a job name or a selector")
	}
	reason := c.Reason
	if reason == "" {
		reason = "killed by " + c.Actor.User
	}
	b := newDraft(s, now)
	for _, j := range jobs {
		b.killJob(j, reason)
	}
	return b.evs, nil
}
