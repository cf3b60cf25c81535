package projections

import "github.com/corralhq/corral/events"

func (s *State) jobSubmitted(p *events.JobSubmitted) bool {
	spec := p.Spec
	if spec == nil || spec.Name == "" || spec.User == "" {
		return false
	}
	key := JobKey{spec.User, spec.Name}
	if old := s.Jobs[key]; old != nil {
		if !old.Dead() {
			return false
		}
		s.forgetJob(old) // a new job under a dead one's name
	}
	v := p.SpecVersion
	if v <= 0 {
		v = 1
	}
	j := &Job{User: spec.User, Name: spec.Name, Versions: []SpecVersion{{v, spec}}, Current: v, SubmittedUS: s.TimeUS}
	if sa := spec.StartAfter; sa != "" {
		if pre := s.Jobs[JobKey{spec.User, sa}]; pre != nil && pre.End != JobFinishedEnd {
			j.Deferred = true
		}
	}
	s.Jobs[key] = j
	s.indexJob(j)
	s.charge(j)
	return true
}

func (s *State) jobUpdated(p *events.JobUpdated) bool {
	if p.Spec == nil {
		return false
	}
	j := s.Jobs[JobKey{p.Spec.User, p.Spec.Name}]
	if j == nil || j.Dead() || p.SpecVersion <= j.LatestVersion() {
		return false
	}
	s.newVersion(j, p.SpecVersion, p.Spec)
	j.Update = &Update{From: p.PreviousVersion, To: p.SpecVersion, SinceUS: s.TimeUS}
	return true
}

func (s *State) jobUpdateCommitted(p *events.JobUpdateCommitted) bool {
	j := s.Jobs[JobKey{p.User, p.Job}]
	if j == nil || j.Update == nil {
		return false
	}
	j.Update = nil
	j.LastUpdate = UpdateOutcome{Version: p.SpecVersion, How: "committed", Reason: p.Reason}
	return true
}

func (s *State) jobUpdateHalted(p *events.JobUpdateHalted) bool {
	j := s.Jobs[JobKey{p.User, p.Job}]
	if j == nil || j.Update == nil || j.Update.To != p.SpecVersion || j.Update.Halted != "" {
		return false
	}
	j.Update.Halted = p.Reason
	if j.Update.Halted == "" {
		j.Update.Halted = "halted"
	}
	return true
}

func (s *State) jobUpdatePromoted(p *events.JobUpdatePromoted) bool {
	j := s.Jobs[JobKey{p.User, p.Job}]
	if j == nil || j.Update == nil || j.Update.To != p.SpecVersion || j.Update.Promoted {
		return false
	}
	j.Update.Promoted = true
	return true
}

func (s *State) jobRolledBack(p *events.JobUpdateRolledBack) bool {
	j := s.Jobs[JobKey{p.User, p.Job}]
	if j == nil || j.Dead() || p.SpecVersion <= j.LatestVersion() {
		return false
	}
	spec := j.SpecOf(p.ToVersion)
	if spec == nil {
		return false
	}
	s.newVersion(j, p.SpecVersion, spec)
	j.Update = nil
	j.LastUpdate = UpdateOutcome{Version: p.FromVersion, How: "rolled back", Reason: p.Reason}
	if p.Reason != "" {
		j.LastUpdate.How = "reverted"
	}
	return true
}

// newVersion puts a spec version in force, moving the job's labels and
// quota charge with it.
func (s *State) newVersion(j *Job, v int64, spec *events.JobSpec) {
	s.unindexLabels(j)
	s.uncharge(j)
	j.Versions = append(j.Versions, SpecVersion{v, spec})
	j.Current = v
	s.indexLabels(j)
	s.charge(j)
}

func (s *State) jobEnded(pos int64, user, name string, end JobEnd, reason string) bool {
	j := s.Jobs[JobKey{user, name}]
	if j == nil || j.Dead() {
		return false
	}
	// Writers end every task first; this keeps the state whole if one did not.
	for _, t := range j.Tasks {
		if t != nil && t.State != TaskDead {
			s.die(t, Killed, "job ended", pos)
		}
	}
	s.uncharge(j)
	j.End, j.EndReason, j.EndedUS, j.Update = end, reason, s.TimeUS, nil
	delete(s.live, j)
	if j.Deferred {
		j.Deferred = false
		s.unwait(j)
	}
	return true
}

func (s *State) charge(j *Job) {
	spec := j.Spec()
	if j.Dead() || spec == nil || spec.AllocSet != "" {
		j.Charge = Resources{}
		return
	}
	j.Charge, j.ChargeBand = Demand(spec), BandOf(spec.Priority)
	ub := UserBand{j.User, j.ChargeBand}
	setOrDelete(s.Charged, ub, s.Charged[ub].Add(j.Charge))
}

func (s *State) uncharge(j *Job) {
	if j.Charge.IsZero() {
		return
	}
	ub := UserBand{j.User, j.ChargeBand}
	setOrDelete(s.Charged, ub, s.Charged[ub].Sub(j.Charge))
	j.Charge = Resources{}
}

// setOrDelete keeps zero vectors out of the maps, so equal states have equal maps.
func setOrDelete(m map[UserBand]Resources, k UserBand, r Resources) {
	if r.IsZero() {
		delete(m, k)
	} else {
		m[k] = r
	}
}
