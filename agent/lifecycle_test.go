package agent

import (
	"errors"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
)

// TestAfterExit: the lifecycle's one rule, exit by exit.
func TestAfterExit(t *testing.T) {
	onFailure := &events.RestartPolicy{Mode: "on-failure", MaxRestarts: 2, BackoffInitialMs: 100, BackoffMaxMs: 1000}
	always := &events.RestartPolicy{Mode: "always"}
	never := &events.RestartPolicy{Mode: "never"}
	const (
		backoff  = agentpb.TaskState_TASK_STATE_BACKOFF
		failed   = agentpb.TaskState_TASK_STATE_FAILED
		finished = agentpb.TaskState_TASK_STATE_FINISHED
		evicted  = agentpb.TaskState_TASK_STATE_EVICTED
		killed   = agentpb.TaskState_TASK_STATE_KILLED
	)
	for _, tc := range []struct {
		name   string
		p      *events.RestartPolicy
		c      Counts
		e      Exit
		state  agentpb.TaskState
		reason string
	}{
		{"exit 1 restarts", onFailure, Counts{}, Exit{Known: true, Code: 1}, backoff, ReasonExited},
		{"exit 1 past max_restarts fails", onFailure, Counts{Restarts: 2}, Exit{Known: true, Code: 1}, failed, ReasonExited},
		{"exit 0 on-failure finishes", onFailure, Counts{}, Exit{Known: true}, finished, ReasonExited},
		{"exit 0 always restarts", always, Counts{}, Exit{Known: true}, backoff, ReasonExited},
		{"never", never, Counts{}, Exit{Known: true, Code: 1}, failed, ReasonExited},
		{"signal", onFailure, Counts{}, Exit{Known: true, Code: -1, Signal: "SIGSEGV"}, backoff, ReasonSignaled},
		{"stop", always, Counts{}, Exit{Why: KillStop, KillReason: "job killed", Known: true, Code: -1, Signal: "SIGTERM"}, killed, "job killed"},
		{"kernel OOM", always, Counts{}, Exit{Known: true, Code: -1, Signal: "SIGKILL", OOM: true, MemoryLimit: 1 << 20}, evicted, ReasonOOM},
		{"pressure", always, Counts{}, Exit{Why: KillPressure, KillMessage: "machine at 98%", Known: true}, evicted, ReasonOvercommitted},
		{"health", onFailure, Counts{}, Exit{Why: KillHealth, KillMessage: "GET /healthz: 500", Known: true, Code: -1}, backoff, ReasonHealth},
		{"refused start", onFailure, Counts{}, Exit{Known: true, Code: -1, StartErr: errors.New("no such binary")}, backoff, ReasonStartFailed},
		{"adopted, status unknown", onFailure, Counts{}, Exit{Code: -1}, backoff, ReasonUnknownExit},
		{"lost while the agent was down", onFailure, Counts{}, Exit{Code: -1, Lost: errors.New("gone")}, backoff, ReasonLost},
		{"stopped while the agent was down", onFailure, Counts{}, Exit{Why: KillStop, KillReason: "bye", Code: -1, Lost: errors.New("gone")}, killed, "bye"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := AfterExit(tc.p, tc.c, tc.e)
			if n.State != tc.state || n.Reason != tc.reason || n.WillRestart != (tc.state == backoff) {
				t.Errorf("%s: state %v reason %q restart %v, want %v %q", tc.name, n.State, n.Reason, n.WillRestart, tc.state, tc.reason)
			}
		})
	}
	// Backoff doubles with failures in a row, and a healthy run starts it
	// over.
	n := AfterExit(onFailure, Counts{Consecutive: 2}, Exit{Known: true, Code: 1, RanFor: time.Millisecond})
	if n.Counts.Consecutive != 3 || n.RestartIn != onFailure.Backoff(3) || n.Counts.Failures != 1 {
		t.Errorf("third failure in a row: %+v", n)
	}
	n = AfterExit(onFailure, Counts{Consecutive: 2}, Exit{Known: true, Code: 1, RanFor: time.Hour})
	if n.Counts.Consecutive != 1 || n.RestartIn != onFailure.Backoff(1) {
		t.Errorf("a failure after an hour's healthy run: %+v", n)
	}
	if n := AfterExit(always, Counts{}, Exit{Why: KillUpdate, PendingUpdate: true, Code: -1}); !n.Relaunch {
		t.Errorf("an update's exit: %+v, want a relaunch", n)
	}
	if n := AfterExit(always, Counts{}, Exit{Known: true, OOM: true}); n.Counts.OOMKills != 1 || n.Event != agentpb.EventKind_EVENT_KIND_EVICTED {
		t.Errorf("an OOM kill: %+v", n)
	}
}
