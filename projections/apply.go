package projections

import (
	"errors"
	"fmt"

	"github.com/corralhq/corral/events"
)

// ErrGap: an event's position is beyond the next one; the caller missed
// events and must read them before applying this one.
var ErrGap = errors.New("projections: event position leaves a gap")

// maxTaskIndex bounds the task slice an event can grow, so a corrupt index
// cannot allocate the heap away. Specs allow far fewer tasks.
const maxTaskIndex = 1 << 20

// Apply folds one event into s: a type switch on the payload that changes
// only s. It does no I/O and reads no clock; the event's occurred_at is the
// only time it knows.
//
// An event at or before s.Position was applied already and is ignored, so
// at-least-once delivery is harmless. An event with position 0 is taken as
// the next one (events decided but not yet appended). An event beyond the
// next position returns ErrGap and changes nothing. An event that names
// something the state does not hold (a task of an unknown job, a start on
// another machine) moves only the position and counts in s.Skipped; event
// types the projection does not know are ignored. The state takes ownership
// of the payload: callers must not change it afterwards.
func Apply(s *State, e events.Event) error {
	pos := e.Position
	if pos == 0 {
		pos = s.Position + 1
	}
	if pos <= s.Position {
		return nil
	}
	if pos != s.Position+1 {
		return fmt.Errorf("%w: the state is at position %d, the event at %d", ErrGap, s.Position, pos)
	}
	s.Position = pos
	if !e.OccurredAt.IsZero() {
		s.TimeUS = e.OccurredAt.UnixMicro()
	}
	if !s.fold(pos, e.Data) {
		s.Skipped++
	}
	return nil
}

// ApplyAll applies events in order and stops at the first error.
func ApplyAll(s *State, evs []events.Event) error {
	for i := range evs {
		if err := Apply(s, evs[i]); err != nil {
			return err
		}
	}
	return nil
}

// fold changes s by one payload and reports whether the payload made sense
// against s.
func (s *State) fold(pos int64, d events.Payload) bool {
	switch p := d.(type) {
	case *events.UsageReported:
		return s.usageReported(p)
	case *events.TaskScheduled:
		return s.taskScheduled(pos, p)
	case *events.TaskStarted:
		return s.taskStarted(p)
	case *events.TaskSubmitted:
		return s.taskSubmitted(pos, p)
	case *events.TaskFinished:
		t := s.liveTask(p.User, p.Job, p.Index, p.Machine)
		if t == nil {
			return false
		}
		t.ExitCode, t.Signal = p.ExitCode, ""
		s.die(t, Finished, "", pos)
		return true
	case *events.TaskFailed:
		return s.taskFailed(pos, p)
	case *events.TaskEvicted:
		t := s.liveTask(p.User, p.Job, p.Index, p.Machine)
		if t == nil {
			return false
		}
		s.die(t, Evicted, p.Reason, pos)
		return true
	case *events.TaskKilled:
		t := s.task(p.User, p.Job, p.Index)
		if t == nil || t.State == TaskDead || (t.Live() && p.Machine != "" && p.Machine != t.Machine) {
			return false
		}
		s.die(t, Killed, p.Reason, pos)
		return true
	case *events.TaskLost:
		t := s.liveTask(p.User, p.Job, p.Index, p.Machine)
		if t == nil {
			return false
		}
		s.die(t, Lost, p.Reason, pos)
		return true
	case *events.TaskUpdated:
		return s.taskUpdated(pos, p)
	case *events.ReservationEstimated:
		return s.reservationEstimated(pos, p)
	case *events.JobSubmitted:
		return s.jobSubmitted(p)
	case *events.JobUpdated:
		return s.jobUpdated(p)
	case *events.JobUpdateCommitted:
		j := s.Jobs[JobKey{p.User, p.Job}]
		if j == nil || j.Update == nil {
			return false
		}
		j.Update = nil
		return true
	case *events.JobUpdateRolledBack:
		return s.jobRolledBack(p)
	case *events.JobKilled:
		return s.jobEnded(pos, p.User, p.Job, JobKilledEnd, p.Reason)
	case *events.JobFinished:
		return s.jobEnded(pos, p.User, p.Job, JobFinishedEnd, "")
	case *events.MachineRegistered:
		m := s.Machines[p.Machine]
		if m == nil {
			if p.Machine == "" {
				return false
			}
			m = &Machine{Name: p.Machine, tasks: map[*Task]struct{}{}, allocs: map[*Alloc]struct{}{}}
			s.Machines[p.Machine] = m
		}
		m.Address, m.Capacity, m.Attributes, m.PortBase, m.Version = p.Address, ResourcesOf(p.Capacity), p.Attributes, portBase(p.PortBase), pos
		return true
	case *events.MachineUpdated:
		m := s.Machines[p.Machine]
		if m == nil {
			return false
		}
		m.Address, m.Capacity, m.Attributes, m.PortBase, m.Version = p.Address, ResourcesOf(p.Capacity), p.Attributes, portBase(p.PortBase), pos
		return true
	case *events.MachineDrainSet:
		m := s.Machines[p.Machine]
		if m == nil {
			return false
		}
		m.Draining, m.Reason, m.Version = p.Draining, p.Reason, pos
		return true
	case *events.MachineDown:
		m := s.Machines[p.Machine]
		if m == nil {
			return false
		}
		m.State, m.Reason, m.Version = MachineDown, p.Reason, pos
		return true
	case *events.MachineUp:
		m := s.Machines[p.Machine]
		if m == nil {
			return false
		}
		m.State, m.Version = MachineUp, pos
		if !m.Draining {
			m.Reason = ""
		}
		return true
	case *events.MachineRemoved:
		return s.machineRemoved(pos, p)
	case *events.QuotaSet:
		b, ok := ParseBand(p.Band)
		if !ok || p.User == "" {
			return false
		}
		setOrDelete(s.Quotas, UserBand{p.User, b}, ResourcesOf(p.Resources))
		return true
	case *events.AllocSetCreated:
		return s.allocSetCreated(p)
	case *events.AllocSetRemoved:
		return s.allocSetRemoved(pos, p)
	case *events.AllocScheduled:
		a := s.alloc(p.User, p.Name, p.Index)
		m := s.Machines[p.Machine]
		if a == nil || a.machine != nil || m == nil {
			return false
		}
		s.placeAlloc(a, m, pos)
		return true
	case *events.AllocEvicted:
		a := s.alloc(p.User, p.Name, p.Index)
		if a == nil || a.machine == nil || (p.Machine != "" && a.Machine != p.Machine) {
			return false
		}
		s.unplaceAlloc(a, pos)
		return true
	case *events.LeaderElected:
		s.Leader, s.LeaderEpoch, s.LeaderAddress = p.Holder, p.Epoch, p.Address
		return true
	case nil:
		return false
	}
	return true // a type this projection has no use for
}

// ---- task transitions -------------------------------------------------------

// setState moves t to st, keeping the pending index and the job's counters.
func (s *State) setState(t *Task, st TaskState) {
	switch t.State {
	case TaskPending:
		delete(s.pending, t)
		t.Job.pending--
	case TaskScheduled, TaskRunning:
		t.Job.live--
	}
	t.State = st
	switch st {
	case TaskPending:
		s.pending[t] = struct{}{}
		t.Job.pending++
	case TaskScheduled, TaskRunning:
		t.Job.live++
	}
	t.SinceUS = s.TimeUS
}

func (s *State) attach(t *Task, m *Machine, a *Alloc, pos int64) {
	t.machine, t.alloc = m, a
	m.tasks[t] = struct{}{}
	if a != nil {
		a.tasks[t] = struct{}{}
		a.Used = a.Used.Add(t.Limit)
	} else {
		m.Limits = m.Limits.Add(t.Limit)
		m.Reserved = m.Reserved.Add(t.Reservation)
	}
	m.Version = pos
}

func (s *State) detach(t *Task, pos int64) {
	m := t.machine
	if m == nil {
		return
	}
	delete(m.tasks, t)
	if a := t.alloc; a != nil {
		delete(a.tasks, t)
		a.Used = a.Used.Sub(t.Limit)
	} else {
		m.Limits = m.Limits.Sub(t.Limit)
		m.Reserved = m.Reserved.Sub(t.Reservation)
	}
	m.Version = pos
	t.machine, t.alloc = nil, nil
}

// die ends t. It keeps the machine's name so the task's fate stays visible.
func (s *State) die(t *Task, how DeathHow, reason string, pos int64) {
	s.detach(t, pos)
	s.setState(t, TaskDead)
	t.How, t.Pid = how, 0
	t.LastHow, t.LastMachine = how, t.Machine
	if reason != "" {
		t.Reason = reason
	}
}

// job is Jobs[{user, name}] through Apply's one-entry cache.
func (s *State) job(user, name string) *Job {
	j := s.lastJob
	if j == nil || j.Name != name || j.User != user {
		if j = s.Jobs[JobKey{user, name}]; j == nil {
			return nil
		}
		s.lastJob = j
	}
	return j
}

// task is Task through Apply's cache.
func (s *State) task(user, job string, index int32) *Task {
	j := s.job(user, job)
	if j == nil {
		return nil
	}
	return j.Task(index)
}

// liveTask returns the task if it is placed, on machine when one is named.
func (s *State) liveTask(user, job string, index int32, machine string) *Task {
	t := s.task(user, job, index)
	if t == nil || !t.Live() || (machine != "" && t.Machine != machine) {
		return nil
	}
	return t
}

func (s *State) taskSubmitted(pos int64, p *events.TaskSubmitted) bool {
	j := s.job(p.User, p.Job)
	if j == nil || j.Dead() || p.Index < 0 || p.Index >= maxTaskIndex {
		return false
	}
	v := p.SpecVersion
	if v == 0 {
		v = j.Current
	}
	spec := j.SpecOf(v)
	if spec == nil {
		return false
	}
	t := j.Task(p.Index)
	if t == nil {
		for int(p.Index) >= len(j.Tasks) {
			j.Tasks = append(j.Tasks, nil)
		}
		t = &Task{Job: j, Index: p.Index, State: TaskDead}
		j.Tasks[p.Index] = t
	} else {
		s.detach(t, pos)
	}
	// Restarts count what the task did to itself (failing, exiting under
	// an always policy), not evictions and losses; max_restarts bounds them.
	if p.Reason == "rescheduled" && t.State == TaskDead && (t.How == Failed || t.How == Finished) {
		t.Restarts++
	}
	t.Seq = pos
	// A replacement that fails before it runs still counts against the
	// update's disruption budget.
	t.Replacing = p.Reason == "updated" || (p.Reason == "rescheduled" && t.Replacing)
	t.SpecVersion, t.Limit = v, TaskLimit(spec, p.Index)
	t.Reservation = t.Limit
	t.Machine, t.Ports, t.AllocIndex, t.How, t.Reason, t.Pid = "", nil, -1, NotDead, p.Reason, 0
	t.NotBeforeUS, t.FailStreak = p.NotBeforeUs, p.FailStreak
	s.setState(t, TaskPending)
	if j.Deferred {
		j.Deferred = false
		s.unwait(j)
	}
	return true
}

func (s *State) taskScheduled(pos int64, p *events.TaskScheduled) bool {
	t := s.task(p.User, p.Job, p.Index)
	if t == nil || t.State != TaskPending {
		return false
	}
	m := s.Machines[p.Machine]
	if m == nil {
		return false
	}
	var a *Alloc
	if name := t.Spec().GetAllocSet(); name != "" {
		set := s.AllocSets[JobKey{t.Job.User, name}]
		if set == nil || p.AllocIndex < 0 || int(p.AllocIndex) >= len(set.Allocs) || set.Allocs[p.AllocIndex].machine != m {
			return false
		}
		a = set.Allocs[p.AllocIndex]
		t.AllocIndex = p.AllocIndex
	}
	t.Machine, t.Ports = m.Name, p.Ports
	s.setState(t, TaskScheduled)
	s.attach(t, m, a, pos)
	return true
}

func (s *State) taskStarted(p *events.TaskStarted) bool {
	t := s.liveTask(p.User, p.Job, p.Index, p.Machine)
	if t == nil {
		return false
	}
	s.setState(t, TaskRunning)
	t.Pid, t.Replacing, t.StartedUS = p.Pid, false, s.TimeUS
	return true
}

func (s *State) taskFailed(pos int64, p *events.TaskFailed) bool {
	t := s.liveTask(p.User, p.Job, p.Index, p.Machine)
	if t == nil {
		return false
	}
	t.ExitCode, t.Signal, t.FailMessage = p.ExitCode, p.Signal, p.Message
	if p.WillRestart {
		// The agent restarts it in place: it keeps its resources.
		t.Restarts++
		t.Reason, t.Pid = p.Message, 0
		s.setState(t, TaskScheduled)
		return true
	}
	s.die(t, Failed, p.Message, pos)
	return true
}

func (s *State) taskUpdated(pos int64, p *events.TaskUpdated) bool {
	t := s.task(p.User, p.Job, p.Index)
	if t == nil || t.State == TaskDead {
		return false
	}
	spec := t.Job.SpecOf(p.SpecVersion)
	if spec == nil {
		return false
	}
	limit := TaskLimit(spec, t.Index)
	if t.Live() && spec.AllocSet != t.Spec().GetAllocSet() {
		return false // moving in or out of an alloc set takes a restart
	}
	if t.Live() {
		m := t.machine
		if limit != t.Limit {
			if a := t.alloc; a != nil {
				a.Used = a.Used.Sub(t.Limit).Add(limit)
			} else {
				m.Limits = m.Limits.Sub(t.Limit).Add(limit)
				m.Reserved = m.Reserved.Sub(t.Reservation).Add(limit)
			}
			t.Reservation = limit
		}
		// The priority may have changed, and with it what may preempt it.
		m.Version = pos
	} else {
		t.Reservation = limit
	}
	t.SpecVersion, t.Limit = p.SpecVersion, limit
	return true
}

func (s *State) usageReported(p *events.UsageReported) bool {
	for _, u := range p.Tasks {
		if u == nil {
			continue
		}
		if t := s.liveTask(u.User, u.Job, u.Index, p.Machine); t != nil {
			t.Usage = Usage{
				WindowStartUS: p.WindowStartUs, WindowEndUS: p.WindowEndUs,
				CPUCoreSeconds: u.CpuCoreSeconds, MemoryBytes: u.MemoryBytes,
				MemoryMaxBytes: u.MemoryMaxBytes, DiskBytes: u.DiskBytes,
			}
		}
	}
	return s.Machines[p.Machine] != nil
}

func (s *State) reservationEstimated(pos int64, p *events.ReservationEstimated) bool {
	m := s.Machines[p.Machine]
	if m == nil {
		return false
	}
	for _, r := range p.Tasks {
		if r == nil {
			continue
		}
		t := s.liveTask(r.User, r.Job, r.Index, p.Machine)
		if t == nil {
			continue
		}
		res := ResourcesOf(r.Reservation)
		if t.alloc == nil {
			m.Reserved = m.Reserved.Sub(t.Reservation).Add(res)
		}
		t.Reservation = res
		m.Version = pos
	}
	return true
}

// ---- jobs ---------------------------------------------------------------------

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
	j.Update = &Update{From: p.PreviousVersion, To: p.SpecVersion}
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

// ---- machines and allocs ------------------------------------------------------

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
	delete(s.Machines, p.Machine)
	return true
}

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
