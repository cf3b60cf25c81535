package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// RemoveMachine takes a machine out of the cell. Whatever still runs there
// is lost and pending again elsewhere; drain first to evict it gracefully.
type RemoveMachine struct {
	Meta
	Machine string
	Reason  string
}

func (c RemoveMachine) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "removing a machine"); err != nil {
		return nil, err
	}
	m := s.Machines[c.Machine]
	if m == nil {
		return nil, refuse(NotFound, "machine", "machine %q is not registered", c.Machine)
	}
	b := newDraft(s, now)
	b.clearMachine(m, false, "machine removed")
	b.add(events.MachineStream(m.Name), &events.MachineRemoved{Machine: m.Name, Reason: c.Reason})
	b.finishJobs()
	return b.evs, nil
}
