package projections

import "github.com/corralhq/corral/events"

func (s *State) machineRegistered(pos int64, p *events.MachineRegistered) bool {
	m := s.Machines[p.Machine]
	if m == nil {
		if p.Machine == "" {
			return false
		}
		m = &Machine{Name: p.Machine, tasks: map[*Task]struct{}{}, allocs: map[*Alloc]struct{}{}}
		s.Machines[p.Machine] = m
	}
	m.setSpec(pos, p.Address, p.Capacity, p.Attributes, p.PortBase)
	return true
}

func (s *State) machineUpdated(pos int64, p *events.MachineUpdated) bool {
	m := s.Machines[p.Machine]
	if m == nil {
		return false
	}
	m.setSpec(pos, p.Address, p.Capacity, p.Attributes, p.PortBase)
	return true
}

func (s *State) machineDrainSet(pos int64, p *events.MachineDrainSet) bool {
	m := s.Machines[p.Machine]
	if m == nil {
		return false
	}
	m.Draining, m.Reason, m.Version = p.Draining, p.Reason, pos
	return true
}

func (s *State) machineDown(pos int64, p *events.MachineDown) bool {
	m := s.Machines[p.Machine]
	if m == nil {
		return false
	}
	m.State, m.Reason, m.Version = MachineDown, p.Reason, pos
	s.releaseAll(m, pos)
	return true
}

func (s *State) machineUp(pos int64, p *events.MachineUp) bool {
	m := s.Machines[p.Machine]
	if m == nil {
		return false
	}
	m.State, m.Version = MachineUp, pos
	if !m.Draining {
		m.Reason = ""
	}
	return true
}

func (s *State) machineRemoved(pos int64, p *events.MachineRemoved) bool {
	m := s.Machines[p.Machine]
	if m == nil {
		return false
	}
	// Writers move every task and alloc away first.
	for t := range m.tasks {
		s.die(t, Lost, "machine removed", pos)
	}
	for a := range m.allocs {
		s.unplaceAlloc(a, pos)
	}
	s.releaseAll(m, pos)
	delete(s.Machines, p.Machine)
	return true
}

// setSpec records what a registration or an update says of m.
func (m *Machine) setSpec(pos int64, address string, capacity *events.Resources, attributes map[string]string, base int32) {
	m.Address, m.Capacity, m.Attributes, m.PortBase, m.Version = address, ResourcesOf(capacity), attributes, portBase(base), pos
}
