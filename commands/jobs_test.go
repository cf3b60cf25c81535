package commands

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"google.golang.org/protobuf/proto"
)

func withUser(s *events.JobSpec, user string) *events.JobSpec {
	c := proto.Clone(s).(*events.JobSpec)
	c.User = user
	return c
}

func TestSubmitJobAccepted(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	c.quota("alice", "production", 4000, 8*gib)
	sp := spec("web", 9, 2)
	sp.User = "mallory" // ignored: the job belongs to the caller
	decidedAt := c.now
	evs := c.do(SubmitJob{Meta: alice, Spec: sp})
	checkEvents(t, evs, []expect{
		{"job/alice/web", &events.JobSubmitted{Spec: withUser(sp, "alice"), SpecVersion: 1}},
		{"task/alice/web/0", &events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1, Reason: "new"}},
		{"task/alice/web/1", &events.TaskSubmitted{User: "alice", Job: "web", Index: 1, SpecVersion: 1, Reason: "new"}},
	})
	if evs[0].Actor != "alice" || evs[0].CausationID != "a" || !evs[0].OccurredAt.Equal(decidedAt) {
		t.Fatalf("envelope: %+v", evs[0])
	}
	if sp.User != "mallory" {
		t.Fatal("Decide changed the command's spec")
	}
	got := c.s.Charged[projections.UserBand{User: "alice", Band: projections.Production}]
	if got != (projections.Resources{CPUMilli: 2000, MemoryBytes: 2 * gib}) {
		t.Fatalf("charged %v", got)
	}
	// Best-effort needs no quota.
	c.do(SubmitJob{Meta: bob, Spec: spec("free", 0, 100)})
}

func TestSubmitJobRefused(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.quota("alice", "production", 4000, 8*gib)
	c.do(SubmitJob{Meta: alice, Spec: spec("web", 9, 1)})
	c.do(SubmitJob{Meta: alice, Spec: spec("killed", 0, 1)})
	c.do(KillJob{Meta: alice, Name: "killed"})
	bad := spec("bad", 9, 0)
	bad.Resources.MemoryBytes = 0
	inAlloc := spec("inalloc", 9, 1)
	inAlloc.AllocSet = "nope"
	after := spec("after", 4, 1)
	after.StartAfter = "nope"
	afterKilled := spec("after", 4, 1)
	afterKilled.StartAfter = "killed"
	for _, tc := range []struct {
		name  string
		cmd   Command
		code  Code
		field string
		msg   string
	}{
		{"no spec", SubmitJob{Meta: alice}, InvalidArgument, "spec", "must be set"},
		{"invalid", SubmitJob{Meta: alice, Spec: bad}, InvalidArgument, "count", "count: must be > 0; resources.memory: must be > 0"},
		{"taken", SubmitJob{Meta: alice, Spec: spec("web", 9, 1)}, AlreadyExists, "name", "job alice/web exists and is pending"},
		{"over quota", SubmitJob{Meta: alice, Spec: spec("big", 9, 4)}, ResourceExhausted, "resources", "over quota"},
		{"no quota in band", SubmitJob{Meta: bob, Spec: spec("b", 4, 1)}, ResourceExhausted, "resources", "granted [cpu 0m"},
		{"alloc set", SubmitJob{Meta: alice, Spec: inAlloc}, NotFound, "alloc_set", "alloc set alice/nope does not exist"},
		{"start_after missing", SubmitJob{Meta: alice, Spec: after}, NotFound, "start_after", "job alice/nope does not exist"},
		{"start_after killed", SubmitJob{Meta: alice, Spec: afterKilled}, FailedPrecondition, "start_after", "will never finish"},
		{"no identity", SubmitJob{Spec: spec("x", 0, 1)}, Unauthenticated, "actor", "no identity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := c.refused(tc.cmd, tc.code)
			if e.Field != tc.field || !strings.Contains(e.Error(), tc.msg) {
				t.Fatalf("field %q, error %q; want field %q containing %q", e.Field, e.Error(), tc.field, tc.msg)
			}
		})
	}
}

// A job over quota is refused at once with what it asked, what is granted
// and what is in use.
func TestQuotaRefusalNamesTheNumbers(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	c.quota("alice", "production", 3000, 8*gib)
	c.do(SubmitJob{Meta: alice, Spec: spec("web", 9, 2)})
	e := c.refused(SubmitJob{Meta: alice, Spec: spec("api", 10, 2)}, ResourceExhausted)
	want := "resources: over quota: alice asks for [cpu 2000m, memory 2GiB, disk 0, ports 0] in band production; " +
		"granted [cpu 3000m, memory 8GiB, disk 10GiB, ports 20]; in use [cpu 2000m, memory 2GiB, disk 0, ports 0]; short in [cpu]. " +
		"Ask for less, use a lower band, or ask an admin for more production quota"
	if e.Error() != want {
		t.Fatalf("got  %s\nwant %s", e.Error(), want)
	}
	// Killing the first job gives its quota back.
	c.do(KillJob{Meta: alice, Name: "web"})
	c.do(SubmitJob{Meta: alice, Spec: spec("api", 10, 2)})
}

func TestSetQuota(t *testing.T) {
	c := newCell(t)
	c.machines(2) // 16 cores, 64GiB
	evs := c.do(SetQuota{Meta: root, User: "alice", Band: "production", Resources: projections.Resources{CPUMilli: 10000, MemoryBytes: 40 * gib}})
	checkEvents(t, evs, []expect{{"quota/alice", &events.QuotaSet{User: "alice", Band: "production", Resources: &events.Resources{CpuMilli: 10000, MemoryBytes: 40 * gib}}}})
	// Batch quota may be oversold; prod quota may not exceed the cell.
	c.do(SetQuota{Meta: root, User: "bob", Band: "batch", Resources: projections.Resources{CPUMilli: 1e6, MemoryBytes: 1 << 50}})
	e := c.refused(SetQuota{Meta: root, User: "bob", Band: "monitoring", Resources: projections.Resources{CPUMilli: 8000, MemoryBytes: 8 * gib}}, ResourceExhausted)
	if want := "resources: production and monitoring quota would total [cpu 18000m, memory 48GiB, disk 0, ports 0], more than the cell's capacity [cpu 16000m, memory 64GiB, disk 200GiB, ports 200] (short in [cpu])"; !strings.HasPrefix(e.Error(), want) {
		t.Fatalf("got %s", e)
	}
	// Replacing alice's own quota does not count the old one.
	c.do(SetQuota{Meta: root, User: "alice", Band: "production", Resources: projections.Resources{CPUMilli: 16000, MemoryBytes: 64 * gib}})
	for _, tc := range []struct {
		cmd   SetQuota
		code  Code
		field string
	}{
		{SetQuota{Meta: alice, User: "alice", Band: "batch"}, PermissionDenied, ""},
		{SetQuota{Meta: root, User: "alice", Band: "best-effort"}, InvalidArgument, "band"},
		{SetQuota{Meta: root, User: "alice", Band: "gold"}, InvalidArgument, "band"},
		{SetQuota{Meta: root, User: "Alice!", Band: "batch"}, InvalidArgument, "user"},
		{SetQuota{Meta: root, User: "alice", Band: "batch", Resources: projections.Resources{CPUMilli: -1}}, InvalidArgument, "resources"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			if e := c.refused(tc.cmd, tc.code); e.Field != tc.field {
				t.Errorf("%+v: field %q, want %q (%v)", tc.cmd, e.Field, tc.field, e)
			}
		})
	}
	if e := c.refused(SetQuota{Meta: bob, User: "bob", Band: "batch"}, PermissionDenied); e.Msg != "setting quota needs the admin capability, which bob does not have" {
		t.Fatal(e)
	}
}

func TestKillJobByNameAndSelector(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.quota("alice", "production", 8000, 16*gib)
	c.do(SubmitJob{Meta: alice, Spec: spec("web", 9, 2)})
	c.place("alice", "web", 0, "m0")
	evs := c.do(KillJob{Meta: alice, Name: "web", Reason: "done"})
	checkEvents(t, evs, []expect{
		{"task/alice/web/0", &events.TaskKilled{User: "alice", Job: "web", Index: 0, Machine: "m0", Reason: "job killed", Stopping: true}},
		{"task/alice/web/1", &events.TaskKilled{User: "alice", Job: "web", Index: 1, Reason: "job killed"}},
		{"job/alice/web", &events.JobKilled{User: "alice", Job: "web", Reason: "done"}},
	})
	// Task 0's process has its kill_timeout to exit: its machine holds
	// its resources until the agent reports it gone.
	if m := c.s.Machines["m0"]; m.TaskCount() != 0 || m.Limits != c.task("alice", "web", 0).Limit {
		t.Fatalf("machine holds %d tasks, %v; want none, and the killed task's limit", m.TaskCount(), m.Limits)
	}
	checkEvents(t, c.do(ReportAgentState{Meta: root, Machine: "m0"}), []expect{
		{"task/alice/web/0", &events.TaskStopped{User: "alice", Job: "web", Index: 0, Machine: "m0", Submission: c.task("alice", "web", 0).Seq}},
	})
	if m := c.s.Machines["m0"]; !m.Limits.IsZero() {
		t.Fatalf("machine still holds %v", m.Limits)
	}

	canary := func(name, tier string) *events.JobSpec {
		s := spec(name, 0, 1)
		s.Labels = map[string]string{"team": "web", "tier": tier}
		return s
	}
	c.do(SubmitJob{Meta: alice, Spec: canary("a", "canary")})
	c.do(SubmitJob{Meta: alice, Spec: canary("b", "prod")})
	c.do(SubmitJob{Meta: alice, Spec: canary("c", "prod")})
	c.do(SubmitJob{Meta: bob, Spec: canary("d", "prod")})
	evs = c.do(KillJob{Meta: alice, Selector: "team=web,tier!=canary"})
	if got := strings.Join(types(evs), " "); got != "TaskKilled JobKilled TaskKilled JobKilled" || evs[1].Stream != "job/alice/b" || evs[3].Stream != "job/alice/c" {
		t.Fatalf("got %s\n%s", got, dump(evs))
	}
	if c.s.Job("bob", "d").Dead() {
		t.Fatal("alice's selector killed bob's job")
	}
	c.refused(KillJob{Meta: alice, Selector: "tier in (prod)"}, NotFound) // only bob's is left
	c.refused(KillJob{Meta: alice, User: "bob", Selector: "tier=prod"}, PermissionDenied)
	c.refused(KillJob{Meta: alice, User: "bob", Name: "d"}, PermissionDenied)
	c.refused(KillJob{Meta: alice, Name: "b"}, FailedPrecondition)
	c.refused(KillJob{Meta: alice, Name: "zz"}, NotFound)
	c.refused(KillJob{Meta: alice, Selector: "tier in prod"}, InvalidArgument)
	c.refused(KillJob{Meta: alice}, InvalidArgument)
	// An admin may kill any user's jobs.
	evs = c.do(KillJob{Meta: root, Selector: "tier=prod"})
	if len(evs) != 2 || evs[1].Stream != "job/bob/d" {
		t.Fatalf("%s", dump(evs))
	}
}

func TestPermissions(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.do(SubmitJob{Meta: alice, Spec: spec("web", 0, 2)})
	for _, tc := range []struct {
		cmd  Command
		want string
	}{
		{KillTask{Meta: bob, User: "alice", Job: "web", Index: 0}, "job alice/web belongs to alice: only its owner or an admin may change it, and bob is neither"},
		{UpdateJob{Meta: bob, User: "alice", Spec: spec("web", 1, 2)}, "job alice/web belongs to alice"},
		{CommitUpdate{Meta: bob, User: "alice", Job: "web"}, "job alice/web belongs to alice"},
		{RollbackUpdate{Meta: bob, User: "alice", Job: "web"}, "job alice/web belongs to alice"},
		{RollingUpdateStep{Meta: bob, User: "alice", Job: "web"}, "job alice/web belongs to alice"},
		{RollingUpdateStep{Meta: bob}, "stepping every job's update needs the admin capability"},
		{RegisterMachine{Meta: bob, Machine: "m9"}, "registering a machine needs the admin capability, which bob does not have"},
		{UpdateMachine{Meta: bob, Machine: "m0"}, "updating a machine needs the admin capability"},
		{DrainMachine{Meta: bob, Machine: "m0", Draining: true}, "draining a machine needs the admin capability"},
		{RemoveMachine{Meta: bob, Machine: "m0"}, "removing a machine needs the admin capability"},
		{PlaceTasks{Meta: bob, Placements: []Placement{{Task: key("alice", "web", 0), Machine: "m0"}}}, "placing tasks needs the admin capability"},
		{ReportAgentState{Meta: bob, Machine: "m0"}, "reporting an agent's state needs the admin capability"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			e := c.refused(tc.cmd, PermissionDenied)
			if !strings.Contains(e.Error(), tc.want) {
				t.Errorf("%T: %q, want %q", tc.cmd, e.Error(), tc.want)
			}
		})
	}
	// The admin may change alice's job.
	c.do(KillTask{Meta: root, User: "alice", Job: "web", Index: 0})
}

func TestKillTask(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.do(SubmitJob{Meta: alice, Spec: spec("web", 0, 2)})
	c.place("alice", "web", 1, "m0")
	checkEvents(t, c.do(KillTask{Meta: alice, Job: "web", Index: 0, Reason: "bad host"}), []expect{
		{"task/alice/web/0", &events.TaskKilled{User: "alice", Job: "web", Index: 0, Reason: "bad host"}},
	})
	c.refused(KillTask{Meta: alice, Job: "web", Index: 0}, FailedPrecondition)
	c.refused(KillTask{Meta: alice, Job: "web", Index: 7}, NotFound)
	c.refused(KillTask{Meta: alice, Job: "nope", Index: 0}, NotFound)
	// The last task's end finishes the job.
	checkEvents(t, c.do(KillTask{Meta: alice, Job: "web", Index: 1}), []expect{
		{"task/alice/web/1", &events.TaskKilled{User: "alice", Job: "web", Index: 1, Machine: "m0", Reason: "killed by alice", Stopping: true}},
		{"job/alice/web", &events.JobFinished{User: "alice", Job: "web"}},
	})
}

// A job deferred until another finishes starts when it does, and is
// killed when that one is killed instead.
func TestDeferredStart(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.do(SubmitJob{Meta: alice, Spec: spec("build", 0, 1)})
	after := spec("deploy", 0, 2)
	after.StartAfter = "build"
	checkEvents(t, c.do(SubmitJob{Meta: alice, Spec: after}), []expect{
		{"job/alice/deploy", &events.JobSubmitted{Spec: withUser(after, "alice"), SpecVersion: 1}},
	})
	if !c.s.Job("alice", "deploy").Deferred {
		t.Fatal("not deferred")
	}
	c.place("alice", "build", 0, "m0")
	c.start("m0")
	evs := c.do(ReportAgentState{Meta: root, Machine: "m0", Tasks: []AgentTask{{Task: key("alice", "build", 0), State: AgentFinished}}})
	checkEvents(t, evs, []expect{
		{"task/alice/build/0", &events.TaskFinished{User: "alice", Job: "build", Index: 0, Machine: "m0"}},
		{"job/alice/build", &events.JobFinished{User: "alice", Job: "build"}},
		{"task/alice/deploy/0", &events.TaskSubmitted{User: "alice", Job: "deploy", Index: 0, SpecVersion: 1, Reason: "new"}},
		{"task/alice/deploy/1", &events.TaskSubmitted{User: "alice", Job: "deploy", Index: 1, SpecVersion: 1, Reason: "new"}},
	})
	if c.s.Job("alice", "deploy").Deferred || c.s.PendingCount() != 2 {
		t.Fatal("deploy did not start")
	}

	c.do(SubmitJob{Meta: alice, Spec: spec("train", 0, 1)})
	eval := spec("eval", 0, 1)
	eval.StartAfter = "train"
	c.do(SubmitJob{Meta: alice, Spec: eval})
	evs = c.do(KillJob{Meta: alice, Name: "train"})
	checkEvents(t, evs, []expect{
		{"task/alice/train/0", &events.TaskKilled{User: "alice", Job: "train", Index: 0, Reason: "job killed"}},
		{"job/alice/train", &events.JobKilled{User: "alice", Job: "train", Reason: "killed by alice"}},
		{"job/alice/eval", &events.JobKilled{User: "alice", Job: "eval", Reason: "job train, which it was to start after, was killed"}},
	})
}

// A secret named with no value given is refused, not run without it.
func TestSecretEnvWithoutValueRefused(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	sp := spec("web", 0, 1)
	sp.SecretEnv = []string{"API_KEY"}
	if e := c.refused(SubmitJob{Meta: alice, Spec: sp}, InvalidArgument); e.Field != "secret_env" || !strings.Contains(e.Msg, "API_KEY") {
		t.Fatalf("refusal: %v", e)
	}
	c.do(SubmitJob{Meta: alice, Spec: spec("web", 0, 1)})
	sp = spec("web", 0, 2)
	sp.SecretEnv = []string{"API_KEY"}
	if e := c.refused(UpdateJob{Meta: alice, Spec: sp}, InvalidArgument); e.Field != "secret_env" {
		t.Fatalf("update refusal: %v", e)
	}
}
