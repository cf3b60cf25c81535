package commands

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// ReportAgentState turns one poll of a machine's agent into events: the
// difference between the agent's full report and the projection (Borg
// §3.3: full state, not deltas, so a lost reply costs nothing). Tasks that
// started, restarted in place, finished, failed or were OOM-killed get their
// events; a task the projection has running but the agent no longer
// reports is lost. A usage window becomes UsageReported (usageReported), and a reservation
// that the estimate moves by more than a tenth of the limit becomes
// ReservationEstimated. A machine the link could not reach for several
// polls (Unreachable) goes down and its tasks are lost; one that answers
// again comes back up.
type ReportAgentState struct {
	Meta
	Machine     string
	Unreachable bool
	MissedPolls int32
	Tasks       []AgentTask
	// Usage, when set, closes the machine's usage window now
	// (usageReported).
	Usage *UsageWindow
}

// AgentTaskState mirrors the agent's task states.
type AgentTaskState int8

const (
	AgentStarting AgentTaskState = iota + 1 // being launched
	AgentRunning
	AgentBackoff  // exited; the agent restarts it in place
	AgentStopping // stopping on the master's request
	AgentFinished // exited 0, not restarted
	AgentFailed   // failed, not restarted (any more)
	AgentKilled   // stopped by a request
	AgentEvicted  // killed by the agent: "oom" or "overcommitted"
)

// AgentTask is one task as the agent reports it.
type AgentTask struct {
	Task        projections.TaskKey
	SpecVersion int64
	// Submission is the run's: the log position of the TaskSubmitted its
	// start served (0: the agent did not say).
	Submission int64
	State      AgentTaskState
	Pid        int64
	ExitCode   int32 // of the last exit
	Signal     string
	Restarts   int32 // in place, by the restart policy
	Reason     string
	Message    string
	// Health is what the task's check last said (HealthUnknown: no check,
	// or none ran yet); HealthMessage the failing check's error.
	Health        projections.Health
	HealthMessage string
	// Ended: the agent's run has ended (it keeps the record until the
	// master says forget), whatever State says of what is news.
	Ended bool
}

// gone: the run the entry reports has ended.
func (at AgentTask) gone() bool { return at.Ended || at.State >= AgentFinished }

// OtherSubmission says whether an agent's run that serves submission (0:
// the agent did not say) is of another submission of t than t's own: a
// run of the task before it was submitted again (its Seq).
func OtherSubmission(t *projections.Task, submission int64) bool {
	return submission != 0 && submission != t.Seq
}

// Reservation estimation is Borg's (§5.5), scheduler.EstimateReservation:
// the limit for the first 300 s of a run, then a decay toward usage plus a
// margin, at once back up when usage rises. Only moves larger than a tenth
// of the limit are logged, so a cell of 10,000 machines costs tens of
// events per second; the decay runs from when the reservation was last set
// (Task.ReservationUS), so the moves not logged are not lost.
const reservationThreshold = 10 // percent of the limit

var reservationConfig = scheduler.DefaultReservationConfig()

func (c ReportAgentState) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "reporting an agent's state"); err != nil {
		return nil, err
	}
	m := s.Machines[c.Machine]
	if m == nil {
		return nil, refuse(NotFound, "machine", "machine %q is not registered; the agent must register first", c.Machine)
	}
	b := newDraft(s, now)
	if c.Unreachable {
		if m.State == projections.MachineDown {
			return nil, nil
		}
		b.add(events.MachineStream(m.Name), &events.MachineDown{Machine: m.Name, MissedPolls: c.MissedPolls,
			Reason: fmt.Sprintf("no answer to %d polls", c.MissedPolls)})
		b.clearMachine(m, false, "machine down")
		b.finishJobs()
		return b.evs, nil
	}
	if m.State == projections.MachineDown {
		b.add(events.MachineStream(m.Name), &events.MachineUp{Machine: m.Name})
	}
	tasks := slices.Clone(c.Tasks)
	slices.SortStableFunc(tasks, func(a, b AgentTask) int { return compareKeys(a.Task, b.Task) })
	reported := b.reportTasks(m, tasks)
	b.stopRuns(m, tasks)
	b.loseUnreported(m, reported)
	if c.Usage != nil {
		b.estimateReservations(m, c.Usage)
	}
	b.finishJobs()
	return b.evs, nil
}

// reportTasks records what the agent on m says of the tasks placed there,
// sorted by key, and returns the keys it reported.
func (b *draft) reportTasks(m *projections.Machine, tasks []AgentTask) map[projections.TaskKey]bool {
	reported := make(map[projections.TaskKey]bool, len(tasks))
	for _, at := range tasks {
		if reported[at.Task] {
			continue // reported twice: the first entry counts
		}
		reported[at.Task] = true
		t := b.s.Task(at.Task.User, at.Task.Job, at.Task.Index)
		if t == nil || !t.Live() || t.Machine != m.Name || b.changed(t) {
			// Not ours to record (the link stops it: agentlink.Requests),
			// or a revert earlier in this report replaced it already.
			continue
		}
		if t.State == projections.TaskScheduled && (at.SpecVersion != 0 && at.SpecVersion != t.SpecVersion ||
			OtherSubmission(t, at.Submission)) {
			// A process of another spec version or submission than this
			// placement's: the run it replaces on the same machine (or a
			// run of the job's earlier incarnation, killed and submitted
			// again under its name), seen by a poll answered before the
			// agent heard of the new run. Its running is not this run's
			// start, nor its exit this run's failure (a rolling update
			// halted on the stop of the version it replaced).
			continue
		}
		b.reportTask(t, at)
	}
	return reported
}

// stopRuns ends the runs stopping on m that the agent no longer runs. A run
// stopping here holds its resources until the agent no longer runs it: it
// reports the run ended, or another run of the task, or none.
func (b *draft) stopRuns(m *projections.Machine, tasks []AgentTask) {
	runs := m.StoppingRuns()
	if len(runs) == 0 {
		return
	}
	byKey := make(map[projections.TaskKey]AgentTask, len(tasks))
	for _, at := range tasks {
		if _, ok := byKey[at.Task]; !ok {
			byKey[at.Task] = at
		}
	}
	for _, r := range runs {
		if at, ok := byKey[r.TaskKey]; ok && !at.gone() && (at.Submission == 0 || at.Submission == r.Submission) {
			continue
		}
		b.add(events.TaskStream(r.User, r.Job, r.Index), &events.TaskStopped{User: r.User, Job: r.Job, Index: r.Index,
			Machine: m.Name, Submission: r.Submission})
	}
}

// loseUnreported records as lost the tasks running on m that the agent did
// not report.
func (b *draft) loseUnreported(m *projections.Machine, reported map[projections.TaskKey]bool) {
	// Most polls report every running task: find out before sorting the
	// machine's tasks (the losses go to the log in task order).
	missing := false
	m.RangeTasks(func(t *projections.Task) bool {
		missing = t.State == projections.TaskRunning && !reported[t.Key()] && !b.changed(t)
		return !missing
	})
	if !missing {
		return
	}
	for _, t := range m.Tasks() {
		if t.State == projections.TaskRunning && !reported[t.Key()] && !b.changed(t) {
			b.lose(t, "the agent no longer reports it")
		}
	}
}

// estimateReservations records the usage window the agent on m reported,
// and the reservations of its tasks that the window moves significantly.
func (b *draft) estimateReservations(m *projections.Machine, usage *UsageWindow) {
	ev, fresh := usageReported(m, usage, b.now.UnixMicro())
	if ev == nil {
		return
	}
	b.add(events.MachineStream(m.Name), ev)
	latest := map[*projections.Task]*events.TaskUsage{}
	windows := map[*projections.Task]float64{}
	for _, u := range ev.Tasks {
		if !fresh[u] {
			continue // no figures to estimate from
		}
		if t := b.s.Task(u.User, u.Job, u.Index); t != nil && t.Live() && t.Machine == m.Name && !b.dead(t) {
			latest[t] = u
			windows[t] = float64(u.EndUs-u.StartUs) / 1e6
		}
	}
	if len(latest) == 0 {
		return
	}
	var moved []*events.TaskReservation
	for _, t := range m.Tasks() {
		u := latest[t]
		if u == nil {
			continue
		}
		next := estimate(t, u, windows[t], b.now)
		if significant(t.Limit, t.Reservation, next) {
			moved = append(moved, &events.TaskReservation{User: t.Job.User, Job: t.Job.Name, Index: t.Index, Reservation: next.Proto()})
		}
	}
	if len(moved) > 0 {
		b.add(events.MachineStream(m.Name), &events.ReservationEstimated{Machine: m.Name, Tasks: moved})
	}
}

func (b *draft) reportTask(t *projections.Task, at AgentTask) {
	j := t.Job
	switch at.State {
	case AgentRunning:
		health := t.Health
		switch {
		case t.State == projections.TaskScheduled:
			b.add(taskStream(t), &events.TaskStarted{User: j.User, Job: j.Name, Index: t.Index, Machine: t.Machine, Restarts: at.Restarts, Pid: at.Pid})
			b.status[t] = projections.TaskRunning
			health = projections.HealthUnknown
		case t.Pid != 0 && at.Pid != 0 && at.Pid != t.Pid:
			// It exited and was restarted in place between two polls.
			b.fail(t, &events.TaskFailed{User: j.User, Job: j.Name, Index: t.Index, Machine: t.Machine, ExitCode: at.ExitCode,
				Signal: at.Signal, Message: at.Message, Restarts: at.Restarts, WillRestart: true})
			b.add(taskStream(t), &events.TaskStarted{User: j.User, Job: j.Name, Index: t.Index, Machine: t.Machine, Restarts: at.Restarts, Pid: at.Pid})
			b.status[t] = projections.TaskRunning
			health = projections.HealthUnknown
		}
		// Health is recorded at its transitions only: a check every few
		// seconds costs an event when the answer changes, not one each.
		if at.Health != projections.HealthUnknown && at.Health != health {
			b.add(taskStream(t), &events.TaskHealthChanged{User: j.User, Job: j.Name, Index: t.Index, Machine: t.Machine,
				Healthy: at.Health == projections.HealthHealthy, Message: at.HealthMessage})
		}
	case AgentBackoff:
		// A failure of a running task, or of a run that never started (a
		// start the agent retries in place: no such file, permission
		// denied, a sandbox it could not make) that the log lacks: each
		// counts against the restart policy like any other.
		if t.State == projections.TaskRunning || t.State == projections.TaskScheduled && at.Restarts >= t.RunsSeen {
			b.fail(t, &events.TaskFailed{User: j.User, Job: j.Name, Index: t.Index, Machine: t.Machine, ExitCode: at.ExitCode,
				Signal: at.Signal, Message: at.Message, Restarts: at.Restarts, WillRestart: true})
		}
	case AgentFinished:
		b.finish(t, at.ExitCode)
	case AgentFailed:
		b.fail(t, &events.TaskFailed{User: j.User, Job: j.Name, Index: t.Index, Machine: t.Machine, ExitCode: at.ExitCode,
			Signal: at.Signal, Message: at.Message, Restarts: at.Restarts})
	case AgentEvicted:
		reason := at.Reason
		if reason == "" {
			reason = reasonOOM
		}
		if reason == reasonOOM {
			// Over its own memory limit: a failure of the task, which
			// counts against its restart policy and backs off, not an
			// eviction it could not help.
			msg := "OOMKilled: over its memory limit"
			if at.Message != "" {
				msg = "OOMKilled: " + at.Message
			}
			sig := at.Signal
			if sig == "" {
				sig = "SIGKILL"
			}
			b.fail(t, &events.TaskFailed{User: j.User, Job: j.Name, Index: t.Index, Machine: t.Machine, ExitCode: at.ExitCode,
				Signal: sig, Message: msg, Restarts: at.Restarts})
			return
		}
		b.evict(t, reason, at.Message, nil, false) // the agent ended it
	case AgentKilled:
		if t.State == projections.TaskScheduled {
			// Not yet started: the stop the link asked for was of the run
			// this placement follows on the same machine (a job killed
			// and submitted again under its name), reported before the
			// agent heard of the new one. Nothing here was lost.
			return
		}
		// The projection still has it: nothing here asked for that.
		b.lose(t, strings.TrimSuffix("the agent reports it killed: "+at.Message, ": "))
	}
}

func compareKeys(a, b projections.TaskKey) int {
	return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Job, b.Job), cmp.Compare(a.Index, b.Index))
}

// estimate is t's reservation after a window of seconds with usage u, at
// now: Borg's estimate over CPU (the window's average), memory (its peak)
// and disk; what is not measured stays at the limit.
func estimate(t *projections.Task, u *events.TaskUsage, seconds float64, now time.Time) projections.Resources {
	limit := scheduler.ResourcesFromEvents(t.Limit.Proto())
	usage := limit
	usage[scheduler.CPU] = 0
	if seconds > 0 {
		usage[scheduler.CPU] = max(0, int64(u.CpuCoreSeconds/seconds*1000))
	}
	usage[scheduler.Memory] = max(0, u.MemoryMaxBytes, u.MemoryBytes)
	usage[scheduler.Disk] = max(0, u.DiskBytes)
	next := scheduler.EstimateReservation(scheduler.ReservationSample{
		Limit: limit, Previous: scheduler.ResourcesFromEvents(t.Reservation.Proto()), PreviousAt: time.UnixMicro(t.ReservationUS),
		Usage: usage, Started: time.UnixMicro(t.StartedUS), Now: now,
	}, reservationConfig)
	return projections.ResourcesOf(next.Events())
}

func significant(limit, cur, next projections.Resources) bool {
	moved := func(l, a, b int64) bool {
		d := a - b
		return d*100 > l*reservationThreshold || -d*100 > l*reservationThreshold
	}
	return moved(limit.CPUMilli, cur.CPUMilli, next.CPUMilli) || moved(limit.MemoryBytes, cur.MemoryBytes, next.MemoryBytes) ||
		moved(limit.DiskBytes, cur.DiskBytes, next.DiskBytes)
}

// reasonOOM is the agent's eviction reason for a task over its own memory
// limit (agent.ReasonOOM).
const reasonOOM = "oom"
