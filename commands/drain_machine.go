package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// DrainMachine stops new placements on a machine and evicts what runs
// there (reason "drain"), so it can be taken out for maintenance; the
// evicted tasks are pending again at once. Draining=false opens it again.
type DrainMachine struct {
	Meta
	Machine  string
	Draining bool
	Reason   string
}

func (c DrainMachine) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "draining a machine"); err != nil {
		return nil, err
	}
	m := s.Machines[c.Machine]
	if m == nil {
		return nil, refuse(NotFound, "machine", "machine %q is not registered", c.Machine)
	}
	if !c.Draining && !m.Draining {
		return nil, nil
	}
	b := newDraft(s, now)
	b.add(events.MachineStream(m.Name), &events.MachineDrainSet{Machine: m.Name, Draining: c.Draining, Reason: c.Reason})
	if c.Draining {
		b.clearMachine(m, true, "drain")
	}
	b.finishJobs()
	return b.evs, nil
}
