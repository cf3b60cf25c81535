package agentlink

import (
	"fmt"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// The link's reading of the agent protocol, pure, for the link and the
// simulation alike: what an agent event says of its task (the command
// handler, ReportAgentState, decides what the log records of it), under
// which idempotency key, and which events the log already holds.

// AgentEventTask is an agent event as the task's state at that moment;
// false for events that need no record (an adoption; a clean exit
// restarted in place, whose restart the next STARTED shows).
func AgentEventTask(ev *agentpb.AgentEvent) (commands.AgentTask, bool) {
	at := commands.AgentTask{Task: TaskKeyOf(ev.Task), SpecVersion: ev.SpecVersion, Submission: ev.Submission, Pid: ev.Pid, ExitCode: ev.ExitCode,
		Signal: ev.Signal, Restarts: ev.Restarts, Reason: ev.Reason, Message: ev.Message}
	switch ev.Kind {
	case agentpb.EventKind_EVENT_KIND_STARTED:
		at.State = commands.AgentRunning
	case agentpb.EventKind_EVENT_KIND_FAILED:
		at.State = commands.AgentFailed
		if ev.WillRestart {
			at.State = commands.AgentBackoff
		}
		at.Message = FailureMessage(ev.Reason, ev.Message)
	case agentpb.EventKind_EVENT_KIND_FINISHED:
		if ev.WillRestart {
			return at, false
		}
		at.State = commands.AgentFinished
	case agentpb.EventKind_EVENT_KIND_EVICTED:
		at.State = commands.AgentEvicted
	case agentpb.EventKind_EVENT_KIND_KILLED:
		at.State = commands.AgentKilled
	default:
		return at, false
	}
	return at, true
}

// FailureMessage is how the log words an agent's failure: one other than
// a plain exit says why first (start-failed: ..., lost: ...); a health
// kill's message says it already.
func FailureMessage(reason, msg string) string {
	if reason != "" && reason != agent.ReasonExited && reason != agent.ReasonHealth {
		return reason + ": " + msg
	}
	return msg
}

// AgentEventKey is the idempotency key of an agent event's record: the
// agent's sequence numbers restart with a restarted agent's saved state,
// its times do not.
func AgentEventKey(machine string, ev *agentpb.AgentEvent) string {
	return fmt.Sprintf("link/%s/%d/%d", machine, ev.Seq, ev.TimeUs)
}

// RecordedStarts finds, for each task with events, the start the projection
// already has (the task runs on machine with that pid): that event and
// every earlier one of the task are in the log, whatever was acknowledged.
// A new leader's first poll gets back what the last leader recorded but did
// not acknowledge; this spares the store most of those duplicates.
func RecordedStarts(s *projections.State, machine string, evs []*agentpb.AgentEvent) map[projections.TaskKey]uint64 {
	out := map[projections.TaskKey]uint64{}
	for _, ev := range evs {
		if ev.Kind != agentpb.EventKind_EVENT_KIND_STARTED {
			continue
		}
		k := TaskKeyOf(ev.Task)
		if t := s.Task(k.User, k.Job, k.Index); t != nil && t.State == projections.TaskRunning && t.Machine == machine && t.Pid == ev.Pid {
			out[k] = ev.Seq
		}
	}
	return out
}

// TaskKeyOf is a task reference of the protocol as the projection's key.
func TaskKeyOf(r *events.TaskRef) projections.TaskKey {
	return projections.TaskKey{User: r.GetUser(), Job: r.GetJob(), Index: r.GetIndex()}
}

// AgentTaskEnded: the agent reports the task ended (agent.Ended).
func AgentTaskEnded(s agentpb.TaskState) bool { return agent.Ended(s) }

// AgentTaskLive: the agent runs the task, or will again after a backoff.
func AgentTaskLive(s agentpb.TaskState) bool {
	switch s {
	case agentpb.TaskState_TASK_STATE_STARTING, agentpb.TaskState_TASK_STATE_RUNNING, agentpb.TaskState_TASK_STATE_BACKOFF:
		return true
	}
	return false
}
