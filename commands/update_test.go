package commands

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"google.golang.org/protobuf/proto"
)

// runningJob submits a job of n tasks at priority 0 and runs them all.
func (c *cell) runningJob(name string, n int32, maxDisruptions int32) *events.JobSpec {
	c.t.Helper()
	sp := spec(name, 0, n)
	// Replacements count as healthy once they ran a millisecond: the
	// harness's clock moves a second a command.
	sp.Update = &events.UpdatePolicy{MaxDisruptions: maxDisruptions, MinHealthyTimeMs: 1}
	c.do(SubmitJob{Meta: alice, Spec: sp})
	c.settle()
	return withUser(sp, "alice")
}

// settle places every pending task round-robin and starts everything.
func (c *cell) settle() {
	c.t.Helper()
	names := []string{}
	for _, m := range c.s.SortedMachines() {
		names = append(names, m.Name)
	}
	var ps []Placement
	for i, t := range c.s.PendingTasks() {
		m := c.s.Machines[names[i%len(names)]]
		ps = append(ps, Placement{Task: t.Key(), Machine: m.Name, MachineVersion: m.Version})
	}
	if len(ps) > 0 {
		c.do(PlaceTasks{Meta: root, Placements: ps})
	}
	for _, n := range names {
		c.start(n)
	}
}

// A priority change needs no restart: every task moves in place.
func TestUpdatePriorityOnlyWithoutRestart(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	sp := c.runningJob("web", 2, 1)
	c.do(SubmitJob{Meta: alice, Spec: spec("other", 0, 1)})
	up := proto.Clone(sp).(*events.JobSpec)
	up.Priority = 1
	up.Labels = map[string]string{"team": "web", "v": "2"}
	evs := c.do(UpdateJob{Meta: alice, Spec: up})
	checkEvents(t, evs, []expect{
		{"job/alice/web", &events.JobUpdated{Spec: up, SpecVersion: 2, PreviousVersion: 1}},
		{"task/alice/web/0", &events.TaskUpdated{User: "alice", Job: "web", Index: 0, SpecVersion: 2, Running: true}},
		{"task/alice/web/1", &events.TaskUpdated{User: "alice", Job: "web", Index: 1, SpecVersion: 2, Running: true}},
		{"job/alice/web", &events.JobUpdateCommitted{User: "alice", Job: "web", SpecVersion: 2, Reason: CommittedInPlace}},
	})
	if events.TraceCodeOf(evs[1].Data) != events.TraceUpdateRunning {
		t.Fatal("trace code")
	}
	for _, tk := range c.s.Job("alice", "web").Tasks {
		if tk.State != projections.TaskRunning || tk.SpecVersion != 2 || tk.Priority() != 1 {
			t.Fatalf("%+v", tk)
		}
	}
	if got := c.s.SelectJobs(mustParseSelector("v=2"), ""); len(got) != 1 {
		t.Fatal("label index not updated")
	}
	// Nothing rolled, so no update stays open to block the next change:
	// commit and rollback have nothing to end.
	if j := c.s.Job("alice", "web"); j.Update != nil {
		t.Fatalf("an in-place change left update %+v open", j.Update)
	}
	c.refused(RollbackUpdate{Meta: alice, Job: "web"}, FailedPrecondition)
	c.refused(CommitUpdate{Meta: alice, Job: "web"}, FailedPrecondition)
	// Pushing the spec in force is nothing to do.
	if evs, err := Decide(c.s, UpdateJob{Meta: alice, Spec: up}, FixedClock(t0)); err != nil || len(evs) != 0 {
		t.Fatalf("%v %s", err, dump(evs))
	}
	// The next change is taken at once.
	c.do(UpdateJob{Meta: alice, Spec: sp})
	if j := c.s.Job("alice", "web"); j.Current != 3 || j.Update != nil || j.Tasks[0].Priority() != sp.Priority {
		t.Fatalf("the change back: version %d, update %+v", j.Current, j.Update)
	}
}

func TestUpdateRefused(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.quota("alice", "production", 4000, 8*gib)
	sp := c.runningJob("web", 2, 1)
	c.do(SubmitJob{Meta: alice, Spec: spec("done", 0, 1)})
	c.do(KillJob{Meta: alice, Name: "done"})
	after := proto.Clone(sp).(*events.JobSpec)
	after.StartAfter = "done"
	prod := proto.Clone(sp).(*events.JobSpec)
	prod.Priority, prod.TaskCount = 9, 5
	bad := proto.Clone(sp).(*events.JobSpec)
	bad.Resources.CpuMilli = -5
	for _, tc := range []struct {
		cmd   Command
		code  Code
		field string
	}{
		{UpdateJob{Meta: alice, Spec: spec("nope", 0, 1)}, NotFound, "name"},
		{UpdateJob{Meta: alice, Spec: spec("done", 0, 1)}, FailedPrecondition, ""},
		{UpdateJob{Meta: alice, Spec: after}, InvalidArgument, "start_after"},
		{UpdateJob{Meta: alice, Spec: prod}, ResourceExhausted, "resources"},
		{UpdateJob{Meta: alice, Spec: bad}, InvalidArgument, "resources.cpu"},
		{UpdateJob{Meta: alice}, InvalidArgument, "spec"},
		{UpdateJob{Meta: alice, Spec: sp, Selector: "a=b"}, InvalidArgument, "selector"},
		{UpdateJob{Meta: alice, Selector: "team=web"}, InvalidArgument, "change"},
		{UpdateJob{Meta: alice, Selector: "team=nothing", Change: JobChange{Priority: ptr(int32(1))}}, NotFound, "selector"},
		{UpdateJob{Meta: alice, Selector: "team=web", Change: JobChange{Priority: ptr(int32(42))}}, InvalidArgument, "jobs[alice/web].priority"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			if e := c.refused(tc.cmd, tc.code); e.Field != tc.field {
				t.Errorf("%+v: field %q, want %q (%v)", tc.cmd, e.Field, tc.field, e)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// A change that needs a restart rolls through the tasks and never has more
// than max_disruptions of them stopped at once, whatever the scheduler and
// the agents do in between.
func TestRollingUpdateNeverExceedsDisruptionLimit(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			c := newCell(t)
			c.machines(4)
			limit := int32(1 + rng.IntN(4))
			sp := c.runningJob("web", 12, limit)
			up := proto.Clone(sp).(*events.JobSpec)
			up.Args = []string{"--version=2"}
			evs := c.do(UpdateJob{Meta: alice, Spec: up})
			if n := count(evs, "TaskEvicted"); n != int(limit) || evs[0].Data.(*events.JobUpdated).RestartNeeded != true {
				t.Fatalf("first step evicted %d, want %d:\n%s", n, limit, dump(evs))
			}
			j := c.s.Job("alice", "web")
			updates, halts := int(limit), 0
			for step := 0; step < 3000 && !allOn(j, 2); step++ {
				var evs []events.Event
				switch rng.IntN(4) {
				case 0: // the scheduler places some pending tasks
					var ps []Placement
					for _, tk := range c.s.PendingTasks() {
						// As the scheduler would: where it fits (runs
						// stopping hold their room).
						if m := c.s.Machines[fmt.Sprintf("m%d", rng.IntN(4))]; rng.IntN(2) == 0 && tk.Limit.LessEq(m.Free(false)) {
							ps = append(ps, Placement{Task: tk.Key(), Machine: m.Name, MachineVersion: m.Version})
						}
					}
					if len(ps) > 0 {
						// Random machines may all be full: a pass whose
						// every proposal is refused places nothing.
						if out, err := Decide(c.s, PlaceTasks{Meta: root, Placements: ps}, FixedClock(c.now)); err == nil {
							c.apply(out)
							evs = out
						} else if CodeOf(err) != Aborted {
							t.Fatal(err)
						}
					}
				case 1: // an agent reports
					m := fmt.Sprintf("m%d", rng.IntN(4))
					report := c.running(m)
					if len(report) > 0 && rng.IntN(3) == 0 { // a replacement crashes before it runs
						report[0].State = AgentFailed
						report[0].ExitCode = 1
					}
					evs = c.do(ReportAgentState{Meta: root, Machine: m, Tasks: report})
				default: // the tick
					evs = c.do(RollingUpdateStep{Meta: root})
				}
				updates += count(evs, "TaskEvicted")
				if d := disruptions(j, c.now); d > int(limit) {
					t.Fatalf("step %d: %d tasks disrupted, limit %d\n%s", step, d, limit, dump(evs))
				}
				if u := j.Update; u != nil && u.Halted != "" {
					// A replacement failed before it served: the update
					// halted (the job is no service: no revert). Its owner
					// forces it through.
					halts++
					c.do(CommitUpdate{Meta: alice, Job: "web"})
				}
			}
			if !allOn(j, 2) {
				t.Fatal("the update did not complete")
			}
			// Tasks that failed and were rescheduled meanwhile came back on
			// the new spec without an update eviction.
			if updates > 12 {
				t.Fatalf("%d update evictions for 12 tasks", updates)
			}
		})
	}
}

func allOn(j *projections.Job, v int64) bool {
	for _, t := range j.Tasks {
		if t.State != projections.TaskDead && (t.SpecVersion != v || t.State != projections.TaskRunning) {
			return false
		}
	}
	return true
}

func count(evs []events.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func TestRollingUpdateStepsAndRollback(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	sp := c.runningJob("web", 4, 2)
	up := proto.Clone(sp).(*events.JobSpec)
	up.Resources = res(1500, gib)
	evs := c.do(UpdateJob{Meta: alice, Spec: up})
	checkEvents(t, evs, []expect{
		{"job/alice/web", &events.JobUpdated{Spec: up, SpecVersion: 2, PreviousVersion: 1, RestartNeeded: true}},
		{"task/alice/web/0", &events.TaskEvicted{User: "alice", Job: "web", Index: 0, Machine: "m0", Reason: "update", Message: "rolling update to spec version 2", Stopping: true}},
		{"task/alice/web/0", &events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 2, Reason: "updated"}},
		{"task/alice/web/1", &events.TaskEvicted{User: "alice", Job: "web", Index: 1, Machine: "m1", Reason: "update", Message: "rolling update to spec version 2", Stopping: true}},
		{"task/alice/web/1", &events.TaskSubmitted{User: "alice", Job: "web", Index: 1, SpecVersion: 2, Reason: "updated"}},
	})
	// Nothing more until a replacement runs.
	if evs, _ := Decide(c.s, RollingUpdateStep{Meta: alice, Job: "web"}, FixedClock(t0)); len(evs) != 0 {
		t.Fatalf("stepped past the limit:\n%s", dump(evs))
	}
	c.place("alice", "web", 0, "m0")
	c.start("m0")
	evs = c.do(RollingUpdateStep{Meta: alice, Job: "web"})
	if got := strings.Join(types(evs), " "); got != "TaskEvicted TaskSubmitted" || evs[0].Stream != "task/alice/web/2" {
		t.Fatalf("%s", dump(evs))
	}
	// Roll back: the spec of version 1 is in force again as version 3.
	// Task 0 runs version 2 and must restart; tasks 1 and 2 are pending
	// and change version in place; task 3 never left version 1's spec.
	evs = c.do(RollbackUpdate{Meta: alice, Job: "web"})
	checkEvents(t, evs, []expect{
		{"job/alice/web", &events.JobUpdateRolledBack{User: "alice", Job: "web", FromVersion: 2, ToVersion: 1, SpecVersion: 3}},
		{"task/alice/web/1", &events.TaskUpdated{User: "alice", Job: "web", Index: 1, SpecVersion: 3, RestartNeeded: true}},
		{"task/alice/web/2", &events.TaskUpdated{User: "alice", Job: "web", Index: 2, SpecVersion: 3, RestartNeeded: true}},
		{"task/alice/web/3", &events.TaskUpdated{User: "alice", Job: "web", Index: 3, SpecVersion: 3, Running: true}},
	})
	j := c.s.Job("alice", "web")
	if j.Current != 3 || j.Update != nil || !proto.Equal(j.Spec(), sp) || len(j.Versions) != 3 {
		t.Fatalf("current %d update %v", j.Current, j.Update)
	}
	// Tasks 1 and 2 are still being replaced: the limit of 2 holds task 0.
	if disruptions(j, c.now) != 2 {
		t.Fatal(disruptions(j, c.now))
	}
	c.settle()
	evs = c.do(RollingUpdateStep{Meta: root})
	checkEvents(t, evs, []expect{
		{"task/alice/web/0", &events.TaskEvicted{User: "alice", Job: "web", Index: 0, Machine: "m0", Reason: "update", Message: "rolling update to spec version 3", Stopping: true}},
		{"task/alice/web/0", &events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 3, Reason: "updated"}},
	})
	c.settle()
	if !allOn(j, 3) {
		t.Fatal("rollback did not complete")
	}
	if got := c.s.Charged[projections.UserBand{User: "alice", Band: projections.BestEffort}]; got.CPUMilli != 4000 {
		t.Fatalf("charged %v after rollback", got)
	}
}

func TestUpdateBySelectorAndScale(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	c.runningJob("web", 3, 1)
	api := spec("api", 0, 1)
	api.Labels = map[string]string{"team": "api"}
	c.do(SubmitJob{Meta: alice, Spec: api})
	c.do(SubmitJob{Meta: bob, Spec: spec("bobs", 0, 1)})
	evs := c.do(UpdateJob{Meta: alice, Selector: "team=web", Change: JobChange{TaskCount: ptr(int32(2)), SetLabels: map[string]string{"env": "prod"}}})
	checkEvents(t, evs, []expect{
		{"job/alice/web", &events.JobUpdated{Spec: c.s.Job("alice", "web").Spec(), SpecVersion: 2, PreviousVersion: 1}},
		{"task/alice/web/2", &events.TaskKilled{User: "alice", Job: "web", Index: 2, Machine: "m0", Reason: "scaled-down", Stopping: true}},
		{"task/alice/web/0", &events.TaskUpdated{User: "alice", Job: "web", Index: 0, SpecVersion: 2, Running: true}},
		{"task/alice/web/1", &events.TaskUpdated{User: "alice", Job: "web", Index: 1, SpecVersion: 2, Running: true}},
		{"job/alice/web", &events.JobUpdateCommitted{User: "alice", Job: "web", SpecVersion: 2, Reason: CommittedInPlace}},
	})
	if c.s.Job("bob", "bobs").Current != 1 {
		t.Fatal("alice's selector updated bob's job")
	}
	// In-place changes leave no update open: the next one needs no commit.
	c.do(UpdateJob{Meta: alice, Selector: "team=api", Change: JobChange{SetLabels: map[string]string{"env": "prod"}}})
	// web grows from 2 to 4 (index 2 comes back), api from 1 to 3.
	evs = c.do(UpdateJob{Meta: alice, Selector: "env=prod,team", Change: JobChange{TaskCount: ptr(int32(3)), RemoveLabels: []string{"env"}}})
	if got := strings.Join(types(evs), " "); got != "JobUpdated TaskSubmitted TaskSubmitted TaskUpdated JobUpdateCommitted JobUpdated TaskSubmitted TaskUpdated TaskUpdated JobUpdateCommitted" {
		t.Fatalf("%s", dump(evs))
	}
	if r := evs[1].Data.(*events.TaskSubmitted); r.Job != "api" || r.Index != 1 || r.Reason != "scaled-up" || r.SpecVersion != 3 {
		t.Fatalf("%v", r)
	}
	if r := evs[6].Data.(*events.TaskSubmitted); r.Job != "web" || r.Index != 2 || r.SpecVersion != 3 {
		t.Fatalf("%v", r)
	}
	if got := c.s.SelectJobs(mustParseSelector("env"), "alice"); len(got) != 0 {
		t.Fatal("label removed but still indexed")
	}
}

// disruptions counts a job's tasks that a rolling update stopped and whose
// replacements do not serve yet.
func disruptions(j *projections.Job, now time.Time) int {
	n := 0
	for _, t := range j.Tasks {
		if t != nil && t.Disrupted(now.UnixMicro()) {
			n++
		}
	}
	return n
}

// mustParseSelector is projections.ParseSelector for constants in tests.
func mustParseSelector(text string) projections.Selector {
	s, err := projections.ParseSelector(text)
	if err != nil {
		panic(err)
	}
	return s
}

// A task rolled onto the machine it ran on: a poll answered before the
// agent heard of the new run still shows the old version's process, then
// its stop. Neither is the new run's start or failure, so the roll goes on
// instead of halting on the stop of the version it replaces.
func TestStaleReportOfTheReplacedVersionIsNotTheNewRun(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	sp := c.runningJob("web", 2, 1)
	old := c.task("alice", "web", 0).Pid
	up := proto.Clone(sp).(*events.JobSpec)
	up.Args = []string{"--v2"}
	c.do(UpdateJob{Meta: alice, Spec: up})
	if tk := c.task("alice", "web", 0); tk.State != projections.TaskPending || tk.SpecVersion != 2 {
		t.Fatalf("the roll did not take task 0 first: %+v", tk)
	}
	c.place("alice", "web", 0, "m0")
	stopped := &events.TaskStopped{User: "alice", Job: "web", Index: 0, Machine: "m0", Submission: c.s.Machines["m0"].StoppingRuns()[0].Submission}
	for i, tc := range []struct {
		at   AgentTask
		want []events.Payload
	}{
		{AgentTask{Task: key("alice", "web", 0), State: AgentRunning, Pid: old, SpecVersion: 1}, nil},
		// Its end frees what it held, and that is all.
		{AgentTask{Task: key("alice", "web", 0), State: AgentKilled, ExitCode: -1, Signal: "SIGTERM", SpecVersion: 1}, []events.Payload{stopped}},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			report := c.running("m0")[1:] // task 1 as it is
			report = append(report, tc.at)
			evs := c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: report})
			if len(evs) != len(tc.want) || len(evs) > 0 && !proto.Equal(evs[0].Data, tc.want[0]) {
				t.Fatalf("a report of version 1's process (%v) wrote %s", tc.at.State, dump(evs))
			}
		})
	}
	if j := c.s.Job("alice", "web"); j.Update == nil || j.Update.Halted != "" {
		t.Fatalf("the update: %+v", j.Update)
	}
	report := append(c.running("m0")[1:], AgentTask{Task: key("alice", "web", 0), State: AgentRunning, Pid: old + 100, SpecVersion: 2})
	evs := c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: report})
	checkEvents(t, evs, []expect{
		{"task/alice/web/0", &events.TaskStarted{User: "alice", Job: "web", Index: 0, Machine: "m0", Pid: old + 100}},
	})
}

// A job killed and submitted again under its name, placed on the machine
// where its predecessor's process is being stopped: the agent's report of
// that stop (same task, same spec version 1) is not the new placement's.
func TestKilledReportOfThePredecessorIsNotALoss(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	sp := c.runningJob("batch", 1, 1)
	c.do(KillJob{Meta: alice, Name: "batch"})
	c.do(SubmitJob{Meta: alice, Spec: sp})
	c.place("alice", "batch", 0, "m0")
	stopped := AgentTask{Task: key("alice", "batch", 0), State: AgentKilled, ExitCode: -1, Signal: "SIGTERM", SpecVersion: 1}
	evs := c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: []AgentTask{stopped}})
	if len(evs) != 1 || evs[0].Type != "TaskStopped" {
		t.Fatalf("the predecessor's stop wrote %s; want only its TaskStopped", dump(evs))
	}
	if tk := c.task("alice", "batch", 0); tk.State != projections.TaskScheduled {
		t.Fatalf("the new placement: %+v", tk)
	}
}
