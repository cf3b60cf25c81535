package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// CreateAllocSet reserves Count allocs of Resources each, on machines the
// scheduler picks; jobs of the same user then run inside them (their
// spec's alloc_set). The set is charged to the actor's quota in its band.
type CreateAllocSet struct {
	Meta
	Name        string
	Count       int32
	Priority    int32
	Resources   projections.Resources
	Constraints []*events.Constraint
	Labels      map[string]string
}

func (c CreateAllocSet) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	var v violations
	checkName(&v, "name", c.Name)
	if c.Count <= 0 || c.Count > MaxTasks {
		v.add("count", "must be between 1 and %d", MaxTasks)
	}
	if c.Priority < 0 || c.Priority > projections.MaxPriority {
		v.add("priority", "%d is outside 0-%d", c.Priority, projections.MaxPriority)
	}
	checkResources(&v, "resources", c.Resources.Proto(), true)
	for i, con := range c.Constraints {
		checkConstraint(&v, index("constraints", i), con)
	}
	checkLabels(&v, "labels", c.Labels)
	if err := v.err(); err != nil {
		return nil, err
	}
	user := c.Actor.User
	if s.AllocSets[projections.JobKey{User: user, Name: c.Name}] != nil {
		return nil, refuse(AlreadyExists, "name", "alloc set %s/%s exists", user, c.Name)
	}
	b := newDraft(s, now)
	demand, ok := c.Resources.ScaleChecked(int64(c.Count))
	if !ok {
		return nil, refuse(InvalidArgument, "resources", "%d allocs of [%s] total more than any total the cell keeps (%d in a dimension): ask for fewer or smaller allocs", c.Count, c.Resources, int64(events.MaxTotal))
	}
	if err := b.admit(user, projections.BandOf(c.Priority), demand, projections.Resources{}, "resources"); err != nil {
		return nil, err
	}
	b.add(events.AllocSetStream(user, c.Name), &events.AllocSetCreated{User: user, Name: c.Name, Count: c.Count, Priority: c.Priority,
		Resources: c.Resources.Proto(), Constraints: c.Constraints, Labels: c.Labels})
	return b.evs, nil
}
