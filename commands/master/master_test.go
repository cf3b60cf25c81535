package master_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/internal/pgtest"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

const gib = int64(1) << 30

type backend struct {
	name string
	open func(t testing.TB) events.Store
}

var backends = []backend{
	{"postgres", func(t testing.TB) events.Store {
		ctx := context.Background()
		s, err := pgstore.Open(ctx, pgtest.NewDatabase(t), pgstore.Options{PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"sqlite", func(t testing.TB) events.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlitestore.Options{PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

// replica is one running master with a gRPC server on loopback.
type replica struct {
	m    *master.Master
	addr string
	conn *grpc.ClientConn
	stop func()
}

func startReplica(t testing.TB, name string, store events.Store) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := master.New(ctx, master.Config{Name: name, Advertise: lis.Addr().String(), Store: store, Admins: []string{"root"}, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	master.NewService(m).Register(g)
	go g.Serve(lis)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{m: m, addr: lis.Addr().String(), conn: conn}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		g.Stop()
		cancel()
		<-done
	}
	t.Cleanup(r.stop)
	return r
}

func (r *replica) client() apipb.CellClient { return apipb.NewCellClient(r.conn) }

func as(user string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), master.UserHeader, user)
}

func waitLeading(t testing.TB, r *replica) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !r.m.Leading() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not take the lease", r.m.Name())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func do(t *testing.T, r *replica, cmd commands.Command) master.Result {
	t.Helper()
	res, err := r.m.Do(context.Background(), cmd)
	if err != nil {
		t.Fatalf("%T: %v", cmd, err)
	}
	return res
}

var root = commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}

func codeOf(err error) codes.Code { return status.Code(err) }

func webSpec(name string, tasks int32, args ...string) *events.JobSpec {
	return &events.JobSpec{Name: name, Priority: 9, TaskCount: tasks, Command: "/bin/server", Args: args,
		Resources: &events.Resources{CpuMilli: 1000, MemoryBytes: gib}, Labels: map[string]string{"team": "web"},
		// Replacements serve once they ran a millisecond; the test commits
		// by hand.
		Update: &events.UpdatePolicy{MaxDisruptions: 1, MinHealthyTimeMs: 1, AutoCommit: proto.Bool(false)}}
}

// placeAndStart places every pending task round robin and reports them running,
// as the scheduler and the agents would.
func placeAndStart(t *testing.T, r *replica) {
	t.Helper()
	var place commands.PlaceTasks
	place.Meta = root
	r.m.View(func(s *projections.State) {
		machines := s.SortedMachines()
		for i, task := range s.PendingTasks() {
			m := machines[i%len(machines)]
			place.Placements = append(place.Placements, commands.Placement{Task: task.Key(), Machine: m.Name, MachineVersion: m.Version})
		}
	})
	if len(place.Placements) > 0 {
		do(t, r, place)
	}
	var reports []commands.ReportAgentState
	r.m.View(func(s *projections.State) {
		for _, m := range s.SortedMachines() {
			rep := commands.ReportAgentState{Meta: root, Machine: m.Name}
			for _, task := range m.Tasks() {
				rep.Tasks = append(rep.Tasks, commands.AgentTask{Task: task.Key(), State: commands.AgentRunning, Pid: 100 + int64(task.Index), SpecVersion: task.SpecVersion})
			}
			reports = append(reports, rep)
		}
	})
	for _, rep := range reports {
		do(t, r, rep)
	}
}

func TestMasterAPI(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) { testMasterAPI(t, be.open(t)) })
	}
}

func testMasterAPI(t *testing.T, store events.Store) {
	r := startReplica(t, "master1", store)
	waitLeading(t, r)
	c := r.client()
	for i := 0; i < 3; i++ {
		do(t, r, commands.RegisterMachine{Meta: root, Machine: fmt.Sprintf("m%d", i), Address: fmt.Sprintf("127.0.0.1:%d", 9000+i),
			Capacity: projections.Resources{CPUMilli: 8000, MemoryBytes: 32 * gib, DiskBytes: 100 * gib, Ports: 100}})
	}
	// Quota is admin-only.
	_, err := c.SetQuota(as("alice"), &apipb.SetQuotaRequest{RequestId: "q0", User: "alice", Band: "production", Resources: &events.Resources{CpuMilli: 6000, MemoryBytes: 8 * gib}})
	if codeOf(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "admin") {
		t.Fatalf("alice setting quota: %v", err)
	}
	if _, err := c.SetQuota(as("root"), &apipb.SetQuotaRequest{RequestId: "q1", User: "alice", Band: "production", Resources: &events.Resources{CpuMilli: 6000, MemoryBytes: 8 * gib}}); err != nil {
		t.Fatal(err)
	}

	// Submit, then read our own write at its position.
	rep, err := c.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "s1", Spec: webSpec("web", 4)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.LastPosition == 0 || rep.Events != 5 {
		t.Fatalf("submit reply = %+v, want 1 job and 4 task events", rep)
	}
	again, err := c.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "s1", Spec: webSpec("web", 4)})
	if err != nil || !again.Duplicate || again.FirstPosition != rep.FirstPosition || again.LastPosition != rep.LastPosition {
		t.Fatalf("retried submit = %+v, %v; want the first result marked duplicate", again, err)
	}
	job, err := c.Get(as("alice"), &apipb.GetRequest{Job: "web", Read: &apipb.ReadOptions{MinPosition: rep.LastPosition}})
	if err != nil {
		t.Fatal(err)
	}
	if job.Pending != 4 || job.TotalTasks != 4 || job.Spec.User != "alice" || len(job.Tasks) != 4 {
		t.Fatalf("job after submit: pending %d total %d user %q", job.Pending, job.TotalTasks, job.Spec.User)
	}

	// Over quota: refused at once with the numbers.
	_, err = c.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "s2", Spec: webSpec("big", 3)})
	if codeOf(err) != codes.ResourceExhausted {
		t.Fatalf("over-quota submit: %v, want ResourceExhausted", err)
	}
	for _, want := range []string{"quota", "6"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("quota refusal %q does not mention %q", err, want)
		}
	}
	// Bad spec: the field and the reason.
	bad := webSpec("bad", 1)
	bad.Resources.MemoryBytes = 0
	_, err = c.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "s3", Spec: bad})
	if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("bad spec: %v", err)
	}
	if _, err := c.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "link/m1/7/1", Spec: webSpec("taken", 1)}); codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "request_id") {
		t.Fatalf("a request id in the link's namespace: %v, want InvalidArgument naming request_id", err)
	}
	if _, err := c.Submit(context.Background(), &apipb.SubmitRequest{Spec: webSpec("anon", 1)}); codeOf(err) != codes.Unauthenticated {
		t.Fatalf("anonymous submit: %v", err)
	}

	placeAndStart(t, r)
	job, _ = c.Get(as("alice"), &apipb.GetRequest{Job: "web"})
	if job.Running != 4 {
		t.Fatalf("running = %d, want 4", job.Running)
	}
	beforeUpdate := r.m.Position()

	// A rolling update that needs restarts never disrupts more than one task.
	up, err := c.Update(as("alice"), &apipb.UpdateRequest{RequestId: "u1", Spec: webSpec("web", 4, "--v2")})
	if err != nil {
		t.Fatal(err)
	}
	for step := 0; step < 20; step++ {
		var disrupted, old int
		r.m.View(func(s *projections.State) {
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
		if disrupted > 1 {
			t.Fatalf("step %d: %d tasks disrupted at once, the update policy allows 1", step, disrupted)
		}
		if old == 0 && disrupted == 0 {
			break
		}
		placeAndStart(t, r)
		time.Sleep(2 * time.Millisecond) // the replacement serves: min_healthy_time passes
		do(t, r, commands.RollingUpdateStep{Meta: root})
	}
	job, _ = c.Get(as("alice"), &apipb.GetRequest{Job: "web", Read: &apipb.ReadOptions{MinPosition: up.LastPosition}})
	if job.SpecVersion != 2 || job.Running != 4 || !job.UpdateInProgress {
		t.Fatalf("after the rollout: version %d running %d in progress %v", job.SpecVersion, job.Running, job.UpdateInProgress)
	}
	for _, task := range job.Tasks {
		if task.SpecVersion != 2 {
			t.Fatalf("task %d still runs version %d", task.Index, task.SpecVersion)
		}
	}
	if _, err := c.CommitUpdate(as("alice"), &apipb.JobRequest{RequestId: "c1", Job: "web"}); err != nil {
		t.Fatal(err)
	}

	// Kill by selector; another user may not.
	if _, err := c.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "s4", Spec: webSpec("api", 1)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Kill(as("bob"), &apipb.KillRequest{RequestId: "k0", User: "alice", Job: "web"})
	if codeOf(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "bob") {
		t.Fatalf("bob killing alice's job: %v", err)
	}
	beforeKill := r.m.Position()
	kill, err := c.Kill(as("alice"), &apipb.KillRequest{RequestId: "k1", Selector: "team=web", Reason: "done"})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.List(as("alice"), &apipb.ListRequest{User: "alice", Read: &apipb.ReadOptions{MinPosition: kill.LastPosition}})
	if err != nil || list.Total != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	for _, j := range list.Jobs {
		if j.State != "dead" {
			t.Fatalf("job %s is %s after kill by selector", j.Spec.Name, j.State)
		}
	}

	// The state at any past position.
	past, err := c.StateAt(as("alice"), &apipb.StateAtRequest{Position: beforeKill})
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
	early, err := c.StateAt(as("alice"), &apipb.StateAtRequest{Position: beforeUpdate})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range early.Jobs {
		if j.Spec.Name == "web" && (j.SpecVersion != 1 || j.Running != 4) {
			t.Fatalf("web before the update: version %d running %d", j.SpecVersion, j.Running)
		}
	}
	if _, err := c.StateAt(as("alice"), &apipb.StateAtRequest{Position: 1 << 40}); codeOf(err) != codes.OutOfRange {
		t.Fatalf("state beyond the head: %v", err)
	}
	if _, err := c.StateDiff(as("alice"), &apipb.StateDiffRequest{FromPosition: 1, ToPosition: 1 << 40}); codeOf(err) != codes.OutOfRange || !strings.Contains(err.Error(), "to_position") {
		t.Fatalf("a diff to beyond the head: %v, want OutOfRange naming to_position", err)
	}
	// A moment in the future is refused, not answered with the present;
	// one before the epoch (an overflowed "ago") is refused, not wrapped.
	for _, bad := range []struct {
		us   int64
		what string
	}{{time.Now().Add(time.Hour).UnixMicro(), "in the future"}, {-1 << 62, "before 1970"}, {-1, "before 1970"}} {
		if _, err := c.StateAt(as("alice"), &apipb.StateAtRequest{TimeUs: bad.us}); codeOf(err) != codes.InvalidArgument ||
			!strings.Contains(err.Error(), "time_us") || !strings.Contains(err.Error(), bad.what) {
			t.Errorf("state at %d µs: %v, want InvalidArgument naming time_us, %s", bad.us, err, bad.what)
		}
	}
	if _, err := c.StateDiff(as("alice"), &apipb.StateDiffRequest{FromPosition: 1, ToTimeUs: time.Now().Add(24 * time.Hour).UnixMicro()}); codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "to_time_us") {
		t.Errorf("a diff to tomorrow: %v, want InvalidArgument naming to_time_us", err)
	}
	if _, err := c.StateAt(as("alice"), &apipb.StateAtRequest{TimeUs: time.Now().UnixMicro()}); err != nil {
		t.Errorf("state now: %v", err)
	}

	// What changed between two points: the kill of both jobs, their
	// tasks, and the update of web.
	diff, err := c.StateDiff(as("alice"), &apipb.StateDiffRequest{FromPosition: beforeKill, ToPosition: kill.LastPosition})
	if err != nil {
		t.Fatal(err)
	}
	if diff.FromPosition != beforeKill || diff.ToPosition != kill.LastPosition || diff.Counts["job killed"] != 2 || diff.Counts["task killed"] == 0 {
		t.Fatalf("diff across the kill: %v", diff)
	}
	upd, err := c.StateDiff(as("alice"), &apipb.StateDiffRequest{FromPosition: beforeUpdate, ToPosition: beforeKill, User: "alice", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if upd.Counts["job spec changed"] != 1 || len(upd.Changes) != 1 || upd.Total < 2 {
		t.Fatalf("diff across the update (limit 1): %v", upd)
	}
	// A plan on the cell as it was: web at beforeUpdate is an update from
	// version 1; a job that never lived is planned as its submission.
	then, err := c.PlanUpdate(as("alice"), &apipb.UpdateRequest{Spec: webSpec("web", 3), AtPosition: beforeUpdate})
	if err != nil || then.Position != beforeUpdate || then.CurrentVersion != 1 || then.SpecVersion != 2 {
		t.Fatalf("plan of web at %d: %v %v", beforeUpdate, then, err)
	}
	// Three more tasks would not have been admitted then: alice's quota was
	// in use by web and api.
	if _, err := c.PlanUpdate(as("alice"), &apipb.UpdateRequest{Spec: webSpec("fresh", 3), AtPosition: beforeKill}); codeOf(err) != codes.ResourceExhausted {
		t.Fatalf("plan of three more tasks at %d: %v, want over quota", beforeKill, err)
	}
	fresh, err := c.PlanUpdate(as("alice"), &apipb.UpdateRequest{Spec: webSpec("fresh", 1), AtPosition: beforeKill})
	if err != nil || fresh.Position != beforeKill || fresh.CurrentVersion != 0 || fresh.SpecVersion != 1 || len(fresh.Changes) == 0 ||
		!strings.Contains(fresh.Changes[0], "submitted") {
		t.Fatalf("plan of a new job at %d: %v %v", beforeKill, fresh, err)
	}
	for _, bad := range []*apipb.UpdateRequest{
		{Spec: webSpec("web", 3), AtPosition: -1},
		{Spec: webSpec("web", 3), AtPosition: 3, AtTimeUs: 5},
		{Spec: webSpec("web", 3), AtPosition: 3, IfPosition: 3},
		{AtPosition: 3, Job: "web", RevertTo: 1},
	} {
		if _, err := c.PlanUpdate(as("alice"), bad); codeOf(err) != codes.InvalidArgument {
			t.Errorf("PlanUpdate(%v): %v, want InvalidArgument", bad, err)
		}
	}
	for _, bad := range []struct {
		req  *apipb.StateDiffRequest
		want string
	}{
		{&apipb.StateDiffRequest{ToPosition: 2}, "from_position or from_time_us"},
		{&apipb.StateDiffRequest{FromPosition: 2, FromTimeUs: 5, ToPosition: 3}, "not both"},
		{&apipb.StateDiffRequest{FromPosition: -1, ToPosition: 3}, "from_position"},
		{&apipb.StateDiffRequest{FromPosition: kill.LastPosition, ToPosition: beforeKill}, "after"},
		{&apipb.StateDiffRequest{FromPosition: 1, ToPosition: 2, Limit: -3}, "limit"},
		{&apipb.StateDiffRequest{FromPosition: 1, ToPosition: 2, Limit: 1 << 30}, "limit"},
	} {
		_, err := c.StateDiff(as("alice"), bad.req)
		if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("StateDiff(%v): %v, want InvalidArgument naming %q", bad.req, err, bad.want)
		}
	}

	// The job's history, filtered.
	evs, err := c.Events(as("alice"), &apipb.EventsRequest{Job: "web"})
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

func TestFollowerRefusesWritesNamingTheLeader(t *testing.T) {
	store := backends[1].open(t)
	a := startReplica(t, "master-a", store)
	waitLeading(t, a)
	b := startReplica(t, "master-b", store)
	testkit.Eventually(t, 10*time.Second, "master-b following the log", func() (bool, string) {
		return b.m.Position() >= a.m.Position(), fmt.Sprint(b.m.Position(), " of ", a.m.Position())
	})
	if b.m.Leading() {
		t.Fatal("two leaders")
	}
	_, err := b.client().Submit(as("alice"), &apipb.SubmitRequest{RequestId: "x", Spec: webSpec("web", 1)})
	if codeOf(err) != codes.Unavailable || !strings.Contains(err.Error(), "master-a") || !strings.Contains(err.Error(), a.addr) {
		t.Fatalf("write to a follower: %v, want Unavailable naming master-a at %s", err, a.addr)
	}
	// The follower serves reads of what the leader wrote.
	res := do(t, a, commands.RegisterMachine{Meta: root, Machine: "m0", Address: "127.0.0.1:1", Capacity: projections.Resources{CPUMilli: 1000, MemoryBytes: gib, Ports: 10}})
	ms, err := b.client().ListMachines(as("alice"), &apipb.ListMachinesRequest{Read: &apipb.ReadOptions{MinPosition: res.Last}})
	if err != nil || len(ms.Machines) != 1 {
		t.Fatalf("follower read: %v %v", ms, err)
	}
	// When the leader steps down, the follower takes over.
	a.stop()
	waitLeading(t, b)
	if _, err := b.client().Submit(as("alice"), &apipb.SubmitRequest{RequestId: "y", Spec: webSpec("web", 1)}); codeOf(err) != codes.ResourceExhausted && err != nil {
		t.Fatalf("write to the new leader: %v", err)
	}
}
