package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/events"
)

// StopAll ends every task: a running one with SIGTERM, one that ignores
// SIGTERM with SIGKILL after the grace period, one waiting to restart at
// once; all KILLED with reason "agent stopping", and it returns only when
// they have ended.
func TestRealStopAllEndsEveryTask(t *testing.T) {
	ra := newRealAgent(t)
	polite, stubborn, waiting := ref("polite", 0), ref("stubborn", 0), ref("waiting", 0)
	pp := ra.start(polite, sh("exec sleep 30")).Pid
	sp := ra.start(stubborn, sh("trap '' TERM; echo ready; while :; do sleep 0.05; done")).Pid
	ra.start(waiting, sh("exit 1", func(s *agentpb.TaskSpec) {
		s.Restart = &events.RestartPolicy{Mode: "on-failure", BackoffInitialMs: 60_000}
	}))
	ra.waitState(waiting, agentpb.TaskState_TASK_STATE_BACKOFF, 5*time.Second)
	// The trap must be set before the signal comes.
	ra.wait(stubborn, 5*time.Second, func(ts *agentpb.TaskStatus) bool { return readLog(t, ts, "stdout") == "ready\n" }, "got ready")

	grace := 300 * time.Millisecond
	begin := time.Now()
	if err := ra.StopAll(context.Background(), grace); err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	if took < grace || took > grace+3*time.Second {
		t.Errorf("StopAll took %v; the stubborn task needs the %v grace, then SIGKILL", took, grace)
	}
	for _, r := range []*events.TaskRef{polite, stubborn, waiting} {
		ts := ra.task(r)
		if ts.State != killed || ts.Reason != ReasonAgentStopping {
			t.Errorf("%s after StopAll: %v", r.Job, ts)
		}
	}
	if ra.task(stubborn).Signal != "SIGKILL" || ra.task(polite).Signal != "SIGTERM" {
		t.Errorf("signals: polite %s, stubborn %s", ra.task(polite).Signal, ra.task(stubborn).Signal)
	}
	for _, pid := range []int64{pp, sp} {
		if alive(pid) {
			t.Errorf("process %d alive after StopAll", pid)
		}
	}
	if err := ra.StopAll(context.Background(), -time.Second); err == nil {
		t.Error("StopAll accepted a negative grace")
	}
	// Every task ended, so closing leaves no cgroup of this machine.
	if err := ra.Close(); err != nil {
		t.Fatal(err)
	}
	if left := cgroupsLeft(t, ra.rt.mode(), ra.cfg.CgroupParent); len(left) > 0 {
		t.Errorf("after StopAll and Close the machine's cgroups are still there: %v", left)
	}
}

// cgroupsLeft names the directories of parent still in the mounted
// hierarchies of mode.
func cgroupsLeft(t *testing.T, mode cgroup.Mode, parent string) []string {
	t.Helper()
	if mode == cgroup.ModeSampling {
		return nil // no cgroups made
	}
	ms, err := cgroup.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, m := range ms {
		if mode == cgroup.ModeV2 && !m.V2 || mode == cgroup.ModeV1 && m.V2 {
			continue
		}
		if _, err := os.Stat(filepath.Join(m.Path, parent)); err == nil {
			left = append(left, filepath.Join(m.Path, parent))
		}
	}
	return left
}

// StopAll gives up when its context ends, naming what still runs.
func TestRealStopAllHonoursItsContext(t *testing.T) {
	ra := newRealAgent(t)
	r := ref("stubborn", 0)
	pid := ra.start(r, sh("trap '' TERM; echo ready; while :; do sleep 0.05; done")).Pid
	ra.wait(r, 5*time.Second, func(ts *agentpb.TaskStatus) bool { return readLog(t, ts, "stdout") == "ready\n" }, "got ready")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := ra.StopAll(ctx, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "stubborn") {
		t.Fatalf("StopAll = %v, want an error naming the live task", err)
	}
	_ = syscall.Kill(-int(pid), syscall.SIGKILL) // rather than wait out the grace
}

// With StopTasksOnExit, an agent process told to stop (SIGTERM, as by
// Ctrl-C under `corral up`) stops its tasks before it exits, and the next
// agent on the data dir finds them KILLED rather than adopting them.
func TestRealRunStopsTasksOnExit(t *testing.T) {
	pc := agentProcessConfig{Name: "m1", DataDir: t.TempDir(), CgroupParent: testCgroupParent(t), SampleMs: 50,
		StopTasksOnExit: true, GraceMs: 500}
	first := startAgentProcess(t, pc)
	st := first.poll(t, StartRequest("1", ref("web", 0), 1, 0, sh("exec sleep 30")))
	pid := taskIn(st, "web").Pid
	t.Cleanup(func() { _ = syscall.Kill(-int(pid), syscall.SIGKILL) })
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.cmd.Wait(); err != nil {
		t.Fatalf("agent exit: %v", err)
	}
	if alive(pid) {
		t.Fatalf("task %d still runs after its agent stopped with StopTasksOnExit", pid)
	}
	second := startAgentProcess(t, pc)
	web := taskIn(second.poll(t), "web")
	if web.State != killed || web.Reason != ReasonAgentStopping || web.Adopted {
		t.Errorf("task found by the next agent: %v", web)
	}
}
