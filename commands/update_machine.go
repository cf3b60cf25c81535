package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// UpdateMachine replaces a machine's address, capacity, attributes and port
// base (an agent that restarted on changed hardware). Tasks already placed
// stay; if the machine is now overcommitted, the agent's reports of OOM
// kills and the scheduler's next pass settle it.
type UpdateMachine struct {
	Meta
	Machine    string
	Address    string
	Capacity   projections.Resources
	Attributes map[string]string
	PortBase   int32
}

func (c UpdateMachine) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "updating a machine"); err != nil {
		return nil, err
	}
	m := s.Machines[c.Machine]
	if m == nil {
		return nil, refuse(NotFound, "machine", "machine %q is not registered", c.Machine)
	}
	var v violations
	checkMachineFields(&v, c.Address, c.Capacity, c.Attributes, c.PortBase)
	if err := v.err(); err != nil {
		return nil, err
	}
	b := newDraft(s, now)
	b.add(events.MachineStream(c.Machine), &events.MachineUpdated{Machine: c.Machine, Address: c.Address,
		Capacity: c.Capacity.Proto(), Attributes: c.Attributes, PortBase: c.PortBase})
	return b.evs, nil
}
