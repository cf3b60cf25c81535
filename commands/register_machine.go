package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// RegisterMachine adds a machine to the cell; it is up and takes tasks.
type RegisterMachine struct {
	Meta
	Machine    string
	Address    string // the agent's host:port, for polls
	Capacity   projections.Resources
	Attributes map[string]string
	PortBase   int32 // first port for tasks; 0: projections.DefaultPortBase
}

func (c RegisterMachine) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "registering a machine"); err != nil {
		return nil, err
	}
	var v violations
	checkMachineName(&v, c.Machine)
	checkMachineFields(&v, c.Address, c.Capacity, c.Attributes, c.PortBase)
	if err := v.err(); err != nil {
		return nil, err
	}
	if s.Machines[c.Machine] != nil {
		return nil, refuse(AlreadyExists, "machine", "machine %s is registered already; use UpdateMachine to change it", c.Machine)
	}
	b := newDraft(s, now)
	b.add(events.MachineStream(c.Machine), &events.MachineRegistered{Machine: c.Machine, Address: c.Address,
		Capacity: c.Capacity.Proto(), Attributes: c.Attributes, PortBase: c.PortBase})
	return b.evs, nil
}
