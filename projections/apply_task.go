package projections

import "github.com/corralhq/corral/events"

// setState moves t to st, keeping the pending index and the job's counters.
func (s *State) setState(t *Task, st TaskState) {
	if t.Replacing && t.State == TaskRunning && st != TaskRunning && t.Settled(s.TimeUS) {
		// A replacement that served is done replacing: what ends its run
		// now is not the roll's doing, and does not count against it.
		t.Replacing = false
	}
	switch t.State {
	case TaskPending:
		delete(s.pending, t)
		t.Job.pending--
		// Its wait is over: the next one is recorded afresh.
		t.WaitReason, t.WaitHint = "", ""
	case TaskScheduled, TaskRunning:
		t.Job.live--
	}
	t.State = st
	switch st {
	case TaskPending:
		s.pending[t] = struct{}{}
		s.notePending(t)
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
	s.leave(m, t)
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
func (s *State) die(t *Task, how TaskEnd, reason string, pos int64) {
	s.detach(t, pos)
	s.setState(t, TaskDead)
	t.End, t.Pid = how, 0
	t.Health, t.HealthMessage, t.HealthyUS = HealthUnknown, "", 0
	t.LastEnd, t.LastMachine = how, t.Machine
	if reason != "" {
		t.Reason = reason
	}
}

// stop ends t as die does, but a run placed on an up machine outside an
// alloc (its process may still run) keeps its resources there as a hold,
// until TaskStopped or the machine goes down or away.
func (s *State) stop(t *Task, how TaskEnd, reason string, pos int64) {
	m := t.machine
	if m == nil || t.alloc != nil || m.State != MachineUp {
		s.die(t, how, reason, pos)
		return
	}
	run := TaskRun{t.Key(), t.Seq}
	if m.stopping == nil {
		m.stopping = map[TaskRun]Hold{}
	}
	h := m.stopping[run]
	m.stopping[run] = Hold{Limit: h.Limit.Add(t.Limit), Reservation: h.Reservation.Add(t.Reservation), SinceUS: s.TimeUS}
	s.die(t, how, reason, pos)
	m.Limits, m.Reserved = m.Limits.Add(t.Limit), m.Reserved.Add(t.Reservation)
	t.StoppingOn = m.Name
}

// release frees a stopping run's hold on m.
func (s *State) release(m *Machine, run TaskRun, pos int64) bool {
	h, ok := m.stopping[run]
	if !ok {
		return false
	}
	delete(m.stopping, run)
	m.Limits, m.Reserved = m.Limits.Sub(h.Limit), m.Reserved.Sub(h.Reservation)
	m.Version = pos
	if t := s.task(run.User, run.Job, run.Index); t != nil && t.StoppingOn == m.Name {
		t.StoppingOn = ""
	}
	return true
}

// releaseAll frees every hold on m: a machine down or removed runs nothing
// the master can count on.
func (s *State) releaseAll(m *Machine, pos int64) {
	for _, run := range m.StoppingRuns() {
		s.release(m, run, pos)
	}
}

func (s *State) taskFinished(pos int64, p *events.TaskFinished) bool {
	t := s.liveTask(p.User, p.Job, p.Index, p.Machine)
	if t == nil {
		return false
	}
	t.ExitCode, t.Signal = p.ExitCode, ""
	s.die(t, Finished, "", pos)
	return true
}

func (s *State) taskEvicted(pos int64, p *events.TaskEvicted) bool {
	t := s.liveTask(p.User, p.Job, p.Index, p.Machine)
	if t == nil {
		return false
	}
	s.stopOrDie(t, p.Stopping, Evicted, p.Reason, pos)
	return true
}

func (s *State) taskKilled(pos int64, p *events.TaskKilled) bool {
	t := s.task(p.User, p.Job, p.Index)
	if t == nil || t.State == TaskDead || (t.Live() && p.Machine != "" && p.Machine != t.Machine) {
		return false
	}
	s.stopOrDie(t, p.Stopping, Killed, p.Reason, pos)
	return true
}

// stopOrDie ends t's run how: stopping (its machine still holds what it
// used until a TaskStopped) or dead at once.
func (s *State) stopOrDie(t *Task, stopping bool, how TaskEnd, reason string, pos int64) {
	if stopping {
		s.stop(t, how, reason, pos)
	} else {
		s.die(t, how, reason, pos)
	}
}

func (s *State) taskLost(pos int64, p *events.TaskLost) bool {
	t := s.liveTask(p.User, p.Job, p.Index, p.Machine)
	if t == nil {
		return false
	}
	s.die(t, Lost, p.Reason, pos)
	return true
}

func (s *State) taskStopped(pos int64, p *events.TaskStopped) bool {
	m := s.Machines[p.Machine]
	if m == nil {
		return false
	}
	return s.release(m, TaskRun{TaskKey{p.User, p.Job, p.Index}, p.Submission}, pos)
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
	if events.CountsAsRestart(p, t.State == TaskDead && (t.End == Failed || t.End == Finished)) {
		t.Restarts++
	}
	t.Seq = pos
	// A replacement that fails before it runs still counts against the
	// job's disruption budget; so does the replacement of a task a drain
	// evicted, until it settles.
	t.Replacing = p.Reason == "updated" ||
		(p.Reason == "rescheduled" && (t.Replacing || (t.State == TaskDead && t.End == Evicted && t.Reason == DrainReason)))
	t.SpecVersion, t.Limit = v, TaskLimit(spec, p.Index)
	s.notePending(t)
	t.Reservation, t.ReservationUS = t.Limit, s.TimeUS
	t.Machine, t.Ports, t.AllocIndex, t.End, t.Reason, t.Pid = "", nil, -1, NoEnd, p.Reason, 0
	t.Health, t.HealthMessage, t.HealthyUS = HealthUnknown, "", 0
	t.NotBeforeUS, t.FailStreak, t.RunsSeen = p.NotBeforeUs, p.FailStreak, 0
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
	t.Pid, t.StartedUS = p.Pid, s.TimeUS
	if t.RunStartUS == 0 {
		t.RunStartUS = s.TimeUS // the run's first start: restarts in place keep the run
	}
	t.RunsSeen = max(t.RunsSeen, p.Restarts+1)
	t.Health, t.HealthMessage, t.HealthyUS = HealthUnknown, "", 0
	return true
}

func (s *State) taskFailed(pos int64, p *events.TaskFailed) bool {
	t := s.liveTask(p.User, p.Job, p.Index, p.Machine)
	if t == nil {
		return false
	}
	t.ExitCode, t.Signal, t.FailMessage = p.ExitCode, p.Signal, p.Message
	t.RunsSeen = max(t.RunsSeen, p.Restarts+1)
	if events.CountsAsRestart(p, false) {
		// The agent restarts it in place: it keeps its resources.
		t.Restarts++
		t.Reason, t.Pid = p.Message, 0
		t.Health, t.HealthMessage, t.HealthyUS = HealthUnknown, "", 0
		s.setState(t, TaskScheduled)
		return true
	}
	s.die(t, Failed, p.Message, pos)
	return true
}

// pendingReasons records why tasks wait; a task no longer pending is a
// writer's mistake (the command filters on the same state).
func (s *State) pendingReasons(p *events.PendingReasonsChanged) bool {
	ok := true
	for _, r := range p.Reasons {
		for _, i := range r.Indexes {
			t := s.task(r.User, r.Job, i)
			if t == nil || t.State != TaskPending {
				ok = false
				continue
			}
			t.WaitReason, t.WaitHint = r.Reason, r.Hint
		}
	}
	return ok
}

func (s *State) taskHealthChanged(p *events.TaskHealthChanged) bool {
	t := s.liveTask(p.User, p.Job, p.Index, p.Machine)
	if t == nil || t.State != TaskRunning {
		return false
	}
	if p.Healthy {
		t.Health, t.HealthMessage, t.HealthyUS = HealthHealthy, "", s.TimeUS
	} else {
		t.Health, t.HealthMessage, t.HealthyUS = HealthUnhealthy, p.Message, 0
	}
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
			t.Reservation, t.ReservationUS = limit, s.TimeUS
		}
		// The priority may have changed, and with it what may preempt it.
		m.Version = pos
	} else {
		t.Reservation, t.ReservationUS = limit, s.TimeUS
	}
	t.SpecVersion, t.Limit = p.SpecVersion, limit
	s.notePending(t)
	return true
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
		t.Reservation, t.ReservationUS = res, s.TimeUS
		m.Version = pos
	}
	return true
}
