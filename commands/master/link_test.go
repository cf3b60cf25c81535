package master_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

// The link's settings in these tests: fast polls, Borg's three misses.
const (
	testPoll   = 500 * time.Millisecond
	testMisses = 3
)

func testLinkConfig() master.LinkConfig {
	return master.LinkConfig{Interval: testPoll, MissedPolls: testMisses, UsageWindow: time.Second, StopGrace: time.Second}
}

// A task exiting with 1 is restarted in place by its agent, and every
// failure is in the log, even those that happen between two polls: five
// runs (max_restarts 4) are five TaskStarted, four TaskFailed that will
// restart and one that will not, and the master's count of restarts is
// four, so it does not run the task a sixth time.
func TestLinkRecordsEveryFailureAndRestart(t *testing.T) {
	c := newLinkCell(t, testLinkConfig())
	c.startAgent("m0", false)
	runs := filepath.Join(t.TempDir(), "runs")
	spec := c.spec("flaky", 1, "echo run >> "+runs+"; exit 1")
	// Backoff 100, 200, 400, 800 ms: several restarts fall between polls.
	spec.Restart = &events.RestartPolicy{Mode: "on-failure", MaxRestarts: 4, BackoffInitialMs: 100, BackoffMaxMs: 800}
	c.submit(spec)
	testkit.Eventually(t, 20*time.Second, "the task failed for good", func() (bool, string) {
		ts := c.tasks("flaky")
		return ts[0].State == projections.TaskDead, fmt.Sprint(ts)
	})
	// A poll or two more: nothing else may happen.
	c.waitPolls(3)
	b, _ := os.ReadFile(runs)
	got := strings.Count(string(b), "run")
	var willRestart, final int
	for _, e := range c.events("flaky", "TaskFailed") {
		f := e.Data.(*events.TaskFailed)
		if f.ExitCode != 1 || f.Machine != "m0" {
			t.Errorf("TaskFailed %+v: want exit code 1 on m0", f)
		}
		if f.WillRestart {
			willRestart++
		} else {
			final++
		}
	}
	started := len(c.events("flaky", "TaskStarted"))
	ts := c.tasks("flaky")[0]
	t.Logf("process ran %d times; log: %d TaskStarted, %d TaskFailed restarting in place, %d final; restarts counted %d, task %s/%s",
		got, started, willRestart, final, ts.Restarts, ts.State, ts.End)
	if got != 5 || started != 5 || willRestart != 4 || final != 1 || ts.Restarts != 4 || ts.End != projections.Failed {
		t.Fatalf("want 5 runs, 5 TaskStarted, 4+1 TaskFailed, 4 restarts, failed")
	}
	if n := len(c.events("flaky", "TaskSubmitted")); n != 1 {
		t.Errorf("%d TaskSubmitted: the task was rescheduled after its restarts were spent", n)
	}
}

// A task over its memory limit is killed (by the kernel where cgroups are
// writable, by the agent's sampling otherwise) and recorded as a failure
// of its own: OOMKilled, counted against its restart policy, and placed
// again only after the policy's backoff, doubling with each failure in a
// row. Placed again on the same machine, where the agent still reports the
// ended run, the new placement must run (a new process). A task that
// cannot live costs a bounded number of events: before, OOM kills were
// evictions, rescheduled at once, about 130 events a second for ever.
func TestLinkOOMKilledTaskBacksOff(t *testing.T) {
	c := newLinkCell(t, testLinkConfig())
	// Two machines: a failed task avoids the machine it last failed on.
	c.startAgent("m0", false)
	c.startAgent("m1", false)
	testkit.Eventually(t, 10*time.Second, "m0 and m1 up", func() (bool, string) {
		return c.machineState("m0") == projections.MachineUp && c.machineState("m1") == projections.MachineUp, ""
	})
	// tail looks for a line end in an endless stream of zeros: it keeps
	// everything it reads.
	hog := c.spec("hog", 1, "exec tail /dev/zero")
	hog.Resources.MemoryBytes = 32 << 20
	hog.Restart = &events.RestartPolicy{Mode: "always", BackoffInitialMs: 500, BackoffMaxMs: 2000}
	once := c.spec("hog-once", 1, "exec tail /dev/zero")
	once.Resources.MemoryBytes = 32 << 20
	once.Restart = &events.RestartPolicy{Mode: "never"}
	start := c.submit(hog)
	c.submit(once)
	const window = 10 * time.Second
	// The sleep is the subject: the runs that fit in a window of time are
	// counted against the backoff's bound.
	time.Sleep(window)
	if _, err := c.master.client.Kill(as("alice"), &apipb.KillRequest{RequestId: "kill-hog", Job: "hog"}); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)

	pids := map[int64]bool{}
	var failures int
	var lastSubmit time.Time
	var lastWait time.Duration
	for _, e := range c.events("hog", "TaskStarted", "TaskFailed", "TaskSubmitted") {
		switch p := e.Data.(type) {
		case *events.TaskFailed:
			failures++
			if !strings.HasPrefix(p.Message, "OOMKilled") {
				t.Errorf("TaskFailed %+v: want OOMKilled", p)
			}
		case *events.TaskStarted:
			pids[p.Pid] = true
		case *events.TaskSubmitted:
			if p.Reason == "rescheduled" {
				want := hog.Restart.Backoff(p.FailStreak)
				got := time.UnixMicro(p.NotBeforeUs).Sub(e.OccurredAt)
				if p.FailStreak < 1 || got < want-time.Millisecond || got > want+time.Millisecond {
					t.Errorf("resubmission %d in a row waits %s, want %s", p.FailStreak, got, want)
				}
				if !lastSubmit.IsZero() && e.OccurredAt.Sub(lastSubmit) < lastWait {
					t.Errorf("resubmitted %s after the previous resubmission, less than that one's backoff %s", e.OccurredAt.Sub(lastSubmit), lastWait)
				}
				lastSubmit, lastWait = e.OccurredAt, want
			}
		}
	}
	// With backoffs of 0.5, 1, 2, 2, ... s, at most 1 + 2 + (window-1.5 s)/2 s
	// runs fit in the window, and each costs four events.
	bound := 3 + int(elapsed-1500*time.Millisecond)/int(2*time.Second) + 1
	all := len(c.events("hog"))

	t.Logf("in %s: %d OOM kills, %d processes, %d events of the job (bound %d runs)", elapsed.Truncate(time.Millisecond), failures, len(pids), all, bound)
	if failures < 2 || len(pids) < 2 {
		t.Errorf("%d failures, %d processes: placed again after its backoff, it must run again", failures, len(pids))
	}
	if failures > bound || all > 4*bound+4 {
		t.Errorf("%d failures and %d events in %s: more than the backoff allows (%d runs)", failures, all, elapsed, bound)
	}

	// restart: never is obeyed for an OOM kill too: one run, then dead.
	testkit.Eventually(t, 10*time.Second, "hog-once failed for good", func() (bool, string) {
		ts := c.tasks("hog-once")
		return ts[0].State == projections.TaskDead, fmt.Sprint(ts)
	})
	if ts := c.tasks("hog-once")[0]; ts.End != projections.Failed {
		t.Errorf("hog-once %+v: want failed", ts)
	}
	if n := len(c.events("hog-once", "TaskSubmitted")); n != 1 {
		t.Errorf("hog-once was submitted %d times; restart: never", n)
	}
}

// kill -9 of an agent: its tasks keep running, the master marks the machine
// down after K missed polls and places the tasks on other machines within
// poll x K + 5 s. The agent started again on its data dir adopts the old
// processes, and the master has it kill them: no task runs twice.
func TestLinkAgentKilledTasksMoveAndDuplicatesDie(t *testing.T) {
	c := newLinkCell(t, testLinkConfig())
	c.startAgent("m0", false)
	c.submit(c.spec("web", 2, "exec sleep 600"))
	before := c.runningOn("web", 2, 20*time.Second, func(m string) bool { return m == "m0" })
	c.startAgent("m1", false)
	c.startAgent("m2", false)
	testkit.Eventually(t, 10*time.Second, "m1 and m2 up", func() (bool, string) {
		return c.machineState("m1") == projections.MachineUp && c.machineState("m2") == projections.MachineUp, ""
	})
	old := map[int32]int{}
	for i, tv := range before {
		old[i] = int(tv.Pid)
	}

	killed := time.Now()
	c.killAgent("m0")
	bound := testPoll*testMisses + 5*time.Second
	c.runningOn("web", 2, bound+10*time.Second, func(m string) bool { return m == "m1" || m == "m2" })
	moved := time.Since(killed)
	var down time.Duration
	for _, e := range c.events("", "MachineDown") {
		down = e.OccurredAt.Sub(killed)
	}
	t.Logf("kill -9 of m0: machine down after %s, both tasks running elsewhere after %s (bound %s)", down, moved, bound)
	// The last answered poll started at most an interval before the kill
	// (less the time a poll takes, if the kill cut one short): K misses
	// cannot all have happened sooner than K-1 intervals after it.
	if down < testPoll*(testMisses-1)-100*time.Millisecond {
		t.Errorf("machine down %s after the kill: sooner than %d missed polls allow", down, testMisses)
	}
	if moved > bound {
		t.Errorf("tasks moved after %s, more than poll x K + 5 s = %s", moved, bound)
	}
	if lost := c.events("web", "TaskLost"); len(lost) != 2 {
		t.Errorf("%d TaskLost, want 2", len(lost))
	}
	procs := c.procs("web")
	for i, pid := range old {
		if !slices.Contains(procs[i], pid) {
			t.Fatalf("task %d's process %d died with its agent; tasks must outlive it", i, pid)
		}
	}

	// The agent comes back on its data dir: it adopts the old processes,
	// and the master has it stop them.
	back := time.Now()
	c.startAgent("m0", false)
	testkit.Eventually(t, 15*time.Second, "one process per task", func() (bool, string) {
		procs := c.procs("web")
		return len(procs[0]) == 1 && len(procs[1]) == 1, fmt.Sprint(procs)
	})
	t.Logf("m0 back: its duplicates killed after %s", time.Since(back))
	for i, pid := range old {
		if alive(pid) {
			t.Errorf("task %d's old process %d still runs", i, pid)
		}
	}
	now := c.runningOn("web", 2, 5*time.Second, func(m string) bool { return m == "m1" || m == "m2" })
	testkit.Eventually(t, 5*time.Second, "m0 up", func() (bool, string) { return c.machineState("m0") == projections.MachineUp, "" })
	if n := len(c.events("web", "TaskScheduled")); n != 4 {
		t.Errorf("%d TaskScheduled, want 4 (2 first, 2 after the loss): %v", n, now)
	}
}

// The master stopped for 30 s: agents keep every task running (same pids),
// and a new master on the same store finds them as they were: nothing lost,
// rescheduled or started twice. What happened meanwhile is recorded, once:
// a task that failed and was restarted in place by its agent while no master
// listened.
func TestLinkMasterStoppedTasksRunOn(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 30 s")
	}
	c := newLinkCell(t, testLinkConfig())
	c.startAgent("m0", false)
	c.startAgent("m1", false)
	testkit.Eventually(t, 10*time.Second, "two machines up", func() (bool, string) {
		return c.machineState("m0") == projections.MachineUp && c.machineState("m1") == projections.MachineUp, ""
	})
	c.submit(c.spec("svc", 4, "exec sleep 600"))
	dir := t.TempDir()
	failNow, failed := filepath.Join(dir, "fail-now"), filepath.Join(dir, "failed")
	blip := c.spec("blip", 1, fmt.Sprintf("while [ ! -f %s ]; do sleep 0.05; done; if [ ! -f %s ]; then touch %s; exit 3; fi; exec sleep 600", failNow, failed, failed))
	blip.Restart = &events.RestartPolicy{Mode: "on-failure", BackoffInitialMs: 100}
	c.submit(blip)
	before := c.runningOn("svc", 4, 20*time.Second, func(string) bool { return true })
	blipBefore := c.runningOn("blip", 1, 20*time.Second, func(string) bool { return true })[0]
	head, err := c.store.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	c.stopMaster()
	outage := 30 * time.Second
	deadline := time.Now().Add(outage)
	if err := os.WriteFile(failNow, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stayAliveThrough(t, deadline, before, nil, "the master was away")
	if _, err := os.Stat(failed); err != nil {
		t.Fatal("blip did not fail while the master was away")
	}

	lm := c.startMaster("master2")
	testkit.Eventually(t, 10*time.Second, "every machine polled by the new master", func() (bool, string) {
		return lm.stats.Polls.Load() >= 4, fmt.Sprint(lm.stats.Polls.Load(), " polls")
	})
	c.waitPolls(3)
	after := c.runningOn("svc", 4, 5*time.Second, func(string) bool { return true })
	for i, tv := range before {
		if a := after[i]; a.Pid != tv.Pid || a.Machine != tv.Machine {
			t.Errorf("task %d: was pid %d on %s, now pid %d on %s", i, tv.Pid, tv.Machine, a.Pid, a.Machine)
		}
	}
	procs := c.procs("svc")
	for i := int32(0); i < 4; i++ {
		if len(procs[i]) != 1 {
			t.Errorf("task %d runs as %v, want one process", i, procs[i])
		}
	}
	blipAfter := c.runningOn("blip", 1, 5*time.Second, func(m string) bool { return m == blipBefore.Machine })[0]
	if blipAfter.Pid == blipBefore.Pid || blipAfter.Restarts != 1 {
		t.Errorf("blip: pid %d -> %d, restarts %d: want a new pid and 1 restart", blipBefore.Pid, blipAfter.Pid, blipAfter.Restarts)
	}
	evs, types := checkNothingHappenedBut(t, c.store, head+1)
	t.Logf("master away %s; after its return the log has %d new events: %v", outage, len(evs), types)
}

// checkNothingHappenedBut: from position from on, the log records nothing
// of the tasks but blip's one failure and restart. It returns the events
// and their types.
func checkNothingHappenedBut(t *testing.T, store events.Store, from int64) ([]events.Event, []string) {
	t.Helper()
	evs, err := store.Read(t.Context(), from, 100000)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var blipFailed, blipStarted int
	for _, e := range evs {
		types = append(types, e.Type)
		if strings.HasPrefix(e.Stream, "task/alice/blip/") {
			switch p := e.Data.(type) {
			case *events.TaskFailed:
				blipFailed++
				if p.ExitCode != 3 || !p.WillRestart {
					t.Errorf("blip's failure recorded as %+v", p)
				}
			case *events.TaskStarted:
				blipStarted++
			default:
				t.Errorf("after the master's return: %s %s", e.Type, e.Stream)
			}
			continue
		}
		switch e.Type {
		case "TaskLost", "TaskSubmitted", "TaskScheduled", "TaskStarted", "TaskFailed", "MachineDown", "TaskKilled":
			t.Errorf("after the master's return: %s %s", e.Type, e.Stream)
		}
	}
	if blipFailed != 1 || blipStarted != 1 {
		t.Errorf("blip: %d TaskFailed and %d TaskStarted recorded after the master's return, want 1 and 1", blipFailed, blipStarted)
	}
	return evs, types
}

// A partitioned agent: the master cannot reach it, marks its machine down
// and places its tasks elsewhere, while the agent keeps running them. When
// the partition heals, the master has the agent kill those duplicates.
func TestLinkPartitionHealedDuplicatesDie(t *testing.T) {
	c := newLinkCell(t, testLinkConfig())
	c.startAgent("m0", true)
	c.submit(c.spec("api", 2, "exec sleep 600"))
	before := c.runningOn("api", 2, 20*time.Second, func(m string) bool { return m == "m0" })
	c.startAgent("m1", false)
	testkit.Eventually(t, 10*time.Second, "m1 up", func() (bool, string) { return c.machineState("m1") == projections.MachineUp, "" })

	cut := time.Now()
	c.proxies["m0"].setCut(true)
	bound := testPoll*testMisses + 5*time.Second
	c.runningOn("api", 2, bound+10*time.Second, func(m string) bool { return m == "m1" })
	t.Logf("m0 partitioned: tasks running on m1 after %s (bound %s)", time.Since(cut), bound)
	procs := c.procs("api")
	for i, tv := range before {
		if !slices.Contains(procs[i], int(tv.Pid)) {
			t.Fatalf("task %d's process %d on the partitioned machine died; it should run on until told", i, tv.Pid)
		}
	}

	healed := time.Now()
	c.proxies["m0"].setCut(false)
	testkit.Eventually(t, 15*time.Second, "one process per task", func() (bool, string) {
		procs := c.procs("api")
		return len(procs[0]) == 1 && len(procs[1]) == 1, fmt.Sprint(procs)
	})
	took := time.Since(healed)
	t.Logf("partition healed: duplicates killed after %s", took)
	// A poll or two, and the stop's grace: the link must not wait out a
	// reconnect backoff left from the partition.
	if max := 2*testPoll + time.Second + time.Second; took > max {
		t.Errorf("duplicates killed %s after the partition healed, more than %s", took, max)
	}
	for i, tv := range before {
		if alive(int(tv.Pid)) {
			t.Errorf("task %d's duplicate %d still runs", i, tv.Pid)
		}
	}
	c.runningOn("api", 2, 5*time.Second, func(m string) bool { return m == "m1" })
	testkit.Eventually(t, 5*time.Second, "m0 up", func() (bool, string) { return c.machineState("m0") == projections.MachineUp, "" })
}
