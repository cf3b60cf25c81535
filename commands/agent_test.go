package commands

import (
	"strings"
	"testing"

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
	report := ReportAgentState{Meta: root, Machine: "m0", Tasks: []AgentTask{{Task: key("bob", "ghost", 0), State: AgentRunning}}}
	if o := report.Orphans(c.s); len(o) != 1 || o[0] != key("bob", "ghost", 0) {
		t.Fatalf("orphans %v", o)
	}
	v := c.s.Machines["m0"].Version
	// Task 0 restarted in place (a new pid), 1 failed for good, 2 was
	// OOM-killed, 3 is still starting.
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
		{"task/alice/svc/1", &events.TaskSubmitted{User: "alice", Job: "svc", Index: 1, SpecVersion: 1, Reason: "rescheduled"}},
		{"task/alice/svc/2", &events.TaskEvicted{User: "alice", Job: "svc", Index: 2, Machine: "m0", Reason: "oom", Message: "over 1GiB"}},
		{"task/alice/svc/2", &events.TaskSubmitted{User: "alice", Job: "svc", Index: 2, SpecVersion: 1, Reason: "rescheduled"}},
	})
	if tk := c.task("alice", "svc", 0); tk.State != projections.TaskRunning || tk.Restarts != 1 || tk.ExitCode != 1 || c.s.Machines["m0"].Version == v {
		t.Fatalf("%+v", tk)
	}
	// Task 1 failed again: max_restarts 1 is spent, so it stays dead.
	c.place("alice", "svc", 1, "m1")
	c.start("m1")
	evs = c.do(ReportAgentState{Meta: root, Machine: "m1", Tasks: []AgentTask{{Task: key("alice", "svc", 1), State: AgentFailed, ExitCode: 3}}})
	if len(evs) != 1 || c.task("alice", "svc", 1).How != projections.Failed {
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

func TestMachineDownAndUp(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.do(SubmitJob{Meta: alice, Spec: spec("web", 0, 1)})
	c.place("alice", "web", 0, "m0")
	c.start("m0")
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
	usage := []*events.TaskUsage{
		{User: "alice", Job: "web", Index: 0, CpuCoreSeconds: 60, MemoryBytes: 100 << 20, MemoryMaxBytes: 200 << 20}, // 200m over 5 minutes
		{User: "alice", Job: "web", Index: 1, CpuCoreSeconds: 300, MemoryBytes: gib, MemoryMaxBytes: gib},            // at its limit
	}
	const start, end = int64(1_000_000_000_000), int64(1_000_300_000_000)
	evs := c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: c.running("m0"), Usage: []UsageWindow{{StartUS: start, EndUS: end, Tasks: usage}}})
	// Task 0's estimate decays a quarter of the way toward 200m*1.15 and
	// 230MiB; task 1 uses its limit, so its reservation does not move.
	checkEvents(t, evs, []expect{
		{"machine/m0", &events.UsageReported{Machine: "m0", WindowStartUs: start, WindowEndUs: end, Tasks: usage}},
		{"machine/m0", &events.ReservationEstimated{Machine: "m0", Tasks: []*events.TaskReservation{
			{User: "alice", Job: "web", Index: 0, Reservation: &events.Resources{CpuMilli: 1000 - (1000-230)/4, MemoryBytes: gib - (gib-230<<20)/4}},
		}}},
	})
	tk := c.task("alice", "web", 0)
	if tk.Usage.CPUCoreSeconds != 60 || tk.Reservation.CPUMilli != 808 || c.s.Machines["m0"].Reserved.CPUMilli != 1808 {
		t.Fatalf("usage %+v reservation %v machine %v", tk.Usage, tk.Reservation, c.s.Machines["m0"].Reserved)
	}
	// A non-prod task may now use what task 0 does not.
	if free := c.s.Machines["m0"].Free(false); free.CPUMilli != 8000-1808 {
		t.Fatal(free)
	}
}
