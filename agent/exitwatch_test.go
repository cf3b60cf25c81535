package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/agent/internal/procfs"
	"github.com/corralhq/corral/internal/testkit"
)

// threads is how many OS threads this process has.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Threads:\s+(\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("/proc/self/status has no Threads:\n%s", b)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// openFiles is how many descriptors this process has open.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// Two thousand running tasks are watched without an OS thread each (a
// blocked wait holds one, and one `corral up` running 10,000 tasks would
// pass Go's limit of 10,000 threads) and with one descriptor each (10,000
// tasks at two would pass a limit of 20,000 open files), and each one's
// exit is still seen with its signal.
func TestRealManyTasksDoNotHoldAThreadEach(t *testing.T) {
	const n = 2000
	mgr, _, err := cgroup.Detect("auto", testCgroupParent(t))
	if err != nil {
		t.Fatal(err)
	}
	r := newOSRuntime(mgr)
	defer r.close()
	dir := t.TempDir()
	procs := make([]process, 0, n)
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.signal(syscall.SIGKILL)
		}
	})
	before, filesBefore := threads(t), openFiles(t)
	for i := range n {
		p, err := r.start(launchSpec{
			container: fmt.Sprintf("alice.many.%d.1", i), path: "/bin/sleep", args: []string{"600"}, dir: dir,
			stdout: filepath.Join(dir, fmt.Sprintf("%d.out", i)), stderr: filepath.Join(dir, fmt.Sprintf("%d.err", i)),
		})
		if err != nil {
			t.Fatalf("starting task %d: %v", i, err)
		}
		procs = append(procs, p)
	}
	// Blocked waits would get their threads within a scheduler tick or so:
	// watched for half a second.
	var after int
	if testkit.Poll(500*time.Millisecond, func() bool { after = threads(t); return after > before+100 }) {
		t.Errorf("%d running tasks: the agent has %d threads, %d before them; want no thread a task", n, after, before)
	} else {
		t.Logf("%d running tasks: %d threads, %d before them", n, after, before)
	}
	if files := openFiles(t); files > filesBefore+n+100 {
		t.Errorf("%d running tasks: the agent has %d open files, %d before them; want one a task", n, files, filesBefore)
	}
	for _, p := range procs {
		if err := p.signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(60 * time.Second)
	for i, p := range procs {
		select {
		case <-p.done():
		case <-deadline:
			t.Fatalf("task %d (pid %d) killed: its exit was not seen in 60s", i, p.pid())
		}
		if st := p.exit(); !st.known || st.signal != syscall.SIGKILL {
			t.Fatalf("task %d killed: exit %+v, want known, by SIGKILL", i, st)
		}
		if err := p.release(); err != nil {
			t.Errorf("task %d: release: %v", i, err)
		}
	}
	procs = nil
}

// A process another agent started is adopted, and its exit is seen though
// it is not the agent's child to wait for.
func TestRealAdoptedProcessExitIsSeen(t *testing.T) {
	mgr, _, err := cgroup.Detect("auto", testCgroupParent(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := mgr.Create("alice.adopted.0.1", cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-c", joinScript, "x", strconv.Itoa(len(c.JoinFiles()))}, c.JoinFiles()...)
	cmd := exec.Command("/bin/sh", append(args, "/bin/sleep", "600")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	st, err := procfs.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	r := newOSRuntime(mgr)
	defer r.close()
	p, err := r.adopt("alice.adopted.0.1", cmd.Process.Pid, st.StartTicks)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done():
		t.Fatal("the adopted process is running, but seen as gone")
	case <-time.After(200 * time.Millisecond):
	}
	if err := p.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done():
	case <-time.After(5 * time.Second):
		t.Fatal("the adopted process was killed, but its exit not seen in 5s")
	}
	if ex := p.exit(); ex.known {
		t.Errorf("adopted process's exit %+v: its status is its parent's to know", ex)
	}
	_ = cmd.Wait()
	if err := p.release(); err != nil {
		t.Error(err)
	}
}
