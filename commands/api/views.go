package api

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// TaskView renders a task for the API.
func TaskView(s *projections.State, t *projections.Task) *apipb.TaskView {
	v := &apipb.TaskView{
		User: t.Job.User, Job: t.Job.Name, Index: t.Index,
		State: t.State.String(), Reason: t.Reason, Machine: t.Machine,
		Ports: t.Ports, Restarts: t.Restarts, ExitCode: t.ExitCode,
		SpecVersion: t.SpecVersion, SinceUs: t.SinceUS,
		Limit: t.Limit.Proto(), Reservation: t.Reservation.Proto(),
		MemoryBytesUsed: t.Usage.MemoryBytes,
		Priority:        t.Priority(),
	}
	v.NotBeforeUs, v.Signal = t.NotBeforeUS, t.Signal
	nowUS := time.Now().UnixMicro()
	v.Health, v.HealthMessage, v.Status, v.CrashLooping = t.Health.String(), t.HealthMessage, t.Status(nowUS), t.CrashLooping(nowUS)
	switch {
	case t.State == projections.TaskDead:
		v.How = t.End.String()
		if t.StoppingOn != "" {
			// Dead to the job, but its process has its kill_timeout to
			// exit and its machine holds its resources until it does.
			v.State = "stopping"
		}
		if t.End == projections.Failed {
			v.Reason = t.LastFailure()
		}
	case t.State == projections.TaskPending && t.NotBeforeUS > time.Now().UnixMicro():
		v.Reason = fmt.Sprintf("backoff until %s after %s (failure %d in a row)",
			time.UnixMicro(t.NotBeforeUS).UTC().Format(time.RFC3339), t.LastFailure(), t.FailStreak)
	}
	if w := t.Usage.WindowEndUS - t.Usage.WindowStartUS; w > 0 {
		v.CpuCoresUsed = t.Usage.CPUCoreSeconds / (float64(w) / 1e6)
	}
	if t.Live() && len(t.Ports) > 0 {
		if m := s.Machines[t.Machine]; m != nil {
			host := m.Address
			if h, _, err := net.SplitHostPort(m.Address); err == nil {
				host = h
			}
			v.Address = net.JoinHostPort(host, strconv.Itoa(int(t.Ports[0])))
		}
	}
	return v
}

// JobView renders a job, with tasks[offset:offset+limit] when limit > 0.
func JobView(s *projections.State, j *projections.Job, offset, limit int) *apipb.JobView {
	v := &apipb.JobView{
		Spec: j.Spec(), SpecVersion: j.Current, State: j.State().String(),
		SubmittedUs: j.SubmittedUS, EndedUs: j.EndedUS, EndReason: j.EndReason,
		Deferred: j.Deferred, Position: s.Position,
	}
	if u := j.Update; u != nil {
		v.UpdateInProgress, v.UpdateFrom, v.UpdateTo, v.UpdateHalted, v.UpdatePromoted = true, u.From, u.To, u.Halted, u.Promoted
	}
	v.LastUpdateVersion, v.LastUpdateHow, v.LastUpdateReason = j.LastUpdate.Version, j.LastUpdate.How, j.LastUpdate.Reason
	phase, r := j.UpdatePhase(time.Now().UnixMicro())
	v.UpdatePhase = string(phase)
	v.Rollout = &apipb.RolloutView{Live: int32(r.Live), OnVersion: int32(r.OnVersion), Settled: int32(r.Settled),
		Disrupted: int32(r.Disrupted), CanariesSettled: r.CanariesSettled}
	for _, t := range j.Tasks {
		if t == nil {
			continue
		}
		v.TotalTasks++
		switch t.State {
		case projections.TaskPending:
			v.Pending++
		case projections.TaskScheduled:
			v.Scheduled++
		case projections.TaskRunning:
			v.Running++
		case projections.TaskDead:
			v.Dead++
		}
	}
	if limit > 0 {
		i := 0
		for _, t := range j.Tasks {
			if t == nil {
				continue
			}
			if i >= offset && i < offset+limit {
				v.Tasks = append(v.Tasks, TaskView(s, t))
			}
			i++
		}
	}
	return v
}

// MachineView renders a machine.
func MachineView(m *projections.Machine) *apipb.MachineView {
	v := &apipb.MachineView{
		Name: m.Name, Address: m.Address, State: m.State.String(), Draining: m.Draining,
		Reason: m.Reason, Capacity: m.Capacity.Proto(), Limits: m.Limits.Proto(),
		Reserved: m.Reserved.Proto(), Attributes: m.Attributes, Tasks: int32(m.TaskCount()),
		Version: m.Version,
	}
	m.RangeTasks(func(t *projections.Task) bool {
		if w := t.Usage.WindowEndUS - t.Usage.WindowStartUS; w > 0 {
			v.CpuCoresUsed += t.Usage.CPUCoreSeconds / (float64(w) / 1e6)
		}
		v.MemoryBytesUsed += t.Usage.MemoryBytes
		return true
	})
	return v
}

// DrainHoldLines says, one line per job, what keeps tasks on a draining
// machine at now: the jobs whose disruption budgets hold them
// (commands.DrainHolds); nil when nothing does.
func DrainHoldLines(s *projections.State, m *projections.Machine, now time.Time) []string {
	var out []string
	for _, h := range commands.DrainHolds(s, m, now) {
		out = append(out, h.String())
	}
	return out
}

// CellView renders a whole state (for StateAt), jobs limited to user if set.
func CellView(s *projections.State, user string) *apipb.CellView {
	v := &apipb.CellView{Position: s.Position, TimeUs: s.TimeUS}
	for _, m := range s.SortedMachines() {
		v.Machines = append(v.Machines, MachineView(m))
	}
	for _, j := range s.SortedJobs() {
		if user != "" && j.User != user {
			continue
		}
		jv := JobView(s, j, 0, 0)
		v.Jobs = append(v.Jobs, jv)
		v.TasksPending += jv.Pending
		v.TasksRunning += jv.Running + jv.Scheduled
		v.TasksDead += jv.Dead
	}
	return v
}

var jsonOpts = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false}

// EventView renders an event, its payload as JSON.
func EventView(e events.Event) *apipb.EventView {
	payload, err := jsonOpts.Marshal(e.Data)
	if err != nil {
		payload = []byte(fmt.Sprintf("{\"error\": %q}", err.Error()))
	}
	return &apipb.EventView{
		Position: e.Position, Stream: e.Stream, StreamVersion: e.StreamVersion, Type: e.Type,
		OccurredAtUs: e.OccurredAt.UnixMicro(), RecordedAtUs: e.RecordedAt.UnixMicro(),
		Actor: e.Actor, CausationId: e.CausationID, CorrelationId: e.CorrelationID,
		PayloadJson: string(payload), TraceCode: int32(events.TraceCodeOf(e.Data)),
		Summary: Summary(e),
	}
}

// Summary says in one line what an event means.
func Summary(e events.Event) string {
	for _, summary := range []func(events.Event) (string, bool){jobSummary, taskSummary, cellSummary} {
		if s, ok := summary(e); ok {
			return s
		}
	}
	return e.Type
}

// jobSummary summarizes the events of jobs.
func jobSummary(e events.Event) (string, bool) {
	switch p := e.Data.(type) {
	case *events.JobSubmitted:
		return fmt.Sprintf("job %s/%s submitted: %d tasks at priority %d", p.Spec.GetUser(), p.Spec.GetName(), p.Spec.GetTaskCount(), p.Spec.GetPriority()), true
	case *events.JobUpdated:
		return fmt.Sprintf("job %s/%s updated to version %d (restart needed: %v)", p.Spec.GetUser(), p.Spec.GetName(), p.SpecVersion, p.RestartNeeded), true
	case *events.JobUpdateCommitted:
		return strings.TrimSuffix(fmt.Sprintf("job %s/%s: the update to version %d committed: %s", p.User, p.Job, p.SpecVersion, p.Reason), ": "), true
	case *events.JobUpdateRolledBack:
		return strings.TrimSuffix(fmt.Sprintf("job %s/%s: the update to version %d rolled back to version %d's spec as version %d: %s", p.User, p.Job, p.FromVersion, p.ToVersion, p.SpecVersion, p.Reason), ": "), true
	case *events.JobUpdateHalted:
		return fmt.Sprintf("job %s/%s: the update to version %d halted: %s", p.User, p.Job, p.SpecVersion, p.Reason), true
	case *events.JobUpdatePromoted:
		return fmt.Sprintf("job %s/%s: the canaries of version %d promoted", p.User, p.Job, p.SpecVersion), true
	case *events.PendingReasonsChanged:
		parts := make([]string, 0, min(len(p.Reasons), 4))
		for i, r := range p.Reasons {
			if i == 3 {
				parts = append(parts, fmt.Sprintf("and %d more", len(p.Reasons)-3))
				break
			}
			parts = append(parts, fmt.Sprintf("%s/%s tasks %v wait: %s", r.User, r.Job, r.Indexes, r.Reason))
		}
		return strings.Join(parts, "; "), true
	case *events.JobKilled:
		return fmt.Sprintf("job %s/%s killed: %s", p.User, p.Job, p.Reason), true
	case *events.JobFinished:
		return fmt.Sprintf("job %s/%s finished", p.User, p.Job), true
	}
	return "", false
}

// taskSummary summarizes the events of tasks.
func taskSummary(e events.Event) (string, bool) {
	switch p := e.Data.(type) {
	case *events.TaskHealthChanged:
		if p.Healthy {
			return fmt.Sprintf("task %s healthy on %s", taskName(p.User, p.Job, p.Index), p.Machine), true
		}
		return fmt.Sprintf("task %s unhealthy on %s: %s", taskName(p.User, p.Job, p.Index), p.Machine, p.Message), true
	case *events.TaskSubmitted:
		return fmt.Sprintf("task %s pending (%s)", taskName(p.User, p.Job, p.Index), p.Reason), true
	case *events.TaskScheduled:
		s := fmt.Sprintf("task %s scheduled on %s (score %.3f, %d machines examined)", taskName(p.User, p.Job, p.Index), p.Machine, p.Score, p.MachinesExamined)
		if len(p.Preempted) > 0 {
			var names []string
			for _, r := range p.Preempted {
				names = append(names, taskName(r.User, r.Job, r.Index))
			}
			s += ", preempting " + strings.Join(names, " ")
		}
		return s, true
	case *events.TaskStarted:
		return fmt.Sprintf("task %s running on %s (pid %d, restarts %d)", taskName(p.User, p.Job, p.Index), p.Machine, p.Pid, p.Restarts), true
	case *events.TaskEvicted:
		s := fmt.Sprintf("task %s evicted from %s: %s", taskName(p.User, p.Job, p.Index), p.Machine, p.Reason)
		if p.Preemptor != nil {
			s += " by " + taskName(p.Preemptor.User, p.Preemptor.Job, p.Preemptor.Index)
		}
		return s, true
	case *events.TaskFailed:
		return fmt.Sprintf("task %s failed on %s: exit %d %s %s", taskName(p.User, p.Job, p.Index), p.Machine, p.ExitCode, p.Signal, p.Message), true
	case *events.TaskFinished:
		return fmt.Sprintf("task %s finished on %s", taskName(p.User, p.Job, p.Index), p.Machine), true
	case *events.TaskKilled:
		if p.Stopping {
			return fmt.Sprintf("task %s killed: %s; stopping on %s", taskName(p.User, p.Job, p.Index), p.Reason, p.Machine), true
		}
		return fmt.Sprintf("task %s killed: %s", taskName(p.User, p.Job, p.Index), p.Reason), true
	case *events.TaskStopped:
		return fmt.Sprintf("task %s stopped on %s: its process is gone, its resources free", taskName(p.User, p.Job, p.Index), p.Machine), true
	case *events.TaskLost:
		return fmt.Sprintf("task %s lost with %s: %s", taskName(p.User, p.Job, p.Index), p.Machine, p.Reason), true
	}
	return "", false
}

// cellSummary summarizes the events of machines, leaders, quotas and usage.
func cellSummary(e events.Event) (string, bool) {
	switch p := e.Data.(type) {
	case *events.MachineRegistered:
		return fmt.Sprintf("machine %s registered at %s", p.Machine, p.Address), true
	case *events.MachineDown:
		return fmt.Sprintf("machine %s down: %s", p.Machine, p.Reason), true
	case *events.MachineUp:
		return fmt.Sprintf("machine %s up", p.Machine), true
	case *events.MachineLossHeld:
		if p.EndedUs == 0 {
			return fmt.Sprintf("machine loss held: %d of %d machines missed their polls at once; none is marked down until they answer", p.Missing, p.Machines), true
		}
		return fmt.Sprintf("machine loss no longer held after %s (at worst %d of %d machines missed their polls)",
			time.UnixMicro(p.EndedUs).Sub(time.UnixMicro(p.SinceUs)).Truncate(time.Millisecond), p.Missing, p.Machines), true
	case *events.MachineUpdated:
		return fmt.Sprintf("machine %s updated: at %s", p.Machine, p.Address), true
	case *events.MachineDrainSet:
		if p.Draining {
			return fmt.Sprintf("machine %s draining: %s", p.Machine, p.Reason), true
		}
		return fmt.Sprintf("machine %s no longer draining", p.Machine), true
	case *events.MachineRemoved:
		return fmt.Sprintf("machine %s removed: %s", p.Machine, p.Reason), true
	case *events.LeaderElected:
		return fmt.Sprintf("%s leads at epoch %d", p.Holder, p.Epoch), true
	case *events.QuotaSet:
		return fmt.Sprintf("quota of %s in %s set", p.User, p.Band), true
	case *events.UsageReported:
		return fmt.Sprintf("usage of %d tasks on %s", len(p.Tasks), p.Machine), true
	}
	return "", false
}

func taskName(user, job string, index int32) string { return fmt.Sprintf("%s/%s/%d", user, job, index) }
