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

	"github.com/corralhq/corral/internal/testkit"
)

// TestStartFailuresAndKillTimeout runs a real `corral up` and checks a
// task's life at both ends:
//
//   - a task whose command does not exist fails to start, and each start
//     is a TaskFailed with the reason ("no such file"), counted as a
//     restart and shown by `task list`, `why` and `doctor` within seconds;
//   - a task that ignores SIGTERM, with kill_timeout 3s, is stopping
//     (holding its machine's resources) while its process runs, is killed
//     by SIGKILL about 3 s after its job is killed (not at the default
//     10 s), and is dead once the agent reports its exit.
func TestStartFailuresAndKillTimeout(t *testing.T) {
	c := startCell(t, cellOptions{})
	corral := c.cli(t)
	startFailuresAreCountedAndExplained(t, corral)
	killTimeoutIsHeld(t, corral)
}

// writeJob writes a job file of spec in a directory of the test's.
func writeJob(t *testing.T, name, spec string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name+".json")
	if err := os.WriteFile(p, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startFailuresAreCountedAndExplained: a command that cannot start fails
// each start with the reason, counted as a restart and shown by task
// list, why and doctor.
func startFailuresAreCountedAndExplained(t *testing.T, corral func(...string) (string, int)) {
	t.Helper()
	bad := writeJob(t, "bad", `{"name": "bad", "priority": "batch", "count": 1, "command": "/does/not/exist",
		"resources": {"cpu": "10m", "memory": "8MiB"}, "restart": {"backoff": "200ms", "max_backoff": "1s"}}`)
	if out, code := corral("job", "submit", bad); code != 0 {
		t.Fatalf("submit bad: exit %d\n%s", code, out)
	}
	row := regexp.MustCompile(`(?m)^bad/0\s+scheduled\s+.*\s(\d+)\s+-\s+-\s+\S+\s+(.*)$`)
	eventually(t, "task list shows the start failures, counted", 20*time.Second, func() (string, bool) {
		out, _ := corral("task", "list", "bad")
		m := row.FindStringSubmatch(out)
		if m == nil {
			return out, false
		}
		restarts, _ := strconv.Atoi(m[1])
		return out, restarts >= 2 && strings.Contains(m[2], "no such file")
	})
	if out, _ := corral("why", "bad"); !strings.Contains(out, "restarting in place after failing") || !strings.Contains(out, "no such file") {
		t.Errorf("why bad does not say the task fails to start")
	}
	if out, _ := corral("doctor"); !strings.Contains(out, "crash-looping") || !strings.Contains(out, "alice/bad/0") || !strings.Contains(out, "no such file") {
		t.Errorf("corral doctor does not name the task failing to start, and why")
	}
	if out, _ := corral("events", "--job", "bad", "--type", "TaskFailed", "-o", "csv"); strings.Count(out, "no such file") < 2 {
		t.Errorf("the log holds fewer than two TaskFailed saying no such file")
	}
}

// killTimeoutIsHeld: a task that ignores SIGTERM (the shell and its sleep
// both: an ignored signal stays ignored across exec), with kill_timeout
// 3s, is stopping while its process runs, is killed about 3 s after its
// job, and is dead once the agent reports the exit.
func killTimeoutIsHeld(t *testing.T, corral func(...string) (string, int)) {
	t.Helper()
	stubborn := writeJob(t, "stubborn", `{"name": "stubborn", "priority": "batch", "count": 1, "command": "/bin/sh",
		"args": ["-c", "trap '' TERM; sleep 1000"], "kill_timeout": "3s",
		"resources": {"cpu": "10m", "memory": "8MiB"}}`)
	if out, code := corral("job", "submit", stubborn, "--wait"); code != 0 {
		t.Fatalf("submit stubborn: exit %d\n%s", code, out)
	}
	out, _ := corral("events", "--job", "stubborn", "--type", "TaskStarted")
	m := regexp.MustCompile(`pid (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("no pid in stubborn's TaskStarted")
	}
	pid, _ := strconv.Atoi(m[1])
	killed := time.Now()
	if out, code := corral("job", "kill", "stubborn"); code != 0 {
		t.Fatalf("job kill: exit %d\n%s", code, out)
	}
	// While its process runs out its kill_timeout, the task is stopping
	// (its machine holds its resources), not dead.
	eventually(t, "task list shows the task stopping", 2500*time.Millisecond, func() (string, bool) {
		out, _ := corral("task", "list", "stubborn")
		return out, regexp.MustCompile(`(?m)^stubborn/0\s+stopping \(killed\)\s`).MatchString(out)
	})
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("process %d is gone %s after the kill, the task shown stopping; it ignores SIGTERM and has kill_timeout 3s", pid, time.Since(killed))
	}
	testkit.Eventually(t, 15*time.Second, "the process of a task with kill_timeout 3s ends after its job was killed", func() (bool, string) {
		return syscall.Kill(pid, 0) != nil, "process " + strconv.Itoa(pid) + " runs"
	})
	if took := time.Since(killed); took < 2500*time.Millisecond || took > 6*time.Second {
		t.Errorf("the process ignoring SIGTERM was gone %s after the kill, want about kill_timeout, 3s", took)
	} else {
		t.Logf("the process ignoring SIGTERM was gone %s after the kill (kill_timeout 3s)", took.Truncate(10*time.Millisecond))
	}
	// Once the agent reports the exit, the task is dead and what it held
	// is free.
	eventually(t, "the task is dead once its process is gone", 10*time.Second, func() (string, bool) {
		out, _ := corral("task", "list", "stubborn")
		return out, regexp.MustCompile(`(?m)^stubborn/0\s+dead \(killed\)\s`).MatchString(out)
	})
	if out, _ := corral("events", "--job", "stubborn", "--type", "TaskStopped"); !strings.Contains(out, "TaskStopped") {
		t.Errorf("no TaskStopped in the log")
	}
}
