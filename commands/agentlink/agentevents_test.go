package agentlink

import (
	"fmt"
	"testing"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
)

// What each agent event says of its task, as the link and the simulation
// both read it.
func TestAgentEventTask(t *testing.T) {
	r := &events.TaskRef{User: "u", Job: "j", Index: 4}
	for i, tc := range []struct {
		ev     *agentpb.AgentEvent
		state  commands.AgentTaskState
		record bool
		msg    string
	}{
		{&agentpb.AgentEvent{Kind: agentpb.EventKind_EVENT_KIND_STARTED, Task: r, Pid: 7}, commands.AgentRunning, true, ""},
		{&agentpb.AgentEvent{Kind: agentpb.EventKind_EVENT_KIND_FINISHED, Task: r}, commands.AgentFinished, true, ""},
		{&agentpb.AgentEvent{Kind: agentpb.EventKind_EVENT_KIND_FINISHED, Task: r, WillRestart: true}, 0, false, ""},
		{&agentpb.AgentEvent{Kind: agentpb.EventKind_EVENT_KIND_FAILED, Task: r, ExitCode: 1, WillRestart: true, Reason: "exited", Message: "exit 1"},
			commands.AgentBackoff, true, "exit 1"},
		{&agentpb.AgentEvent{Kind: agentpb.EventKind_EVENT_KIND_FAILED, Task: r, Reason: "OOMKilled", Message: "at its limit"},
			commands.AgentFailed, true, "OOMKilled: at its limit"},
		{&agentpb.AgentEvent{Kind: agentpb.EventKind_EVENT_KIND_EVICTED, Task: r, Reason: "oom"}, commands.AgentEvicted, true, ""},
		{&agentpb.AgentEvent{Kind: agentpb.EventKind_EVENT_KIND_KILLED, Task: r}, commands.AgentKilled, true, ""},
		{&agentpb.AgentEvent{Kind: agentpb.EventKind_EVENT_KIND_ADOPTED, Task: r}, 0, false, ""},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			at, ok := AgentEventTask(tc.ev)
			if ok != tc.record || (ok && (at.State != tc.state || at.Message != tc.msg || at.Task != TaskKeyOf(r))) {
				t.Errorf("%v: %+v %v, want state %v message %q recorded %v", tc.ev.Kind, at, ok, tc.state, tc.msg, tc.record)
			}
		})
	}
}
