package commands

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

func TestReportAgentState(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	svc := spec("svc", 0, 4)
	svc.Restart = &events.RestartPolicy{Mode: "on-failure", MaxRestarts: 1}
	c.do(SubmitJob{Meta: alice, Spec: svc})
	for i := int32(0); i < 4; i++ {
		c.place("alice", "svc", i, "m0")
	}
	// Started; one task still starting is left alone.
	evs := c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: []AgentTask{
		{Task: key("alice", "svc", 0), State: AgentRunning, Pid: 100},
		{Task: key("alice", "svc", 1), State: AgentRunning, Pid: 101},
		{Task: key("alice", "svc", 2), State: AgentRunning, Pid: 102},
		{Task: key("alice", "svc", 3), State: AgentStarting},
		{Task: key("bob", "ghost", 0), State: AgentRunning, Pid: 9}, // not ours
	}})
	checkEvents(t, evs, []expect{
		{"task/alice/svc/0", &events.TaskStarted{User: "alice", Job: "svc", Index: 0, Machine: "m0", Pid: 100}},
		{"task/alice/svc/1", &events.TaskStarted{User: "alice", Job: "svc", Index: 1, Machine: "m0", Pid: 101}},
		{"task/alice/svc/2", &events.TaskStarted{User: "alice", Job: "svc", Index: 2, Machine: "m0", Pid: 102}},
	})
	v := c.s.Machines["m0"].Version
	// Task 0 restarted in place (a new pid), 1 failed for good, 2 was
	// OOM-killed (a failure of its own, as any other), 3 is still
	// starting. 1 and 2 go back after the policy's first backoff (1 s).
	backoff := c.now.Add(time.Second).UnixMicro()
	evs = c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: []AgentTask{
		{Task: key("alice", "svc", 0), State: AgentRunning, Pid: 200, ExitCode: 1, Restarts: 1},
		{Task: key("alice", "svc", 1), State: AgentFailed, ExitCode: 2, Message: "panic"},
		{Task: key("alice", "svc", 2), State: AgentEvicted, Reason: "oom", Message: "over 1GiB"},
		{Task: key("alice", "svc", 3), State: AgentStarting},
	}})
	checkEvents(t, evs, []expect{
		{"task/alice/svc/0", &events.TaskFailed{User: "alice", Job: "svc", Index: 0, Machine: "m0", ExitCode: 1, Restarts: 1, WillRestart: true}},
		{"task/alice/svc/0", &events.TaskStarted{User: "alice", Job: "svc", Index: 0, Machine: "m0", Restarts: 1, Pid: 200}},
		{"task/alice/svc/1", &events.TaskFailed{User: "alice", Job: "svc", Index: 1, Machine: "m0", ExitCode: 2, Message: "panic"}},
		{"task/alice/svc/1", &events.TaskSubmitted{User: "alice", Job: "svc", Index: 1, SpecVersion: 1, Reason: "rescheduled", NotBeforeUs: backoff, FailStreak: 1}},
		{"task/alice/svc/2", &events.TaskFailed{User: "alice", Job: "svc", Index: 2, Machine: "m0", Signal: "SIGKILL", Message: "OOMKilled: over 1GiB"}},
		{"task/alice/svc/2", &events.TaskSubmitted{User: "alice", Job: "svc", Index: 2, SpecVersion: 1, Reason: "rescheduled", NotBeforeUs: backoff, FailStreak: 1}},
	})
	if tk := c.task("alice", "svc", 0); tk.State != projections.TaskRunning || tk.Restarts != 1 || tk.ExitCode != 1 || c.s.Machines["m0"].Version == v {
		t.Fatalf("%+v", tk)
	}
	// Task 1 failed again: max_restarts 1 is spent, so it stays dead.
	c.place("alice", "svc", 1, "m1")
	c.start("m1")
	evs = c.do(ReportAgentState{Meta: root, Machine: "m1", Tasks: []AgentTask{{Task: key("alice", "svc", 1), State: AgentFailed, ExitCode: 3}}})
	if len(evs) != 1 || c.task("alice", "svc", 1).End != projections.Failed {
		t.Fatalf("%s", dump(evs))
	}
	// Task 3 vanished while running: lost, and pending again.
	c.start("m0")
	evs = c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: []AgentTask{{Task: key("alice", "svc", 0), State: AgentRunning, Pid: 200}}})
	checkEvents(t, evs, []expect{
		{"task/alice/svc/3", &events.TaskLost{User: "alice", Job: "svc", Index: 3, Machine: "m0", Reason: "the agent no longer reports it"}},
		{"task/alice/svc/3", &events.TaskSubmitted{User: "alice", Job: "svc", Index: 3, SpecVersion: 1, Reason: "rescheduled"}},
	})
	c.refused(ReportAgentState{Meta: root, Machine: "m9"}, NotFound)
}

// oneRunning is a cell of one machine, m0, running alice's one-task job.
func oneRunning(t *testing.T, job string) *cell {
	c := newCell(t)
	c.machines(1)
	c.do(SubmitJob{Meta: alice, Spec: spec(job, 0, 1)})
	c.place("alice", job, 0, "m0")
	c.start("m0")
	return c
}

func TestMachineDownAndUp(t *testing.T) {
	c := oneRunning(t, "web")
	evs := c.do(ReportAgentState{Meta: root, Machine: "m0", Unreachable: true, MissedPolls: 3})
	checkEvents(t, evs, []expect{
		{"machine/m0", &events.MachineDown{Machine: "m0", Reason: "no answer to 3 polls", MissedPolls: 3}},
		{"task/alice/web/0", &events.TaskLost{User: "alice", Job: "web", Index: 0, Machine: "m0", Reason: "machine down"}},
		{"task/alice/web/0", &events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1, Reason: "rescheduled"}},
	})
	if evs, err := Decide(c.s, ReportAgentState{Meta: root, Machine: "m0", Unreachable: true, MissedPolls: 4}, FixedClock(t0)); err != nil || len(evs) != 0 {
		t.Fatal("a down machine went down again")
	}
	e := c.refused(PlaceTasks{Meta: root, Placements: []Placement{{Task: key("alice", "web", 0), Machine: "m0", MachineVersion: c.s.Machines["m0"].Version}}}, Aborted)
	if !strings.Contains(e.Error(), "machine m0 is down") {
		t.Fatal(e)
	}
	checkEvents(t, c.do(ReportAgentState{Meta: root, Machine: "m0"}), []expect{{"machine/m0", &events.MachineUp{Machine: "m0"}}})
}

func TestUsageAndReservations(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.do(SubmitJob{Meta: alice, Spec: spec("web", 0, 2)}) // 1 core, 1GiB each
	c.place("alice", "web", 0, "m0")
	c.place("alice", "web", 1, "m0")
	c.start("m0")
	set := c.task("alice", "web", 0).ReservationUS
	usage := []*events.TaskUsage{
		{User: "alice", Job: "web", Index: 0, MemoryBytes: 100 << 20, MemoryMaxBytes: 200 << 20}, // 200m
		{User: "alice", Job: "web", Index: 1, MemoryBytes: gib, MemoryMaxBytes: gib},             // at its limit
	}
	// A window runs from where the machine's last one ended to now (the
	// first from the tasks' start): the agent's CPU figures cover it.
	cores := []float64{0.2, 1}
	last := c.now
	report := func() []events.Event {
		for i, u := range usage {
			u.CpuCoreSeconds = cores[i] * c.now.Sub(last).Seconds()
		}
		last = c.now
		return c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: c.running("m0"), Usage: &UsageWindow{Tasks: usage}})
	}
	// In its first 300 s a task's reservation stays at its limit: start-up
	// transients are not what it will use (Borg §5.5).
	c.now = c.now.Add(4 * time.Minute)
	if evs := report(); len(evs) != 1 {
		t.Fatalf("within the start-up period: %v, want only the usage", evs)
	}
	// Twenty minutes after it was set at the limit, two half-lives: task 0's
	// estimate has closed three quarters of the gap to 200m*1.15 and
	// 230MiB; task 1 uses its limit, so its reservation does not move.
	c.now = time.UnixMicro(set).Add(20 * time.Minute)
	evs := report()
	wantMem := int64(math.Ceil(float64(230<<20) + float64(gib-230<<20)/4))
	if len(evs) != 2 {
		t.Fatalf("events %v", evs)
	}
	est := evs[1].Data.(*events.ReservationEstimated)
	if len(est.Tasks) != 1 || est.Tasks[0].Index != 0 || est.Tasks[0].Reservation.CpuMilli != 423 || est.Tasks[0].Reservation.MemoryBytes != wantMem {
		t.Fatalf("estimated %v, want task 0 at 423m and %d bytes", est, wantMem)
	}
	tk := c.task("alice", "web", 0)
	if tk.Reservation.CPUMilli != 423 || c.s.Machines["m0"].Reserved.CPUMilli != 1423 || tk.ReservationUS != evs[1].OccurredAt.UnixMicro() {
		t.Fatalf("reservation %v set at %d, machine %v", tk.Reservation, tk.ReservationUS, c.s.Machines["m0"].Reserved)
	}
	// A non-prod task may now use what task 0 does not.
	if free := c.s.Machines["m0"].Free(false); free.CPUMilli != 8000-1423 {
		t.Fatal(free)
	}
	// Usage back at the limit: the estimate rises at once.
	cores[0], usage[0].MemoryMaxBytes = 1, gib
	c.now = c.now.Add(time.Minute)
	evs = report()
	if est := evs[len(evs)-1].Data.(*events.ReservationEstimated); est.Tasks[0].Reservation.CpuMilli != 1000 {
		t.Fatalf("after usage rose: %v, want the limit at once", est)
	}
}

// A task's failures of its own count against its restart policy across
// reschedules, and each reschedule waits the policy's backoff, doubling
// with each failure in a row; a run that was healthy for a while starts
// the doubling over.
func TestFailuresBackOffAcrossReschedules(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	sp := spec("crash", 0, 1)
	sp.Restart = &events.RestartPolicy{Mode: "on-failure", MaxRestarts: 3, BackoffInitialMs: 1000, BackoffMaxMs: 4000}
	c.do(SubmitJob{Meta: alice, Spec: sp})
	fail := func(machine string) *events.TaskSubmitted {
		t.Helper()
		c.place("alice", "crash", 0, machine)
		c.start(machine)
		at := c.now
		evs := c.do(ReportAgentState{Meta: root, Machine: machine, Tasks: []AgentTask{{Task: key("alice", "crash", 0), State: AgentFailed, ExitCode: 1}}})
		for _, e := range evs {
			if s, ok := e.Data.(*events.TaskSubmitted); ok {
				if got := time.UnixMicro(s.NotBeforeUs).Sub(at); got != sp.Restart.Backoff(s.FailStreak) {
					t.Fatalf("resubmission %d waits %s, want %s", s.FailStreak, got, sp.Restart.Backoff(s.FailStreak))
				}
				return s
			}
		}
		return nil
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		s := fail([]string{"m0", "m1"}[i%2])
		if s == nil || s.FailStreak != int32(i+1) || sp.Restart.Backoff(s.FailStreak) != want {
			t.Fatalf("failure %d: resubmitted %+v, want streak %d waiting %s", i+1, s, i+1, want)
		}
		if tk := c.task("alice", "crash", 0); tk.State != projections.TaskPending || tk.NotBeforeUS != s.NotBeforeUs || !strings.Contains(tk.LastFailure(), "exit 1") {
			t.Fatalf("task %+v after failure %d", tk, i+1)
		}
	}
	// The fourth failure spends max_restarts 3: dead, not resubmitted.
	if s := fail("m1"); s != nil {
		t.Fatalf("resubmitted past max_restarts: %+v", s)
	}
	if tk := c.task("alice", "crash", 0); tk.State != projections.TaskDead || tk.End != projections.Failed || tk.Restarts != 3 {
		t.Fatalf("after max_restarts: %+v", tk)
	}

	// A run healthy for twice the longest backoff starts the doubling over.
	sp2 := spec("steady", 0, 1)
	sp2.Restart = &events.RestartPolicy{Mode: "always", BackoffInitialMs: 1000, BackoffMaxMs: 4000}
	c.do(SubmitJob{Meta: alice, Spec: sp2})
	run := func(machine string, ranFor time.Duration) *events.TaskSubmitted {
		t.Helper()
		c.place("alice", "steady", 0, machine)
		c.start(machine)
		c.now = c.now.Add(ranFor)
		evs := c.do(ReportAgentState{Meta: root, Machine: machine, Tasks: []AgentTask{{Task: key("alice", "steady", 0), State: AgentFailed, Signal: "SIGSEGV"}}})
		for _, e := range evs {
			if s, ok := e.Data.(*events.TaskSubmitted); ok {
				return s
			}
		}
		t.Fatal("not resubmitted")
		return nil
	}
	if s := run("m0", 0); s.FailStreak != 1 {
		t.Fatalf("first failure: streak %d", s.FailStreak)
	}
	if s := run("m1", 0); s.FailStreak != 2 {
		t.Fatalf("second failure: streak %d", s.FailStreak)
	}
	if s := run("m0", 8*time.Second); s.FailStreak != 1 {
		t.Fatalf("a failure after 8 s healthy: streak %d, want 1", s.FailStreak)
	}
}

// A job killed and submitted again under its name, its task placed on the
// machine where the old run still goes (the stop not yet heard): the old
// run, at the same spec version, is not the new placement's start; the
// new run's own report is.
func TestReportOfAnEarlierSubmissionIsNotTheNewRun(t *testing.T) {
	c := oneRunning(t, "svc")
	old := c.task("alice", "svc", 0).Seq
	c.do(KillJob{Meta: alice, Name: "svc"})
	c.do(SubmitJob{Meta: alice, Spec: spec("svc", 0, 1)})
	c.place("alice", "svc", 0, "m0")
	tk := c.task("alice", "svc", 0)
	if tk.Seq == old || tk.SpecVersion != 1 {
		t.Fatalf("the new submission: seq %d (old %d), spec version %d", tk.Seq, old, tk.SpecVersion)
	}
	evs := c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: []AgentTask{
		{Task: key("alice", "svc", 0), SpecVersion: 1, Submission: old, State: AgentRunning, Pid: 100},
	}})
	if len(evs) != 0 || c.task("alice", "svc", 0).State != projections.TaskScheduled {
		t.Fatalf("the old run taken for the new one: %v", evs)
	}
	evs = c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: []AgentTask{
		{Task: key("alice", "svc", 0), SpecVersion: 1, Submission: tk.Seq, State: AgentRunning, Pid: 200},
	}})
	// The agent runs the new submission: the old run is gone, and what it
	// held is free.
	checkEvents(t, evs, []expect{
		{"task/alice/svc/0", &events.TaskStarted{User: "alice", Job: "svc", Index: 0, Machine: "m0", Pid: 200}},
		{"task/alice/svc/0", &events.TaskStopped{User: "alice", Job: "svc", Index: 0, Machine: "m0", Submission: old}},
	})
}

// A start the agent retries in place (no such file) is a failure each
// time: counted once per run, whatever the number of polls that say so.
func TestStartFailuresInPlaceAreFailures(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.do(SubmitJob{Meta: alice, Spec: spec("bad", 0, 1)})
	c.place("alice", "bad", 0, "m0")
	msg := `start-failed: spec.command "/does/not/exist": stat /does/not/exist: no such file or directory`
	backoff := func(restarts int32) ReportAgentState {
		return ReportAgentState{Meta: root, Machine: "m0", Tasks: []AgentTask{{Task: key("alice", "bad", 0), State: AgentBackoff,
			ExitCode: -1, Reason: "start-failed", Message: msg, Restarts: restarts}}}
	}
	failed := func(restarts int32) expect {
		return expect{"task/alice/bad/0", &events.TaskFailed{User: "alice", Job: "bad", Index: 0, Machine: "m0", ExitCode: -1,
			Message: msg, Restarts: restarts, WillRestart: true}}
	}
	checkEvents(t, c.do(backoff(0)), []expect{failed(0)})
	// The next poll says the same: nothing new.
	if evs := c.do(backoff(0)); len(evs) != 0 {
		t.Fatalf("the same failure recorded twice: %s", dump(evs))
	}
	checkEvents(t, c.do(backoff(1)), []expect{failed(1)})
	tk := c.task("alice", "bad", 0)
	if tk.State != projections.TaskScheduled || tk.Restarts != 2 || !strings.Contains(tk.Status(c.now.UnixMicro()), "no such file") {
		t.Fatalf("state %s, restarts %d, status %q", tk.State, tk.Restarts, tk.Status(c.now.UnixMicro()))
	}
}

// A killed task's process has its kill_timeout to exit: until its agent
// reports it gone, the task is stopping and its machine holds its
// resources, so nothing else is placed in them; the report of its end
// frees them (TaskStopped), as does the machine going down.
func TestKilledTaskHoldsItsResourcesUntilItsProcessIsGone(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	big := spec("big", 0, 1)
	big.Resources = res(6000, 8*gib)
	c.do(SubmitJob{Meta: alice, Spec: big})
	c.place("alice", "big", 0, "m0")
	c.start("m0")
	run := c.task("alice", "big", 0).Seq
	c.do(KillJob{Meta: alice, Name: "big"})
	tk := c.task("alice", "big", 0)
	if tk.StoppingOn != "m0" || !strings.HasPrefix(tk.Status(c.now.UnixMicro()), "stopping (killed") {
		t.Fatalf("killed task: stopping on %q, status %q", tk.StoppingOn, tk.Status(c.now.UnixMicro()))
	}
	// A checkpoint keeps the hold: decoded, the machine's sums are the same.
	if err := c.s.CheckIndexes(); err != nil {
		t.Fatal(err)
	}
	next := spec("next", 0, 1)
	next.Resources = res(4000, gib)
	c.do(SubmitJob{Meta: alice, Spec: next})
	m := c.s.Machines["m0"]
	if e := c.refused(PlaceTasks{Meta: root, Placements: []Placement{{Task: key("alice", "next", 0), Machine: "m0", MachineVersion: m.Version}}}, Aborted); !strings.Contains(e.Error(), "does not fit") {
		t.Fatalf("placed into the room a stopping task holds: %v", e)
	}
	// The agent still stops it (SIGTERM sent, the grace running): held.
	if evs := c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: []AgentTask{
		{Task: key("alice", "big", 0), Submission: run, State: AgentStarting},
	}}); len(evs) != 0 {
		t.Fatalf("a report of the process still stopping wrote %s", dump(evs))
	}
	// It exited: the agent keeps its record, ended.
	checkEvents(t, c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: []AgentTask{
		{Task: key("alice", "big", 0), Submission: run, State: AgentStarting, Ended: true},
	}}), []expect{{"task/alice/big/0", &events.TaskStopped{User: "alice", Job: "big", Index: 0, Machine: "m0", Submission: run}}})
	if tk.StoppingOn != "" || tk.Status(c.now.UnixMicro()) != "dead (killed: job killed)" || !c.s.Machines["m0"].Limits.IsZero() {
		t.Fatalf("after its exit: stopping on %q, status %q, machine limits %v", tk.StoppingOn, tk.Status(c.now.UnixMicro()), c.s.Machines["m0"].Limits)
	}
	c.place("alice", "next", 0, "m0")

	// A machine that goes down frees what its stopping runs held: the
	// master cannot wait for news from it.
	c.start("m0")
	c.do(KillTask{Meta: alice, Job: "next", Index: 0})
	if c.s.Machines["m0"].Limits.IsZero() {
		t.Fatal("the killed task holds nothing")
	}
	c.do(ReportAgentState{Meta: root, Machine: "m0", Unreachable: true, MissedPolls: 3})
	if l := c.s.Machines["m0"].Limits; !l.IsZero() || c.task("alice", "next", 0).StoppingOn != "" {
		t.Fatalf("a down machine still holds %v", l)
	}
	if err := c.s.CheckIndexes(); err != nil {
		t.Fatal(err)
	}
}
