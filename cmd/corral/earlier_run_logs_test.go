package main_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestPreviousRunLogsFromTheMachineItLeft: on a real `corral up`, a task
// writes a line naming its sandbox (each machine's own), is drained to
// another machine, and `corral task logs --previous` prints that line
// from the machine it left, as does --run 0 and the web UI's page of run
// 0; --run 1 is the new machine's run. A run that does not exist lists
// the runs; when the old machine's agent no longer keeps the sandbox, or
// the machine is removed, the command fails naming the run, the machine
// and why.
func TestPreviousRunLogsFromTheMachineItLeft(t *testing.T) {
	c := startCell(t, cellOptions{})
	corral := c.cli(t)

	job := filepath.Join(t.TempDir(), "mover.jsonnet")
	if err := os.WriteFile(job, []byte(`{name: 'mover', priority: 'best-effort', count: 1, command: '/bin/sh',
  args: ['-c', 'echo "written in $CORRAL_SANDBOX"; while true; do sleep 1; done'], resources: {cpu: '10m', memory: '16MiB'}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := corral("job", "submit", job, "--wait"); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	first := machineOf(t, corral)
	line := regexp.MustCompile(`written in \S+`)
	var firstLine string
	eventually(t, "the first run's line", 20*time.Second, func() (string, bool) {
		out, code := corral("task", "logs", "mover", "0")
		firstLine = line.FindString(out)
		return out, code == 0 && strings.Contains(firstLine, filepath.Join("machines", first))
	})

	// Drained: the task runs again on another machine, which has its own
	// sandbox; the earlier run's line is on the machine it left.
	if out, code := corral("machine", "drain", first, "--wait"); code != 0 {
		t.Fatalf("drain %s: exit %d\n%s", first, code, out)
	}
	second := ""
	eventually(t, "the task runs elsewhere and writes there", 30*time.Second, func() (string, bool) {
		second = machineOf(t, corral)
		out, code := corral("task", "logs", "mover", "0")
		return out, code == 0 && second != first && second != "" && strings.Contains(out, filepath.Join("machines", second))
	})
	eachRunFromItsMachine(t, corral, first, second, firstLine)
	web := c.webLogin(t, c.adminToken("alice"))
	runPagesOfTheWebUI(t, c, web, firstLine)
	goneLogsSayWhy(t, c, web, first)
}

// eachRunFromItsMachine: --previous, --run 0 and --run -1 print the run on
// the machine the task left, --run 1 the new machine's; a run that does
// not exist lists the runs, and --previous does not follow.
func eachRunFromItsMachine(t *testing.T, corral func(...string) (string, int), first, second, firstLine string) {
	t.Helper()
	for _, flags := range [][]string{{"--previous"}, {"--run", "0"}, {"--run", "-1"}} {
		out, code := corral(append([]string{"task", "logs", "mover", "0"}, flags...)...)
		if code != 0 || !strings.Contains(out, firstLine) || strings.Contains(out, filepath.Join("machines", second)) {
			t.Errorf("task logs %s: exit %d, want the run on %s (%q) only:\n%s", strings.Join(flags, " "), code, first, firstLine, out)
		}
	}
	if out, code := corral("task", "logs", "mover", "0", "--run", "1"); code != 0 || !strings.Contains(out, filepath.Join("machines", second)) || strings.Contains(out, firstLine) {
		t.Errorf("task logs --run 1: exit %d, want the run on %s:\n%s", code, second, out)
	}
	if out, code := corral("task", "logs", "mover", "0", "--run", "7"); code == 0 || !strings.Contains(out, "run 7") || !strings.Contains(out, "0 on "+first) || !strings.Contains(out, "1 on "+second) {
		t.Errorf("task logs --run 7: exit %d, want a refusal listing runs 0 on %s and 1 on %s:\n%s", code, first, second, out)
	}
	if out, code := corral("task", "logs", "mover", "0", "--previous", "-f"); code == 0 {
		t.Errorf("task logs --previous -f: exit 0, want a usage error:\n%s", out)
	}
}

// runPagesOfTheWebUI: the web UI's task page links run 0, whose page
// reads the old machine.
func runPagesOfTheWebUI(t *testing.T, c *testCell, web *http.Client, firstLine string) {
	t.Helper()
	get := func(path string) string {
		page, _ := webGet(t, web, c.httpAddr, path)
		return page
	}
	if page := get("/jobs/alice/mover/tasks/0"); !strings.Contains(page, `href="/jobs/alice/mover/tasks/0/runs/0"`) {
		t.Errorf("the task page does not link run 0:\n%.3000s", page)
	}
	if page := get("/jobs/alice/mover/tasks/0/runs/0"); !strings.Contains(page, firstLine) {
		t.Errorf("the page of run 0 does not show %q:\n%.3000s", firstLine, page)
	}
}

// goneLogsSayWhy: when the old machine's agent no longer keeps the
// sandbox (its retention passed), the command and the run's page say so,
// naming the run and the machine; when the machine is removed, its logs
// went with it.
func goneLogsSayWhy(t *testing.T, c *testCell, web *http.Client, first string) {
	t.Helper()
	corral := c.cli(t)
	get := func(path string) string {
		page, _ := webGet(t, web, c.httpAddr, path)
		return page
	}
	sandbox := filepath.Join(c.data, "machines", first, "tasks", "alice", "mover", "0")
	if err := os.RemoveAll(sandbox); err != nil {
		t.Fatal(err)
	}
	out, code := corral("task", "logs", "mover", "0", "--previous")
	if code == 0 || !strings.Contains(out, "run 0") || !strings.Contains(out, "machine "+first) || !strings.Contains(out, "no longer keeps") {
		t.Errorf("task logs --previous after the sandbox went: exit %d, want an error naming run 0, %s and why:\n%s", code, first, out)
	}
	if page := get("/jobs/alice/mover/tasks/0/runs/0"); !strings.Contains(page, "no longer keeps") {
		t.Errorf("the page of run 0 does not say its logs are gone:\n%.3000s", page)
	}
	// The machine removed: its logs went with it.
	if out, code := corral("machine", "remove", first); code != 0 {
		t.Fatalf("machine remove %s: exit %d\n%s", first, code, out)
	}
	out, code = corral("task", "logs", "mover", "0", "--run", "0")
	if code == 0 || !strings.Contains(out, "run 0") || !strings.Contains(out, "machine "+first) || !strings.Contains(out, "removed") {
		t.Errorf("task logs --run 0 of a removed machine: exit %d, want an error naming run 0, %s and why:\n%s", code, first, out)
	}
}

// machineOf is the machine `corral task list mover` shows task 0 on.
func machineOf(t *testing.T, corral func(args ...string) (string, int)) string {
	t.Helper()
	out, _ := corral("task", "list", "mover")
	m := regexp.MustCompile(`(?m)^mover/0\s+running\s+\S+\s+(m\d+)\s`).FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return m[1]
}
