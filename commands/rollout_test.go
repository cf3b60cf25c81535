package commands

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"google.golang.org/protobuf/proto"
)

// serviceSpec is a checked service of n tasks: restart always, a health
// check on its port, one disruption at a time.
func serviceSpec(n int32) *events.JobSpec {
	sp := spec("web", 0, n)
	sp.Resources.Ports = 1
	sp.PortNames = []string{"http"}
	sp.HealthCheck = &events.HealthCheck{Path: "/", PortName: "http", PeriodMs: 1000, FailuresAllowed: 2}
	sp.Restart = &events.RestartPolicy{Mode: "always"}
	sp.Update = &events.UpdatePolicy{MaxDisruptions: 1}
	return sp
}

// servingService is a cell of two machines serving alice's service of n
// tasks, every task healthy; sp is its spec.
func servingService(t *testing.T, n int32) (c *cell, sp *events.JobSpec) {
	t.Helper()
	c = newCell(t)
	c.machines(2)
	sp = serviceSpec(n)
	c.do(SubmitJob{Meta: alice, Spec: sp})
	c.serve(func(int64) bool { return true })
	return c, sp
}

// newVersion is alice's sp with other arguments: a version that restarts
// its tasks.
func newVersion(sp *events.JobSpec, args ...string) *events.JobSpec {
	up := proto.Clone(withUser(sp, "alice")).(*events.JobSpec)
	up.Args = args
	return up
}

// report has the agent of machine report every task there running, with
// the health that health gives it (HealthUnknown: none yet).
func (c *cell) report(machine string, health func(*projections.Task) projections.Health) []events.Event {
	c.t.Helper()
	tasks := c.running(machine)
	for i := range tasks {
		t := c.s.Task(tasks[i].Task.User, tasks[i].Task.Job, tasks[i].Task.Index)
		if tasks[i].Health = health(t); tasks[i].Health == projections.HealthUnhealthy {
			tasks[i].HealthMessage = "GET /: connection refused"
		}
	}
	return c.do(ReportAgentState{Meta: root, Machine: machine, Tasks: tasks})
}

// serve places what is pending, starts it, and reports every task's health
// as good says of its spec version, on every machine.
func (c *cell) serve(good func(version int64) bool) []events.Event {
	c.t.Helper()
	c.settle()
	var evs []events.Event
	for _, m := range c.s.SortedMachines() {
		evs = append(evs, c.report(m.Name, func(t *projections.Task) projections.Health {
			if good(t.SpecVersion) {
				return projections.HealthHealthy
			}
			return projections.HealthUnhealthy
		})...)
	}
	return evs
}

func servingCount(j *projections.Job) int {
	n := 0
	for _, t := range j.Tasks {
		if t != nil && t.State == projections.TaskRunning && t.Health == projections.HealthHealthy {
			n++
		}
	}
	return n
}

// A bad version (its health check never passes; the agent kills it) halts
// the update at the first replacement and the service reverts by itself:
// never fewer than count - max_disruptions tasks serve.
func TestBadUpdateHaltsAndReverts(t *testing.T) {
	c, sp := servingService(t, 3)
	j := c.s.Job("alice", "web")
	if servingCount(j) != 3 {
		t.Fatalf("%d serving before the update", servingCount(j))
	}
	bad := newVersion(sp, "--broken")
	c.do(UpdateJob{Meta: alice, Spec: bad})
	good := func(v int64) bool { return v != 2 }
	// The replacement runs, fails its checks, and the agent kills it.
	for range 3 {
		c.serve(good)
		c.do(RollingUpdateStep{Meta: root})
		if n := servingCount(j); n < 2 {
			t.Fatalf("%d of 3 serving during the bad update", n)
		}
	}
	replaced := c.s.Task("alice", "web", 0)
	if replaced.SpecVersion != 2 || replaced.Health != projections.HealthUnhealthy {
		t.Fatalf("task 0: version %d health %v", replaced.SpecVersion, replaced.Health)
	}
	evs := c.do(ReportAgentState{Meta: root, Machine: replaced.Machine, Tasks: []AgentTask{{Task: replaced.Key(), SpecVersion: 2,
		State: AgentBackoff, ExitCode: -1, Signal: "SIGTERM", Message: "health check failed 3 times in a row: GET /: connection refused"}}})
	got := strings.Join(types(evs), " ")
	if !strings.Contains(got, "TaskFailed JobUpdateHalted JobUpdateRolledBack") {
		t.Fatalf("a failed replacement did not halt and revert the update:\n%s", dump(evs))
	}
	for _, e := range evs {
		if rb, ok := e.Data.(*events.JobUpdateRolledBack); ok && (rb.ToVersion != 1 || !strings.Contains(rb.Reason, "health check failed")) {
			t.Fatalf("revert %v", rb)
		}
	}
	if j.Update != nil || j.LastUpdate.How != "reverted" || !proto.Equal(j.Spec(), withUser(sp, "alice")) {
		t.Fatalf("after the revert: update %+v last %+v", j.Update, j.LastUpdate)
	}
	// Only the bad task is replaced again; the others never moved.
	for range 4 {
		c.serve(good)
		c.do(RollingUpdateStep{Meta: root})
		if n := servingCount(j); n < 2 {
			t.Fatalf("%d of 3 serving during the revert", n)
		}
	}
	if servingCount(j) != 3 || j.Behind() {
		t.Fatalf("the revert did not finish: %d serving", servingCount(j))
	}
}

// A good update rolls one task at a time, each waiting for the last to be
// healthy, and commits itself.
func TestGoodUpdateCommitsItself(t *testing.T) {
	c, sp := servingService(t, 3)
	j := c.s.Job("alice", "web")
	up := newVersion(sp, "--v2")
	c.do(UpdateJob{Meta: alice, Spec: up})
	// Running but not yet healthy: the roll waits.
	c.settle()
	if evs := c.do(RollingUpdateStep{Meta: root}); count(evs, "TaskEvicted") != 0 {
		t.Fatalf("rolled past a replacement that is not healthy yet:\n%s", dump(evs))
	}
	var committed *events.JobUpdateCommitted
	for step := 0; step < 10 && committed == nil; step++ {
		c.serve(func(int64) bool { return true })
		for _, e := range c.do(RollingUpdateStep{Meta: root}) {
			if x, ok := e.Data.(*events.JobUpdateCommitted); ok {
				committed = x
			}
		}
		if r := j.Rollout(c.now.UnixMicro()); r.Disrupted > 1 {
			t.Fatalf("%d disrupted", r.Disrupted)
		}
	}
	if committed == nil || committed.SpecVersion != 2 || !strings.Contains(committed.Reason, "healthy") {
		t.Fatalf("the update did not commit itself: %v, update %+v", committed, j.Update)
	}
	if j.LastUpdate.How != "committed" || servingCount(j) != 3 || j.Behind() {
		t.Fatalf("after the commit: %+v, %d serving", j.LastUpdate, servingCount(j))
	}
}

// Canaries roll first and wait for a promote; auto_commit off waits for a
// commit once every task is healthy.
func TestCanaryWaitsForPromote(t *testing.T) {
	c, sp := servingService(t, 4)
	j := c.s.Job("alice", "web")
	up := newVersion(sp, "--v2")
	up.Update.Canary, up.Update.AutoCommit = 1, proto.Bool(false)
	c.do(UpdateJob{Meta: alice, Spec: up})
	for range 5 {
		c.serve(func(int64) bool { return true })
		c.do(RollingUpdateStep{Meta: root})
	}
	r := j.Rollout(c.now.UnixMicro())
	if r.Settled != 1 || !r.CanariesSettled || j.Update == nil {
		t.Fatalf("canary: %+v, update %+v", r, j.Update)
	}
	// A long wait for the promote is no failure.
	c.now = c.now.Add(time.Hour)
	if evs := c.do(RollingUpdateStep{Meta: root}); len(evs) != 0 {
		t.Fatalf("a canary waiting for its promote moved:\n%s", dump(evs))
	}
	c.do(PromoteUpdate{Meta: alice, Job: "web"})
	c.refused(PromoteUpdate{Meta: alice, Job: "web"}, FailedPrecondition)
	for range 10 {
		c.serve(func(int64) bool { return true })
		c.do(RollingUpdateStep{Meta: root})
	}
	if r := j.Rollout(c.now.UnixMicro()); !r.Complete() || j.Update == nil {
		t.Fatalf("after the promote: %+v, update %+v (auto_commit is off: it stays open)", r, j.Update)
	}
	c.do(CommitUpdate{Meta: alice, Job: "web"})
	if j.Update != nil {
		t.Fatal("commit")
	}
}

// An update that makes no progress by its deadline fails; without
// auto_revert it halts, rolls nothing more, and a commit forces it through.
func TestProgressDeadlineHalts(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	sp := serviceSpec(3)
	sp.Update.AutoRevert = proto.Bool(false)
	sp.Update.ProgressDeadlineMs = 60_000
	c.do(SubmitJob{Meta: alice, Spec: sp})
	c.serve(func(int64) bool { return true })
	j := c.s.Job("alice", "web")
	up := newVersion(sp, "--slow")
	c.do(UpdateJob{Meta: alice, Spec: up})
	c.settle() // runs, never turns healthy, never fails
	c.now = c.now.Add(61 * time.Second)
	evs := c.do(RollingUpdateStep{Meta: root})
	if got := strings.Join(types(evs), " "); got != "JobUpdateHalted" || !strings.Contains(j.Update.Halted, "progress_deadline") {
		t.Fatalf("%s; update %+v", dump(evs), j.Update)
	}
	c.serve(func(v int64) bool { return v == 1 })
	if evs := c.do(RollingUpdateStep{Meta: root}); count(evs, "TaskEvicted") != 0 {
		t.Fatalf("a halted update rolled on:\n%s", dump(evs))
	}
	c.refused(PromoteUpdate{Meta: alice, Job: "web"}, FailedPrecondition)
	// A commit forces it through: the roll goes on once the replacement
	// that does not serve yet does.
	c.do(CommitUpdate{Meta: alice, Job: "web"})
	c.serve(func(int64) bool { return true })
	if evs := c.do(RollingUpdateStep{Meta: root}); count(evs, "TaskEvicted") != 1 {
		t.Fatalf("a commit of a halted update did not carry the roll on:\n%s", dump(evs))
	}
}

// A task without a health check counts as disrupted until it has run
// min_healthy_time.
func TestMinHealthyTimeGatesUnchecked(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	sp := spec("svc", 0, 2)
	sp.Restart = &events.RestartPolicy{Mode: "always"}
	sp.Update = &events.UpdatePolicy{MinHealthyTimeMs: 30_000}
	c.do(SubmitJob{Meta: alice, Spec: sp})
	c.settle()
	up := newVersion(sp, "--v2")
	c.do(UpdateJob{Meta: alice, Spec: up})
	c.settle()
	c.now = c.now.Add(20 * time.Second)
	if evs := c.do(RollingUpdateStep{Meta: root}); count(evs, "TaskEvicted") != 0 {
		t.Fatalf("rolled on 20 s into a 30 s min_healthy_time:\n%s", dump(evs))
	}
	c.now = c.now.Add(15 * time.Second)
	if evs := c.do(RollingUpdateStep{Meta: root}); count(evs, "TaskEvicted") != 1 {
		t.Fatalf("did not roll on after min_healthy_time:\n%s", dump(evs))
	}
}

// A revert pushes an earlier version's spec again as a new update.
func TestRevertToAnEarlierVersion(t *testing.T) {
	c, sp := servingService(t, 2)
	up := newVersion(sp, "--v2")
	c.do(UpdateJob{Meta: alice, Spec: up})
	c.do(CommitUpdate{Meta: alice, Job: "web"})
	evs := c.do(UpdateJob{Meta: alice, Job: "web", RevertTo: 1})
	u, ok := evs[0].Data.(*events.JobUpdated)
	if !ok || u.SpecVersion != 3 || !proto.Equal(u.Spec, withUser(sp, "alice")) || !u.RestartNeeded {
		t.Fatalf("%s", dump(evs))
	}
	c.refused(UpdateJob{Meta: alice, Job: "web", RevertTo: 2}, FailedPrecondition) // an update is open
	c.do(CommitUpdate{Meta: alice, Job: "web"})
	if e := c.refused(UpdateJob{Meta: alice, Job: "web", RevertTo: 9}, NotFound); e.Field != "revert_to" {
		t.Fatal(e)
	}
	c.refused(UpdateJob{Meta: bob, User: "alice", Job: "web", RevertTo: 1}, PermissionDenied)
	c.refused(UpdateJob{Meta: alice, Job: "web", RevertTo: 1, Spec: sp}, InvalidArgument)
}
