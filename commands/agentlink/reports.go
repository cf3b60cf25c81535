package agentlink

import (
	"slices"
	"time"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/projections"
)

// Meta is who the link's commands come from: an admin whose request ids
// (AgentEventKey) live in its own namespace of idempotency keys.
var Meta = commands.Meta{Actor: commands.Actor{User: "link", Admin: true}}

// EventRecorded says whether the log holds the record of an agent event,
// by its idempotency key's request id (AgentEventKey): the caller asks its
// cache of recent requests.
type EventRecorded func(requestID string) bool

// RefusedStart is a start the agent refused, recorded as a failure.
type RefusedStart struct {
	Task projections.TaskKey
	Err  string
}

// Report is one poll's answer as the commands that record it.
type Report struct {
	// Commands are sent in order; the first that fails ends the record,
	// and the next poll brings the rest again.
	Commands []commands.ReportAgentState
	// Refused are the starts the agent refused (for the operator's log).
	Refused []RefusedStart
	// Fallback: the agent dropped events since the last poll, so ended
	// tasks are recorded from its full state.
	Fallback bool
}

// Reports turns one poll's answer st (to the requests reqs) into the
// ReportAgentState commands that record it, in this order:
//
//  1. Starts the agent refused (a spec it cannot run): each a failure of
//     the task, so the restart policy decides, rather than a task left
//     scheduled for ever.
//  2. Each event the agent reports, alone, as the task's state at that
//     moment: a task that failed and restarted three times between two
//     polls has three failures in the log, not one, and its restarts count
//     against max_restarts. (A task's last event when it is a start or a
//     failure restarting in place is left to the full state, which says
//     the same.) Each carries the idempotency key AgentEventKey: a new
//     leader does not know what the last one recorded but did not
//     acknowledge. Events up to the log's watermark of this machine's
//     events (acknowledged, or the newest whose key the log holds: a
//     record stops at its first failure, so every event before one whose
//     key is in the log was recorded) and up to a start the projection
//     has (RecordedStarts) are skipped; the store drops the rest of what
//     would be recorded twice.
//  3. The full state (Borg §3.3: full state, so a lost reply costs
//     nothing), with the usage windows. Ended tasks are in it only when
//     the agent dropped events: otherwise their events said it all, and
//     the status of a task that ended before being placed here again would
//     end the new placement.
//
// acked and dropped are what the link last had in the log of the agent's
// events: its sequence number and its count of dropped events.
func Reports(s *projections.State, machine string, st *agentpb.AgentState, reqs []*agentpb.Request, acked, dropped uint64, recorded EventRecorded, usage *commands.UsageWindow) Report {
	var out Report
	n := neutralTasks(st)
	out.Refused, out.Commands = refusedStarts(machine, st, reqs, n)
	out.Commands = append(out.Commands, eventReports(s, machine, st, acked, recorded, n)...)
	out.Fallback = st.EventsDropped > dropped
	out.Commands = append(out.Commands, fullReport(machine, st, usage, n, out.Fallback))
	return out
}

// neutral is every task the agent has, as news of nothing (a task in a
// report is not lost, and "starting" records nothing); each event
// overrides one.
type neutral struct {
	tasks []commands.AgentTask
	index map[projections.TaskKey]int
}

func neutralTasks(st *agentpb.AgentState) neutral {
	n := neutral{tasks: make([]commands.AgentTask, len(st.Tasks)), index: make(map[projections.TaskKey]int, len(st.Tasks))}
	for i, ts := range st.Tasks {
		k := TaskKeyOf(ts.Task)
		n.tasks[i] = commands.AgentTask{Task: k, SpecVersion: ts.SpecVersion, Submission: ts.Submission, State: commands.AgentStarting,
			Ended: AgentTaskEnded(ts.State)}
		n.index[k] = i
	}
	return n
}

// with is the neutral tasks with at in its task's place.
func (n neutral) with(at commands.AgentTask) []commands.AgentTask {
	tasks := slices.Clone(n.tasks)
	if i, ok := n.index[at.Task]; ok {
		tasks[i] = at
	} else {
		tasks = append(tasks, at)
	}
	return tasks
}

// refusedStarts are the starts among reqs the agent refused, each reported
// as the task's failure.
func refusedStarts(machine string, st *agentpb.AgentState, reqs []*agentpb.Request, n neutral) ([]RefusedStart, []commands.ReportAgentState) {
	var refused []RefusedStart
	var cmds []commands.ReportAgentState
	starts := map[string]*agentpb.StartTask{}
	for _, r := range reqs {
		if s := r.GetStart(); s != nil {
			starts[r.Id] = s
		}
	}
	for _, res := range st.Results {
		s := starts[res.Id]
		if res.Error == "" || s == nil {
			continue
		}
		k := TaskKeyOf(s.Task)
		refused = append(refused, RefusedStart{k, res.Error})
		at := commands.AgentTask{Task: k, SpecVersion: s.SpecVersion, State: commands.AgentFailed, ExitCode: -1,
			Reason: agent.ReasonStartFailed, Message: "the agent refused to start it: " + res.Error}
		cmds = append(cmds, commands.ReportAgentState{Meta: Meta, Machine: machine, Tasks: n.with(at)})
	}
	return refused, cmds
}

// eventReports are one report per agent event not yet recorded, keyed by
// the event so that a report sent twice records once.
func eventReports(s *projections.State, machine string, st *agentpb.AgentState, acked uint64, recorded EventRecorded, n neutral) []commands.ReportAgentState {
	var cmds []commands.ReportAgentState
	startedAt := RecordedStarts(s, machine, st.Events)
	lastOf := make(map[projections.TaskKey]uint64, len(st.Events))
	done := acked
	for _, ev := range st.Events {
		lastOf[TaskKeyOf(ev.Task)] = ev.Seq
		if recorded(AgentEventKey(machine, ev)) {
			done = max(done, ev.Seq)
		}
	}
	for _, ev := range st.Events {
		if ev.Seq <= done || ev.Seq <= startedAt[TaskKeyOf(ev.Task)] {
			continue
		}
		at, ok := AgentEventTask(ev)
		if !ok {
			continue
		}
		if ev.Seq == lastOf[at.Task] && (at.State == commands.AgentRunning || at.State == commands.AgentBackoff) {
			// The task's state now says the same, and the full state below
			// records it as well, idempotently: a burst of starts costs one
			// write, not one each.
			continue
		}
		meta := Meta
		meta.RequestID = AgentEventKey(machine, ev)
		cmds = append(cmds, commands.ReportAgentState{Meta: meta, Machine: machine, Tasks: n.with(at)})
	}
	return cmds
}

// fullReport is the agent's full state; an ended task counts as news of
// nothing unless events were dropped (fallback), when its state is all
// there is.
func fullReport(machine string, st *agentpb.AgentState, usage *commands.UsageWindow, n neutral, fallback bool) commands.ReportAgentState {
	full := commands.ReportAgentState{Meta: Meta, Machine: machine, Tasks: make([]commands.AgentTask, 0, len(st.Tasks)), Usage: usage}
	for _, ts := range st.Tasks {
		if AgentTaskEnded(ts.State) && !fallback {
			full.Tasks = append(full.Tasks, n.tasks[n.index[TaskKeyOf(ts.Task)]])
			continue
		}
		msg := ts.Message
		if ts.State == agentpb.TaskState_TASK_STATE_BACKOFF || ts.State == agentpb.TaskState_TASK_STATE_FAILED {
			msg = FailureMessage(ts.Reason, msg) // as its event would have it
		}
		full.Tasks = append(full.Tasks, commands.AgentTask{Task: TaskKeyOf(ts.Task), SpecVersion: ts.SpecVersion, Submission: ts.Submission,
			State: commands.AgentTaskState(ts.State), Pid: ts.Pid, ExitCode: ts.ExitCode, Signal: ts.Signal,
			Restarts: ts.Restarts, Reason: ts.Reason, Message: msg,
			Health: HealthOf(ts.Health), HealthMessage: ts.HealthMessage})
	}
	return full
}

// HealthOf is the projection's health for the agent's: unknown without a
// check or before its first answer.
func HealthOf(h agentpb.Health) projections.Health {
	switch h {
	case agentpb.Health_HEALTH_HEALTHY:
		return projections.HealthHealthy
	case agentpb.Health_HEALTH_UNHEALTHY:
		return projections.HealthUnhealthy
	}
	return projections.HealthUnknown
}

// News says whether a report, decided against s now, would append
// anything (or be refused): one that changes nothing is not sent, so a
// steady machine costs no write.
func News(s *projections.State, cmd commands.ReportAgentState, now time.Time) bool {
	evs, err := commands.Decide(s, cmd, commands.FixedClock(now))
	return err != nil || len(evs) > 0
}
