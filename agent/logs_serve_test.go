package agent

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
)

func TestSelectRunAndTail(t *testing.T) {
	log := []byte("old\n" + RunMarker + "1 started x ---\none\ntwo\n" + RunMarker + "2 started y ---\nthree\n")
	if got := string(SelectRun(log, false)); got != RunMarker+"2 started y ---\nthree\n" {
		t.Fatalf("current run: %q", got)
	}
	if got := string(SelectRun(log, true)); got != RunMarker+"1 started x ---\none\ntwo\n" {
		t.Fatalf("previous run: %q", got)
	}
	if got := SelectRun([]byte("no markers\n"), true); got != nil {
		t.Fatalf("previous of a single run: %q", got)
	}
	// A marker inside a line is output, not a marker.
	if got := string(SelectRun([]byte("a "+RunMarker+"9\nb\n"), false)); !strings.HasPrefix(got, "a ") {
		t.Fatalf("a marker mid-line split the run: %q", got)
	}
	if got := string(TailOf([]byte("1\n2\n3\n"), 2, 0)); got != "2\n3\n" {
		t.Fatalf("tail 2: %q", got)
	}
	if got := string(TailOf([]byte("1\n2\n3"), 5, 0)); got != "1\n2\n3" {
		t.Fatalf("tail past the start: %q", got)
	}
	if got := string(TailOf([]byte("123456"), 0, 4)); got != "3456" {
		t.Fatalf("tail bytes: %q", got)
	}
}

// A log request names a task, never a path: nothing outside the agent's
// tasks directory can be read through it.
func TestLogRequestsCannotLeaveTheSandboxes(t *testing.T) {
	for _, ref := range []*events.TaskRef{
		nil,
		{User: "..", Job: "x"},
		{User: "alice", Job: "../../etc"},
		{User: "alice", Job: "a/b"},
		{User: "alice", Job: "x\x00y"},
		{User: "", Job: "x"},
		{User: "alice", Job: "x", Index: -1},
	} {
		if err := validRef(ref); err == nil {
			t.Errorf("%v: accepted", ref)
		}
	}
	if err := validRef(&events.TaskRef{User: "alice", Job: "web", Index: 3}); err != nil {
		t.Error(err)
	}
}
