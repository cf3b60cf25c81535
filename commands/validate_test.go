package commands

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
)

// A NUL byte cannot reach exec (it would cut an argument short or fail the
// start), and the variables the agent sets for every task cannot be given:
// each is refused naming its field.
func TestValidateSpecRefusesNULAndReservedEnv(t *testing.T) {
	s := spec("web", 9, 2)
	s.Command = "/bin/sh\x00-x"
	s.Args = []string{"ok", "a\x00b"}
	s.Env = map[string]string{"GOOD": "v\x00", "CORRAL_TASK_INDEX": "7", "PORT": "80", "PORT_HTTP": "81", "PWD": "/", "PORTS": "fine"}
	s.SecretEnv = []string{"CORRAL_TOKEN"}
	s.Overrides = map[int32]*events.TaskOverride{1: {Args: []string{"\x00"}, Env: map[string]string{"PORT": "1"}}}
	err := ValidateSpec(s)
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		"command: contains a NUL byte",
		"args[1]: contains a NUL byte",
		"env.GOOD: value contains a NUL byte",
		"env.CORRAL_TASK_INDEX: CORRAL_TASK_INDEX is set by the agent",
		"env.PORT: PORT is set by the agent",
		"env.PORT_HTTP: PORT_HTTP is set by the agent",
		"env.PWD: PWD is set by the agent",
		"secret_env[0]: CORRAL_TOKEN is set by the agent",
		"tasks[1].args[0]: contains a NUL byte",
		"tasks[1].env.PORT: PORT is set by the agent",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("no %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "PORTS") {
		t.Errorf("PORTS is not reserved:\n%s", msg)
	}
}

// kill_timeout reads as a duration, up to events.MaxKillTimeout; more, or
// less than nothing, is refused naming the field and changes nothing.
func TestKillTimeout(t *testing.T) {
	got, err := DecodeSpecJSON([]byte(`{"name": "w", "count": 1, "command": "/bin/true", "resources": {"cpu": 1, "memory": "64MiB"}, "kill_timeout": "3s"}`), "alice")
	if err != nil || got.KillTimeoutMs != 3000 {
		t.Fatalf("kill_timeout 3s: %v, %d ms", err, got.GetKillTimeoutMs())
	}
	for _, bad := range []string{`"6m"`, `"-1s"`} {
		_, err := DecodeSpecJSON([]byte(`{"name": "w", "count": 1, "command": "/bin/true", "resources": {"cpu": 1, "memory": "64MiB"}, "kill_timeout": `+bad+`}`), "alice")
		if err == nil || !strings.Contains(err.Error(), "kill_timeout") {
			t.Errorf("kill_timeout %s: %v, want a refusal naming kill_timeout", bad, err)
		}
	}
	s := spec("web", 9, 1)
	s.KillTimeoutMs = events.MaxKillTimeout.Milliseconds() + 1
	if err := ValidateSpec(s); err == nil || !strings.Contains(err.Error(), "kill_timeout: must be between 0 (the default, 10s) and 5m0s") {
		t.Errorf("over the ceiling: %v", err)
	}
}
