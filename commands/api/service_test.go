package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/api/apitest"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

func codeOf(err error) codes.Code { return status.Code(err) }

// placeAndStart places every pending task round robin and reports them running,
// as the scheduler and the agents would.
func placeAndStart(t *testing.T, r *apitest.Replica) {
	t.Helper()
	var place commands.PlaceTasks
	place.Meta = apitest.Root
	r.M.View(func(s *projections.State) {
		machines := s.SortedMachines()
		for i, task := range s.PendingTasks() {
			m := machines[i%len(machines)]
			place.Placements = append(place.Placements, commands.Placement{Task: task.Key(), Machine: m.Name, MachineVersion: m.Version})
		}
	})
	if len(place.Placements) > 0 {
		apitest.Do(t, r, place)
	}
	var reports []commands.ReportAgentState
	r.M.View(func(s *projections.State) {
		for _, m := range s.SortedMachines() {
			rep := commands.ReportAgentState{Meta: apitest.Root, Machine: m.Name}
			for _, task := range m.Tasks() {
				rep.Tasks = append(rep.Tasks, commands.AgentTask{Task: task.Key(), State: commands.AgentRunning, Pid: 100 + int64(task.Index), SpecVersion: task.SpecVersion})
			}
			reports = append(reports, rep)
		}
	})
	for _, rep := range reports {
		apitest.Do(t, r, rep)
	}
}

func TestCellAPI(t *testing.T) {
	for _, be := range apitest.Backends {
		t.Run(be.Name, func(t *testing.T) { testCellAPI(t, be.Open(t)) })
	}
}

func testCellAPI(t *testing.T, store events.Store) {
	r := apitest.StartReplica(t, "master1", store)
	apitest.WaitLeading(t, r)
	c := r.Client()
	for i := 0; i < 3; i++ {
		apitest.Do(t, r, commands.RegisterMachine{Meta: apitest.Root, Machine: fmt.Sprintf("m%d", i), Address: fmt.Sprintf("127.0.0.1:%d", 9000+i),
			Capacity: projections.Resources{CPUMilli: 8000, MemoryBytes: 32 * apitest.GiB, DiskBytes: 100 * apitest.GiB, Ports: 100}})
	}
	checkQuotaIsAdminOnly(t, c)
	submitAndReadBack(t, c)
	checkSubmitRefusals(t, c)
	placeAndStart(t, r)
	job, _ := c.Get(apitest.As("alice"), &apipb.GetRequest{Job: "web"})
	if job.Running != 4 {
		t.Fatalf("running = %d, want 4", job.Running)
	}
	beforeUpdate := r.M.Position()
	rollOut(t, r, c)
	beforeKill, killedAt := killBySelector(t, r, c)
	checkStateAt(t, c, beforeKill, beforeUpdate)
	checkStateDiff(t, c, beforeUpdate, beforeKill, killedAt)
	checkPlanAt(t, c, beforeUpdate, beforeKill)
	checkBadPlansAndDiffs(t, c, beforeKill, killedAt)
	checkJobEvents(t, c)
}

// checkQuotaIsAdminOnly sets alice's quota as root, after alice may not.
func checkQuotaIsAdminOnly(t *testing.T, c apipb.CellClient) {
	t.Helper()
	_, err := c.SetQuota(apitest.As("alice"), &apipb.SetQuotaRequest{RequestId: "q0", User: "alice", Band: "production", Resources: &events.Resources{CpuMilli: 6000, MemoryBytes: 8 * apitest.GiB}})
	if codeOf(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "admin") {
		t.Fatalf("alice setting quota: %v", err)
	}
	if _, err := c.SetQuota(apitest.As("root"), &apipb.SetQuotaRequest{RequestId: "q1", User: "alice", Band: "production", Resources: &events.Resources{CpuMilli: 6000, MemoryBytes: 8 * apitest.GiB}}); err != nil {
		t.Fatal(err)
	}

}

// submitAndReadBack submits alice's web, then reads the write at its
// position.
func submitAndReadBack(t *testing.T, c apipb.CellClient) {
	t.Helper()
	rep, err := c.Submit(apitest.As("alice"), &apipb.SubmitRequest{RequestId: "s1", Spec: apitest.WebSpec("web", 4)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.LastPosition == 0 || rep.Events != 5 {
		t.Fatalf("submit reply = %+v, want 1 job and 4 task events", rep)
	}
	again, err := c.Submit(apitest.As("alice"), &apipb.SubmitRequest{RequestId: "s1", Spec: apitest.WebSpec("web", 4)})
	if err != nil || !again.Duplicate || again.FirstPosition != rep.FirstPosition || again.LastPosition != rep.LastPosition {
		t.Fatalf("retried submit = %+v, %v; want the first result marked duplicate", again, err)
	}
	job, err := c.Get(apitest.As("alice"), &apipb.GetRequest{Job: "web", Read: &apipb.ReadOptions{MinPosition: rep.LastPosition}})
	if err != nil {
		t.Fatal(err)
	}
	if job.Pending != 4 || job.TotalTasks != 4 || job.Spec.User != "alice" || len(job.Tasks) != 4 {
		t.Fatalf("job after submit: pending %d total %d user %q", job.Pending, job.TotalTasks, job.Spec.User)
	}

}

// checkSubmitRefusals: over quota is refused at once with the numbers, a
// bad spec with the field and the reason.
func checkSubmitRefusals(t *testing.T, c apipb.CellClient) {
	t.Helper()
	_, err := c.Submit(apitest.As("alice"), &apipb.SubmitRequest{RequestId: "s2", Spec: apitest.WebSpec("big", 3)})
	if codeOf(err) != codes.ResourceExhausted {
		t.Fatalf("over-quota submit: %v, want ResourceExhausted", err)
	}
	for _, want := range []string{"quota", "6"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("quota refusal %q does not mention %q", err, want)
		}
	}
	// Bad spec: the field and the reason.
	bad := apitest.WebSpec("bad", 1)
	bad.Resources.MemoryBytes = 0
	_, err = c.Submit(apitest.As("alice"), &apipb.SubmitRequest{RequestId: "s3", Spec: bad})
	if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("bad spec: %v", err)
	}
	if _, err := c.Submit(apitest.As("alice"), &apipb.SubmitRequest{RequestId: "link/m1/7/1", Spec: apitest.WebSpec("taken", 1)}); codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "request_id") {
		t.Fatalf("a request id in the link's namespace: %v, want InvalidArgument naming request_id", err)
	}
	if _, err := c.Submit(context.Background(), &apipb.SubmitRequest{Spec: apitest.WebSpec("anon", 1)}); codeOf(err) != codes.Unauthenticated {
		t.Fatalf("anonymous submit: %v", err)
	}

}

// rollOut updates web to a version that needs restarts; the rolling update
// never disrupts more than one task.
func rollOut(t *testing.T, r *apitest.Replica, c apipb.CellClient) {
	t.Helper()
	up, err := c.Update(apitest.As("alice"), &apipb.UpdateRequest{RequestId: "u1", Spec: apitest.WebSpec("web", 4, "--v2")})
	if err != nil {
		t.Fatal(err)
	}
	for step := 0; step < 20; step++ {
		disrupted, old := webVersions(r)
		if disrupted > 1 {
			t.Fatalf("step %d: %d tasks disrupted at once, the update policy allows 1", step, disrupted)
		}
		if old == 0 && disrupted == 0 {
			break
		}
		placeAndStart(t, r)
		if _, old := webVersions(r); old > 0 {
			stepWhenHealthy(t, r)
		}
	}
	job, _ := c.Get(apitest.As("alice"), &apipb.GetRequest{Job: "web", Read: &apipb.ReadOptions{MinPosition: up.LastPosition}})
	if job.SpecVersion != 2 || job.Running != 4 || !job.UpdateInProgress {
		t.Fatalf("after the rollout: version %d running %d in progress %v", job.SpecVersion, job.Running, job.UpdateInProgress)
	}
	for _, task := range job.Tasks {
		if task.SpecVersion != 2 {
			t.Fatalf("task %d still runs version %d", task.Index, task.SpecVersion)
		}
	}
	if _, err := c.CommitUpdate(apitest.As("alice"), &apipb.JobRequest{RequestId: "c1", Job: "web"}); err != nil {
		t.Fatal(err)
	}
}

// webVersions counts alice's web tasks not running, and those not at the
// job's current version.
func webVersions(r *apitest.Replica) (disrupted, old int) {
	r.M.View(func(s *projections.State) {
		j := s.Job("alice", "web")
		for _, task := range j.Tasks {
			if task.State != projections.TaskRunning {
				disrupted++
			}
			if task.SpecVersion != j.Current {
				old++
			}
		}
	})
	return disrupted, old
}

// stepWhenHealthy steps the rolling update until it moves on: once the
// replacement has served its min_healthy_time.
func stepWhenHealthy(t *testing.T, r *apitest.Replica) {
	t.Helper()
	before := r.M.Position()
	testkit.Eventually(t, 5*time.Second, "the rolling update steps once the replacement is healthy", func() (bool, string) {
		apitest.Do(t, r, commands.RollingUpdateStep{Meta: apitest.Root})
		return r.M.Position() > before, fmt.Sprintf("the log stays at %d", before)
	})
}

// killBySelector kills alice's jobs by label, after bob may not; it returns
// the positions before and after the kill.
func killBySelector(t *testing.T, r *apitest.Replica, c apipb.CellClient) (int64, int64) {
	t.Helper()
	if _, err := c.Submit(apitest.As("alice"), &apipb.SubmitRequest{RequestId: "s4", Spec: apitest.WebSpec("api", 1)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Kill(apitest.As("bob"), &apipb.KillRequest{RequestId: "k0", User: "alice", Job: "web"})
	if codeOf(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "bob") {
		t.Fatalf("bob killing alice's job: %v", err)
	}
	beforeKill := r.M.Position()
	kill, err := c.Kill(apitest.As("alice"), &apipb.KillRequest{RequestId: "k1", Selector: "team=web", Reason: "done"})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.List(apitest.As("alice"), &apipb.ListRequest{User: "alice", Read: &apipb.ReadOptions{MinPosition: kill.LastPosition}})
	if err != nil || list.Total != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	for _, j := range list.Jobs {
		if j.State != "dead" {
			t.Fatalf("job %s is %s after kill by selector", j.Spec.Name, j.State)
		}
	}

	return beforeKill, kill.LastPosition
}

// checkStateAt reads the state at past positions and refuses moments
// beyond the head, in the future or before 1970.
func checkStateAt(t *testing.T, c apipb.CellClient, beforeKill, beforeUpdate int64) {
	t.Helper()
	past, err := c.StateAt(apitest.As("alice"), &apipb.StateAtRequest{Position: beforeKill})
	if err != nil {
		t.Fatal(err)
	}
	alive := 0
	for _, j := range past.Jobs {
		if j.State != "dead" {
			alive++
		}
	}
	if past.Position != beforeKill || alive != 2 {
		t.Fatalf("state at %d: position %d, %d live jobs, want 2", beforeKill, past.Position, alive)
	}
	early, err := c.StateAt(apitest.As("alice"), &apipb.StateAtRequest{Position: beforeUpdate})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range early.Jobs {
		if j.Spec.Name == "web" && (j.SpecVersion != 1 || j.Running != 4) {
			t.Fatalf("web before the update: version %d running %d", j.SpecVersion, j.Running)
		}
	}
	if _, err := c.StateAt(apitest.As("alice"), &apipb.StateAtRequest{Position: 1 << 40}); codeOf(err) != codes.OutOfRange {
		t.Fatalf("state beyond the head: %v", err)
	}
	if _, err := c.StateDiff(apitest.As("alice"), &apipb.StateDiffRequest{FromPosition: 1, ToPosition: 1 << 40}); codeOf(err) != codes.OutOfRange || !strings.Contains(err.Error(), "to_position") {
		t.Fatalf("a diff to beyond the head: %v, want OutOfRange naming to_position", err)
	}
	// A moment in the future is refused, not answered with the present;
	// one before the epoch (an overflowed "ago") is refused, not wrapped.
	for _, bad := range []struct {
		us   int64
		what string
	}{{time.Now().Add(time.Hour).UnixMicro(), "in the future"}, {-1 << 62, "before 1970"}, {-1, "before 1970"}} {
		t.Run(fmt.Sprint("time_us ", bad.us), func(t *testing.T) {
			if _, err := c.StateAt(apitest.As("alice"), &apipb.StateAtRequest{TimeUs: bad.us}); codeOf(err) != codes.InvalidArgument ||
				!strings.Contains(err.Error(), "time_us") || !strings.Contains(err.Error(), bad.what) {
				t.Errorf("state at %d µs: %v, want InvalidArgument naming time_us, %s", bad.us, err, bad.what)
			}
		})
	}
	if _, err := c.StateDiff(apitest.As("alice"), &apipb.StateDiffRequest{FromPosition: 1, ToTimeUs: time.Now().Add(24 * time.Hour).UnixMicro()}); codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "to_time_us") {
		t.Errorf("a diff to tomorrow: %v, want InvalidArgument naming to_time_us", err)
	}
	if _, err := c.StateAt(apitest.As("alice"), &apipb.StateAtRequest{TimeUs: time.Now().UnixMicro()}); err != nil {
		t.Errorf("state now: %v", err)
	}

}

// checkStateDiff reads what changed between two points: the kill of both
// jobs, their tasks, and the update of web.
func checkStateDiff(t *testing.T, c apipb.CellClient, beforeUpdate, beforeKill, killedAt int64) {
	t.Helper()
	diff, err := c.StateDiff(apitest.As("alice"), &apipb.StateDiffRequest{FromPosition: beforeKill, ToPosition: killedAt})
	if err != nil {
		t.Fatal(err)
	}
	if diff.FromPosition != beforeKill || diff.ToPosition != killedAt || diff.Counts["job killed"] != 2 || diff.Counts["task killed"] == 0 {
		t.Fatalf("diff across the kill: %v", diff)
	}
	upd, err := c.StateDiff(apitest.As("alice"), &apipb.StateDiffRequest{FromPosition: beforeUpdate, ToPosition: beforeKill, User: "alice", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if upd.Counts["job spec changed"] != 1 || len(upd.Changes) != 1 || upd.Total < 2 {
		t.Fatalf("diff across the update (limit 1): %v", upd)
	}
}

// checkPlanAt plans on the cell as it was: web at beforeUpdate is an update
// from version 1; a job that never lived is planned as its submission.
func checkPlanAt(t *testing.T, c apipb.CellClient, beforeUpdate, beforeKill int64) {
	t.Helper()
	then, err := c.PlanUpdate(apitest.As("alice"), &apipb.UpdateRequest{Spec: apitest.WebSpec("web", 3), AtPosition: beforeUpdate})
	if err != nil || then.Position != beforeUpdate || then.CurrentVersion != 1 || then.SpecVersion != 2 {
		t.Fatalf("plan of web at %d: %v %v", beforeUpdate, then, err)
	}
	// Three more tasks would not have been admitted then: alice's quota was
	// in use by web and api.
	if _, err := c.PlanUpdate(apitest.As("alice"), &apipb.UpdateRequest{Spec: apitest.WebSpec("fresh", 3), AtPosition: beforeKill}); codeOf(err) != codes.ResourceExhausted {
		t.Fatalf("plan of three more tasks at %d: %v, want over quota", beforeKill, err)
	}
	fresh, err := c.PlanUpdate(apitest.As("alice"), &apipb.UpdateRequest{Spec: apitest.WebSpec("fresh", 1), AtPosition: beforeKill})
	if err != nil || fresh.Position != beforeKill || fresh.CurrentVersion != 0 || fresh.SpecVersion != 1 || len(fresh.Changes) == 0 ||
		!strings.Contains(fresh.Changes[0], "submitted") {
		t.Fatalf("plan of a new job at %d: %v %v", beforeKill, fresh, err)
	}
}

// checkBadPlansAndDiffs: plans and diffs asked for wrongly are refused,
// naming what is wrong.
func checkBadPlansAndDiffs(t *testing.T, c apipb.CellClient, beforeKill, killedAt int64) {
	t.Helper()
	for i, bad := range []*apipb.UpdateRequest{
		{Spec: apitest.WebSpec("web", 3), AtPosition: -1},
		{Spec: apitest.WebSpec("web", 3), AtPosition: 3, AtTimeUs: 5},
		{Spec: apitest.WebSpec("web", 3), AtPosition: 3, IfPosition: 3},
		{AtPosition: 3, Job: "web", RevertTo: 1},
	} {
		t.Run(fmt.Sprint("PlanUpdate ", i), func(t *testing.T) {
			if _, err := c.PlanUpdate(apitest.As("alice"), bad); codeOf(err) != codes.InvalidArgument {
				t.Errorf("PlanUpdate(%v): %v, want InvalidArgument", bad, err)
			}
		})
	}
	for _, bad := range []struct {
		req  *apipb.StateDiffRequest
		want string
	}{
		{&apipb.StateDiffRequest{ToPosition: 2}, "from_position or from_time_us"},
		{&apipb.StateDiffRequest{FromPosition: 2, FromTimeUs: 5, ToPosition: 3}, "not both"},
		{&apipb.StateDiffRequest{FromPosition: -1, ToPosition: 3}, "from_position"},
		{&apipb.StateDiffRequest{FromPosition: killedAt, ToPosition: beforeKill}, "after"},
		{&apipb.StateDiffRequest{FromPosition: 1, ToPosition: 2, Limit: -3}, "limit"},
		{&apipb.StateDiffRequest{FromPosition: 1, ToPosition: 2, Limit: 1 << 30}, "limit"},
	} {
		t.Run("StateDiff "+bad.want, func(t *testing.T) {
			_, err := c.StateDiff(apitest.As("alice"), bad.req)
			if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("StateDiff(%v): %v, want InvalidArgument naming %q", bad.req, err, bad.want)
			}
		})
	}

}

// checkJobEvents reads web's history, filtered.
func checkJobEvents(t *testing.T, c apipb.CellClient) {
	t.Helper()
	evs, err := c.Events(apitest.As("alice"), &apipb.EventsRequest{Job: "web"})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, e := range evs.Events {
		types[e.Type]++
	}
	if types["JobSubmitted"] != 1 || types["TaskScheduled"] < 4 || types["JobKilled"] != 1 || types["MachineRegistered"] != 0 {
		t.Fatalf("events of web: %v", types)
	}
}
