package main_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A `corral up` with 300 running tasks on 3 machines is killed with
// SIGKILL and started again: the tasks keep running (the agents adopt
// them), and the new leader marks no machine down and loses no task,
// because every machine answers within the grace a new leader gives them.
// Then a Ctrl-C and a restart: each task is lost and placed again once.
func TestRestartWithManyTasksLosesNone(t *testing.T) {
	c := startCell(t, cellOptions{agents: 3})
	corral := func(args ...string) (string, int) { return c.run(t, args...) }
	job := writeJob(t, "many", `{"name": "many", "priority": "batch", "count": 300,
		"command": "/bin/sleep", "args": ["100000"],
		"resources": {"cpu": "5m", "memory": "4MiB"}}`)
	if out, code := corral("job", "submit", job, "--wait"); code != 0 {
		t.Fatalf("submit many: exit %d\n%s", code, out)
	}
	pids := manyPids(t, corral)
	if len(pids) != 300 {
		t.Fatalf("found %d task processes, want 300", len(pids))
	}

	// kill -9: the master and the agents die at once; the tasks live on.
	c.kill(t)
	c.start(t)
	// Past the grace (2 x 3 polls of 1 s) and several polls after it, the
	// log holds no machine down and no task lost, failed or killed.
	consistently(t, "no MachineDown, TaskLost, TaskFailed or TaskKilled after the restart", 15*time.Second, func() (string, bool) {
		for _, typ := range []string{"MachineDown", "TaskLost", "TaskFailed", "TaskKilled"} {
			if out, _ := corral("events", "--type", typ, "-o", "csv"); strings.Count(out, "\n") > 1 {
				return out, false
			}
		}
		return "", true
	})
	for pid := range pids {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("task process %d is gone after the restart: %v", pid, err)
		}
	}
	if after := manyPids(t, corral); len(after) != 300 {
		t.Errorf("after the restart the log names %d started task processes, want the same 300", len(after))
	}
	allManyRunning(t, corral, "after kill -9 and a restart")

	// Ctrl-C stops the tasks with the cell (the master first, so it records
	// nothing of it); started again, each agent reports every task of its
	// own gone once, and each is placed again once: no machine goes down.
	c.stop(t)
	c.start(t)
	consistently(t, "no MachineDown after Ctrl-C and a restart", 15*time.Second, func() (string, bool) {
		out, _ := corral("events", "--type", "MachineDown", "-o", "csv")
		return out, strings.Count(out, "\n") <= 1
	})
	allManyRunning(t, corral, "after Ctrl-C and a restart")
	eachLostOnce(t, corral)
}

// allManyRunning waits until the many job's 300 tasks run.
func allManyRunning(t *testing.T, corral func(...string) (string, int), when string) {
	t.Helper()
	eventually(t, when+": all 300 tasks running", 60*time.Second, func() (string, bool) {
		out, _ := corral("task", "list", "many", "-o", "csv")
		n := strings.Count(out, ",running,")
		return fmt.Sprintf("%d of 300 tasks are running:\n%.2000s", n, out), n == 300
	})
}

// eachLostOnce: the log records each of the 300 tasks lost once.
func eachLostOnce(t *testing.T, corral func(...string) (string, int)) {
	t.Helper()
	out, _ := corral("events", "--type", "TaskLost", "-o", "csv")
	lost := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Split(line, ","); len(f) > 3 {
			lost[f[3]]++
		}
	}
	for stream, n := range lost {
		if n > 1 {
			t.Errorf("%s lost %d times after one restart", stream, n)
		}
	}
	if len(lost) != 300 {
		t.Errorf("%d tasks recorded lost after Ctrl-C and a restart, want each of the 300 once", len(lost))
	}
}

// manyPids are the distinct pids of the many job's processes by its
// TaskStarted events.
func manyPids(t *testing.T, corral func(...string) (string, int)) map[int]bool {
	t.Helper()
	pids := map[int]bool{}
	for _, pid := range startedPids(t, corral, "many") {
		pids[pid] = true
	}
	return pids
}
