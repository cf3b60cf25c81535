package projections

import "github.com/corralhq/corral/events"

func (s *State) allocSetCreated(p *events.AllocSetCreated) bool {
	key := JobKey{p.User, p.Name}
	if p.User == "" || p.Name == "" || s.AllocSets[key] != nil || p.Count < 0 || p.Count > maxTaskIndex {
		return false
	}
	set := &AllocSet{User: p.User, Name: p.Name, Priority: p.Priority, Resources: ResourcesOf(p.Resources),
		Constraints: p.Constraints, Labels: p.Labels, CreatedUS: s.TimeUS}
	set.Allocs = make([]*Alloc, p.Count)
	for i := range set.Allocs {
		a := &Alloc{Set: set, Index: int32(i), tasks: map[*Task]struct{}{}}
		set.Allocs[i] = a
		s.pendingAllocs[a] = struct{}{}
	}
	set.Charge, set.ChargeBand = set.Resources.Scale(int64(p.Count)), BandOf(p.Priority)
	ub := UserBand{set.User, set.ChargeBand}
	setOrDelete(s.Charged, ub, s.Charged[ub].Add(set.Charge))
	s.AllocSets[key] = set
	return true
}

func (s *State) allocSetRemoved(pos int64, p *events.AllocSetRemoved) bool {
	set := s.AllocSets[JobKey{p.User, p.Name}]
	if set == nil {
		return false
	}
	for _, a := range set.Allocs {
		s.unplaceAlloc(a, pos)
		delete(s.pendingAllocs, a)
	}
	ub := UserBand{set.User, set.ChargeBand}
	setOrDelete(s.Charged, ub, s.Charged[ub].Sub(set.Charge))
	delete(s.AllocSets, set.Key())
	return true
}

func portBase(p int32) int32 {
	if p <= 0 {
		return DefaultPortBase
	}
	return p
}

func (s *State) alloc(user, name string, index int32) *Alloc {
	set := s.AllocSets[JobKey{user, name}]
	if set == nil || index < 0 || int(index) >= len(set.Allocs) {
		return nil
	}
	return set.Allocs[index]
}

func (s *State) placeAlloc(a *Alloc, m *Machine, pos int64) {
	delete(s.pendingAllocs, a)
	a.machine, a.Machine = m, m.Name
	m.allocs[a] = struct{}{}
	m.Limits = m.Limits.Add(a.Set.Resources)
	m.Reserved = m.Reserved.Add(a.Set.Resources)
	m.Version = pos
}

// unplaceAlloc takes an alloc off its machine, ending the tasks inside it
// (writers end them first), and makes it pending again.
func (s *State) unplaceAlloc(a *Alloc, pos int64) {
	m := a.machine
	if m == nil {
		return
	}
	for t := range a.tasks {
		s.die(t, Lost, "alloc moved", pos)
	}
	delete(m.allocs, a)
	m.Limits = m.Limits.Sub(a.Set.Resources)
	m.Reserved = m.Reserved.Sub(a.Set.Resources)
	m.Version = pos
	a.machine, a.Machine = nil, ""
	s.pendingAllocs[a] = struct{}{}
}

func (s *State) allocScheduled(pos int64, p *events.AllocScheduled) bool {
	a := s.alloc(p.User, p.Name, p.Index)
	m := s.Machines[p.Machine]
	if a == nil || a.machine != nil || m == nil {
		return false
	}
	s.placeAlloc(a, m, pos)
	return true
}

func (s *State) allocEvicted(pos int64, p *events.AllocEvicted) bool {
	a := s.alloc(p.User, p.Name, p.Index)
	if a == nil || a.machine == nil || (p.Machine != "" && a.Machine != p.Machine) {
		return false
	}
	s.unplaceAlloc(a, pos)
	return true
}
