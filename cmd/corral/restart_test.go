package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
	if testing.Short() {
		t.Skip("builds the corral binary and runs a cell of 300 tasks")
	}
	bin := buildCorral(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	grpcAddr, httpAddr, dnsAddr := freeTCP(t), freeTCP(t), freeUDPAndTCP(t)
	env := append(os.Environ(), "CORRAL_USER=alice", "CORRAL_MASTER="+grpcAddr, "CORRAL_CELL=dev", "CORRAL_DATA="+data)
	args := []string{"up", "--data", data, "--listen", grpcAddr, "--http", httpAddr, "--dns", dnsAddr, "--port-base", strconv.Itoa(freeTaskPorts(t, 3)), "--agents", "3"}
	up := startUp(t, bin, root, env, args)
	corral := func(args ...string) (string, int) { return runCorral(t, bin, root, env, args...) }

	job := filepath.Join(t.TempDir(), "many.json")
	if err := os.WriteFile(job, []byte(`{"name": "many", "priority": "batch", "count": 300,
		"command": "/bin/sleep", "args": ["100000"],
		"resources": {"cpu": "5m", "memory": "4MiB"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := corral("job", "submit", job, "--wait"); code != 0 {
		t.Fatalf("submit many: exit %d\n%s", code, out)
	}
	pids := manyPids(t, corral)
	if len(pids) != 300 {
		t.Fatalf("found %d task processes, want 300", len(pids))
	}

	// kill -9: the master and the agents die at once; the tasks live on.
	if err := up.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-up.done
	up.stopped = true
	up2 := startUp(t, bin, root, env, args)
	// Past the grace (2 x 3 polls of 1 s) and several polls after it.
	time.Sleep(15 * time.Second)

	for _, typ := range []string{"MachineDown", "TaskLost", "TaskFailed", "TaskKilled"} {
		if out, _ := corral("events", "--type", typ, "-o", "csv"); strings.Count(out, "\n") > 1 {
			t.Errorf("after the restart the log holds %s events:\n%.2000s", typ, out)
		}
	}
	for pid := range pids {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("task process %d is gone after the restart: %v", pid, err)
		}
	}
	if after := manyPids(t, corral); len(after) != 300 {
		t.Errorf("after the restart the log names %d started task processes, want the same 300", len(after))
	}
	allRunning := func(when string) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
			out, _ := corral("task", "list", "many", "-o", "csv")
			n := strings.Count(out, ",running,")
			if n == 300 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of 300 tasks are running:\n%.2000s", when, n, out)
			}
		}
	}
	allRunning("after kill -9 and a restart")

	// Ctrl-C stops the tasks with the cell (the master first, so it records
	// nothing of it); started again, each agent reports every task of its
	// own gone once, and each is placed again once: no machine goes down.
	up2.stop(t)
	startUp(t, bin, root, env, args)
	time.Sleep(15 * time.Second)
	allRunning("after Ctrl-C and a restart")
	if out, _ := corral("events", "--type", "MachineDown", "-o", "csv"); strings.Count(out, "\n") > 1 {
		t.Errorf("after the restart the log holds MachineDown events:\n%.2000s", out)
	}
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

// manyPids reads the distinct pids of the many job from its TaskStarted events.
func manyPids(t *testing.T, corral func(...string) (string, int)) map[int]bool {
	t.Helper()
	out, code := corral("events", "--job", "many", "--type", "TaskStarted")
	if code != 0 {
		t.Fatalf("corral events: exit %d\n%s", code, out)
	}
	pids := map[int]bool{}
	for _, m := range regexp.MustCompile(`pid (\d+)`).FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids[pid] = true
	}
	return pids
}
