package agent

import (
	"fmt"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
	"google.golang.org/protobuf/proto"
)

// KillKind is why the agent is ending a task's process; it decides what
// the exit means.
type KillKind int

const (
	KillNone     KillKind = iota
	KillStop              // by request: the task ends KILLED
	KillUpdate            // for a new spec: started again at once
	KillHealth            // failed its health check: a failure, restarted by policy
	KillOOM               // over its memory limit (seen by sampling): EVICTED "oom"
	KillPressure          // machine memory pressure: EVICTED "overcommitted"
)

// Exit is how a task's process ended, as the agent learned it, and why
// the agent was ending it.
type Exit struct {
	Why KillKind
	// KillReason and KillMessage are what the agent said when it decided
	// the kill: the stop's reason (KillStop), the health check's error, the
	// pressure or memory the kill was for.
	KillReason, KillMessage string
	// PendingUpdate: a new spec waits for this process to end (KillUpdate).
	PendingUpdate bool
	// StartErr is set when no process could be started.
	StartErr error
	// Lost is set when the process ended while no agent watched it (the
	// agent was down): why the agent knows it is gone.
	Lost error
	// Known is false for an adopted process, whose exit status only its
	// parent learns.
	Known  bool
	Code   int32  // -1 when killed by a signal
	Signal string // the signal's name, "" when none
	// OOM: killed at its memory limit, by the kernel (its count, or a
	// SIGKILL with the cgroup at its limit) or by the agent's sampling.
	OOM         bool
	MemoryLimit int64
	RanFor      time.Duration // how long the process ran
}

// Counts are what the lifecycle keeps of a task across its processes.
type Counts struct {
	Restarts    int32 // restarts in place so far (the restart timer counts them)
	Failures    int32
	OOMKills    int32
	Consecutive int32 // failures in a row, for backoff
}

// Next is what an exit comes to.
type Next struct {
	// Relaunch: the exit made way for an update; start the new spec at
	// once. Nothing else in Next applies.
	Relaunch bool
	// State is BACKOFF (restart after RestartIn) or the ended state.
	State       agentpb.TaskState
	Event       agentpb.EventKind
	WillRestart bool
	Reason      string
	Message     string
	RestartIn   time.Duration
	Counts      Counts
}

// AfterExit is the task lifecycle's one rule, for the agent and the
// simulation alike: from an exit and the restart policy p, the task's
// next state, the event that reports it and when it restarts. It is pure.
//
// A stop ends the task KILLED; an update's stop starts the new spec (or,
// with no new spec left, counts as an exit nobody could read);
// memory pressure and OOM kills end it EVICTED (the master decides what
// an eviction means); a refused start, a failed health check, an exit
// status nobody could read, a signal or a non-zero code are failures; a
// zero code finishes it. The policy restarts in place: "always" any exit,
// "on-failure" (the default) failures, "never" nothing, at most
// max_restarts times (0: no cap), after RestartPolicy.Backoff of the
// failures in a row (the rule the master's reschedules follow too); a
// process that ran healthy for a while starts the sequence over.
func AfterExit(p *events.RestartPolicy, c Counts, e Exit) Next {
	n := Next{Counts: c}
	end := func(state agentpb.TaskState, event agentpb.EventKind, reason, msg string) Next {
		n.State, n.Event, n.Reason, n.Message = state, event, reason, msg
		return n
	}
	restart := func(failed bool, event agentpb.EventKind, reason, msg string) Next {
		if !Restartable(p, n.Counts.Restarts, failed) {
			state := agentpb.TaskState_TASK_STATE_FINISHED
			if failed {
				state = agentpb.TaskState_TASK_STATE_FAILED
			}
			return end(state, event, reason, msg)
		}
		if p.RanHealthy(e.RanFor) {
			n.Counts.Consecutive = 0
		}
		n.Counts.Consecutive++
		n.State, n.Event, n.WillRestart, n.Reason, n.Message = agentpb.TaskState_TASK_STATE_BACKOFF, event, true, reason, msg
		n.RestartIn = p.Backoff(n.Counts.Consecutive)
		return n
	}
	failed := func(reason, msg string) Next {
		n.Counts.Failures++
		return restart(true, agentpb.EventKind_EVENT_KIND_FAILED, reason, msg)
	}
	switch {
	case e.Why == KillStop:
		return end(agentpb.TaskState_TASK_STATE_KILLED, agentpb.EventKind_EVENT_KIND_KILLED, e.KillReason, "")
	case e.Why == KillUpdate && e.PendingUpdate:
		n.Relaunch = true
		return n
	case e.Why == KillPressure:
		return end(agentpb.TaskState_TASK_STATE_EVICTED, agentpb.EventKind_EVENT_KIND_EVICTED, ReasonOvercommitted, e.KillMessage)
	case e.OOM:
		n.Counts.OOMKills++
		msg := e.KillMessage
		if e.Why != KillOOM {
			msg = fmt.Sprintf("killed by the kernel at its memory limit of %d bytes", e.MemoryLimit)
		}
		return end(agentpb.TaskState_TASK_STATE_EVICTED, agentpb.EventKind_EVENT_KIND_EVICTED, ReasonOOM, msg)
	case e.Lost != nil && (e.Why == KillNone || e.Why == KillHealth):
		// A kill the agent decided ends as decided; anything else is a
		// failure nobody saw.
		return failed(ReasonLost, "the process ended while the agent was down: "+e.Lost.Error())
	case e.StartErr != nil:
		return failed(ReasonStartFailed, e.StartErr.Error())
	case e.Why == KillHealth:
		return failed(ReasonHealth, e.KillMessage)
	case !e.Known:
		return failed(ReasonUnknownExit, "the process was adopted after an agent restart; its exit status is unknown")
	case e.Code == 0:
		return restart(false, agentpb.EventKind_EVENT_KIND_FINISHED, ReasonExited, "")
	case e.Signal != "":
		return failed(ReasonSignaled, "killed by "+e.Signal)
	default:
		return failed(ReasonExited, fmt.Sprintf("exited with code %d", e.Code))
	}
}

// Restartable applies the restart policy: "always" restarts any exit,
// "on-failure" (the default) only failures, "never" nothing; max_restarts
// caps the restarts in place (0: no cap).
func Restartable(p *events.RestartPolicy, restarts int32, failed bool) bool {
	switch p.GetMode() {
	case "always":
	case "never":
		return false
	default:
		if !failed {
			return false
		}
	}
	return p.GetMaxRestarts() == 0 || restarts < p.GetMaxRestarts()
}

// PlanStart is the lifecycle's rule for a start of a task that has a live
// run (killing, at version and submission, running spec), for the agent
// and the simulations alike: a run being stopped cannot take it, nor a run
// of another submission (the master stops that one first); the same spec
// version and spec is a resent start (resent: nothing to do); any other
// start updates the live run. key names the task in errors.
func PlanStart(key string, killing KillKind, version, submission int64, spec *agentpb.TaskSpec, r *agentpb.StartTask) (resent bool, err error) {
	switch {
	case killing == KillStop:
		return false, fmt.Errorf("start %s: the task is being stopped; start it again once it has ended", key)
	case r.Submission != 0 && submission != 0 && r.Submission != submission:
		return false, fmt.Errorf("start %s: a run of submission %d is live here; stop it first (this start is for submission %d)", key, submission, r.Submission)
	}
	return version == r.SpecVersion && proto.Equal(spec, r.Spec), nil
}

// UpdateAction is what a new spec for a live task comes to.
type UpdateAction int

const (
	UpdateNothing  UpdateAction = iota // the spec in force
	UpdateInPlace                      // limits, policies or priority: the process runs on
	UpdateRelaunch                     // in backoff: start the new spec now
	UpdatePending                      // being stopped for an update already: start this spec once it is gone
	UpdateRestart                      // stop the process (for KillUpdate), then start the new spec
)

// PlanUpdate is the lifecycle's rule for an update, for the agent and the
// simulation alike: a task that ended or is being stopped cannot be
// updated; a spec that changes only what the process was not started with
// (NeedsRestart) applies in place; otherwise the process is replaced.
// key names the task in errors.
func PlanUpdate(key string, state agentpb.TaskState, killing KillKind, version int64, spec *agentpb.TaskSpec, newVersion int64, newSpec *agentpb.TaskSpec) (UpdateAction, error) {
	switch {
	case Ended(state):
		return UpdateNothing, fmt.Errorf("update %s: the task does not run here; start it", key)
	case killing == KillStop:
		return UpdateNothing, fmt.Errorf("update %s: the task is being stopped", key)
	case version == newVersion && proto.Equal(spec, newSpec):
		return UpdateNothing, nil
	case !NeedsRestart(spec, newSpec):
		return UpdateInPlace, nil
	case state == agentpb.TaskState_TASK_STATE_BACKOFF:
		return UpdateRelaunch, nil
	case state == agentpb.TaskState_TASK_STATE_STOPPING:
		return UpdatePending, nil
	}
	return UpdateRestart, nil
}

// NeedsRestart: what the process was started with changed (its command,
// arguments, environment, files, ports), not only its limits, policies,
// kill timeout or priority, which apply to the running process.
func NeedsRestart(old, new *agentpb.TaskSpec) bool {
	strip := func(s *agentpb.TaskSpec) *agentpb.TaskSpec {
		c := proto.Clone(s).(*agentpb.TaskSpec)
		c.Resources, c.Restart, c.HealthCheck, c.Priority, c.Appclass, c.KillTimeoutMs = nil, nil, nil, 0, "", 0
		return c
	}
	return !proto.Equal(strip(old), strip(new))
}
