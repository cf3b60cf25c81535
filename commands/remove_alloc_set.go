package commands

import (
	"strings"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// RemoveAllocSet releases an alloc set and its quota. It is refused while
// live jobs run in it: kill or move them first.
type RemoveAllocSet struct {
	Meta
	User string // the set's owner; default: the actor
	Name string
}

func (c RemoveAllocSet) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	user := owner(c.Actor, c.User)
	set := s.AllocSets[projections.JobKey{User: user, Name: c.Name}]
	if set == nil {
		return nil, refuse(NotFound, "name", "alloc set %s/%s does not exist", user, c.Name)
	}
	if err := mayChange(c.Actor, user, "alloc set "+user+"/"+c.Name); err != nil {
		return nil, err
	}
	var using []string
	for _, j := range s.JobsOf(user) {
		if !j.Dead() && j.Spec().AllocSet == c.Name {
			using = append(using, j.Name)
		}
	}
	if len(using) > 0 {
		return nil, refuse(FailedPrecondition, "name", "live jobs run in alloc set %s/%s: %s; kill them or update them out of it first",
			user, c.Name, strings.Join(using, ", "))
	}
	b := newDraft(s, now)
	b.add(events.AllocSetStream(user, c.Name), &events.AllocSetRemoved{User: user, Name: c.Name})
	return b.evs, nil
}
