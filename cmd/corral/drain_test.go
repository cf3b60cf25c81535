package main_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDrainKeepsDisruptionBudget places both replicas of examples/web.jsonnet
// (an HTTP server with a health check, max_disruptions 1) on one machine of
// a real `corral up`, then drains that machine with --wait while a probe
// asks every task port of the cell for a page every 50 ms: the drain moves
// one replica at a time, each after its replacement is healthy, so at no
// moment does fewer than one replica answer, and --wait shows the job's
// budget holding the second replica. A forced drain names the job it takes
// below budget, then evicts both at once.
func TestDrainKeepsDisruptionBudget(t *testing.T) {
	c := startCell(t, cellOptions{})
	corral := c.cli(t)

	// Both replicas on m2: the other machines drain (empty) while the job
	// is placed, and open again after.
	if _, code := corral("machine", "drain", "m1", "m3"); code != 0 {
		t.Fatalf("drain m1 m3: exit %d", code)
	}
	if out, code := corral("job", "submit", "examples/web.jsonnet", "--wait"); code != 0 || !strings.Contains(out, "all 2 tasks running and healthy") {
		t.Fatalf("submit --wait: exit %d", code)
	}
	if _, code := corral("machine", "undrain", "m1", "m3"); code != 0 {
		t.Fatalf("undrain m1 m3: exit %d", code)
	}
	if n := machineTasks(t, corral)["m2"]; n != 2 {
		t.Fatalf("m2 holds %d tasks, want both replicas", n)
	}

	p := startProbeEvery(c.portBase, 3, 50*time.Millisecond)
	defer p.stop()
	eventually(t, "the probe sees both replicas", 10*time.Second, func() (string, bool) {
		n := p.now()
		return fmt.Sprintf("%d answer", n), n == 2
	})
	p.reset()

	out, code := corral("machine", "drain", "m2", "--wait", "--reason", "kernel upgrade")
	if code != 0 || !strings.Contains(out, "machine m2: drained, no task left") {
		t.Fatalf("drain m2 --wait: exit %d, want 0 and drained", code)
	}
	if !strings.Contains(out, "machine m2: draining, 1 tasks left; held by job alice/web: 1 task(s) held, 1 of at most 1 disrupted") {
		t.Errorf("drain --wait never showed the job's budget holding the second replica")
	}
	// Judge rounds asked after the drain ended, not a count from before.
	after := p.round() + 1
	eventually(t, "both replicas serve elsewhere", 30*time.Second, func() (string, bool) {
		n := p.now()
		return fmt.Sprintf("%d answer", n), n == 2 && p.round() > after
	})
	low, high := p.stop()
	if low < 1 || high != 2 {
		t.Errorf("replicas answering the probe through the drain: between %d and %d, want at least 1 (count 2 - max_disruptions 1) at every moment; answering: %s",
			low, high, p.timeline())
	}
	tasks := machineTasks(t, corral)
	if tasks["m2"] != 0 || tasks["m1"]+tasks["m3"] != 2 {
		t.Errorf("after the drain: tasks per machine %v, want none on m2", tasks)
	}
	out, _ = corral("machine", "list")
	if !regexp.MustCompile(`(?m)^m2\s+up, draining`).MatchString(out) {
		t.Errorf("machine list does not show m2 draining")
	}
	forcedDrainNamesTheJobItTakesBelowBudget(t, corral)
}

// forcedDrainNamesTheJobItTakesBelowBudget: both replicas back on m2
// together (a drain of two machines, one after the other), then a forced
// drain: it says first which job it takes below its budget, then evicts
// both at once.
func forcedDrainNamesTheJobItTakesBelowBudget(t *testing.T, corral func(args ...string) (string, int)) {
	t.Helper()
	if _, code := corral("machine", "undrain", "m2"); code != 0 {
		t.Fatalf("undrain m2: exit %d", code)
	}
	if out, code := corral("machine", "drain", "m1", "m3", "--wait"); code != 0 || strings.Count(out, "drained, no task left") != 2 {
		t.Fatalf("drain m1 m3 --wait: exit %d, want both drained", code)
	}
	if _, code := corral("machine", "undrain", "m1", "m3"); code != 0 {
		t.Fatalf("undrain m1 m3: exit %d", code)
	}
	if n := machineTasks(t, corral)["m2"]; n != 2 {
		t.Fatalf("m2 holds %d tasks, want both replicas", n)
	}
	out, code := corral("machine", "drain", "m2", "--force")
	if code != 0 || !strings.Contains(out, "machine m2: --force evicts 1 task(s) now, taking these jobs past their disruption budget (update.max_disruptions):\n  job alice/web: 1 task(s) held, 1 of at most 1 disrupted") ||
		!strings.Contains(out, "machine m2: forced:") {
		t.Errorf("drain --force: exit %d, want 0, the job it takes below budget named before it evicts", code)
	}
	if n := machineTasks(t, corral)["m2"]; n != 0 {
		t.Errorf("m2 holds %d tasks after a forced drain", n)
	}
}

// machineTasks is `corral machine list`'s count of tasks per machine.
func machineTasks(t *testing.T, corral func(args ...string) (string, int)) map[string]int {
	t.Helper()
	out, code := corral("machine", "list", "-o", "json")
	if code != 0 {
		t.Fatalf("machine list: exit %d", code)
	}
	var ms []struct {
		Name  string `json:"name"`
		Tasks int    `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatalf("machine list -o json: %v", err)
	}
	counts := map[string]int{}
	for _, m := range ms {
		counts[m.Name] = m.Tasks
	}
	return counts
}
