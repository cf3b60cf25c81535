package master_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
)

// cell is a whole cell in one process: a master with its scheduler loop and
// link, serving the API and agent registration, and real agents running real
// processes.
type cell struct {
	t      *testing.T
	m      *master.Master
	addr   string
	client apipb.CellClient
	agents map[string]context.CancelFunc
	dirs   map[string]string
	done   map[string]chan struct{}
}

func startCell(t *testing.T, store events.Store, machines int) *cell {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	expl := master.NewExplanations()
	m, err := master.New(ctx, master.Config{Name: "master1", Advertise: lis.Addr().String(), Store: store, Admins: []string{"root"},
		OnLeading: []func(context.Context, *master.Master){
			master.SchedulerLoop(master.SchedulerConfig{Interval: 50 * time.Millisecond, Explanations: expl}),
			master.Link(master.LinkConfig{Cell: "test", Interval: 300 * time.Millisecond, MissedPolls: 3, UsageWindow: time.Second, StopGrace: 2 * time.Second}),
		}})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	svc := api.NewService(m)
	svc.Explain = expl.Explain
	svc.Register(g)
	master.NewAgentRegistry(m, "test", 300*time.Millisecond).Attach(g)
	go g.Serve(lis)
	mdone := make(chan struct{})
	go func() { defer close(mdone); m.Run(ctx) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c := &cell{t: t, m: m, addr: lis.Addr().String(), client: apipb.NewCellClient(conn),
		agents: map[string]context.CancelFunc{}, dirs: map[string]string{}, done: map[string]chan struct{}{}}
	t.Cleanup(func() {
		for name := range c.agents {
			c.stopAgent(name)
		}
		conn.Close()
		g.Stop()
		cancel()
		<-mdone
	})
	for i := 0; i < machines; i++ {
		c.startAgent(fmt.Sprintf("m%d", i))
	}
	return c
}

func (c *cell) startAgent(name string) {
	c.t.Helper()
	dir, ok := c.dirs[name]
	if !ok {
		dir = filepath.Join(c.t.TempDir(), name)
		c.dirs[name] = dir
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n := len(c.dirs)
	go func() {
		defer close(done)
		err := agent.Run(ctx, agent.Config{Name: name, Masters: []string{c.addr}, ListenAddr: "127.0.0.1:0", DataDir: dir,
			Capacity:  &events.Resources{CpuMilli: 2000, MemoryBytes: 2 << 30, DiskBytes: 10 << 30, Ports: 100},
			PortFirst: int32(31000 + 200*n), PortLast: int32(31000 + 200*n + 99), Cgroups: "sampling",
			Attributes: map[string]string{"rack": "r" + strconv.Itoa(n%2)}, SampleInterval: 200 * time.Millisecond, ReregisterAfter: 2 * time.Second})
		if err != nil && ctx.Err() == nil {
			c.t.Errorf("agent %s: %v", name, err)
		}
	}()
	c.agents[name], c.done[name] = cancel, done
}

func (c *cell) stopAgent(name string) {
	if cancel := c.agents[name]; cancel != nil {
		cancel()
		<-c.done[name]
		delete(c.agents, name)
	}
}

func pidAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestWholeCellRunsKillsAndExplains(t *testing.T) {
	c := startCell(t, backends[1].Open(t), 2)
	testkit.Eventually(t, 15*time.Second, "two machines registered", func() (bool, string) {
		ms, err := c.client.ListMachines(as("alice"), &apipb.ListMachinesRequest{})
		if err != nil {
			return false, err.Error()
		}
		return len(ms.Machines) == 2, fmt.Sprint(len(ms.Machines))
	})
	spec := &events.JobSpec{Name: "sleeper", Priority: 0, TaskCount: 3, Command: "/bin/sh", Args: []string{"-c", "echo started $CORRAL_TASK_INDEX; exec sleep 300"},
		Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 20}}
	if _, err := c.client.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "s1", Spec: spec}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "three tasks running", func() (bool, string) {
		job, err := c.client.Get(as("alice"), &apipb.GetRequest{Job: "sleeper"})
		if err != nil {
			return false, err.Error()
		}
		return job.Running == 3, fmt.Sprintf("pending %d scheduled %d running %d dead %d", job.Pending, job.Scheduled, job.Running, job.Dead)
	})
	pids := startedPids(t, c)
	checkWhyPendingIsHistory(t, c)

	// Killing the job stops its processes.
	if _, err := c.client.Kill(as("alice"), &apipb.KillRequest{RequestId: "k1", Job: "sleeper"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, "processes stopped", func() (bool, string) {
		for _, p := range pids {
			if pidAlive(p) {
				return false, fmt.Sprintf("pid %d alive", p)
			}
		}
		return true, ""
	})

	// An admin retires a machine through the API: it leaves the cell, and
	// the log says so. (Its agent, still running here, may register it
	// again later.)
	if _, err := c.client.RemoveMachine(as("root"), &apipb.RemoveMachineRequest{RequestId: "rm1", Machine: "m1", Reason: "retired"}); err != nil {
		t.Fatal(err)
	}
	removed, err := c.client.Events(as("root"), &apipb.EventsRequest{Type: "MachineRemoved"})
	if err != nil || len(removed.Events) != 1 || !strings.Contains(removed.Events[0].Summary, "m1") {
		t.Fatalf("MachineRemoved events: %v %v", removed, err)
	}
	_ = os.Getpid
}

// startedPids are the processes of sleeper's tasks, found through the
// log's TaskStarted events: they are real, and run.
func startedPids(t *testing.T, c *cell) []int {
	t.Helper()
	var pids []int
	evs, err := c.client.Events(as("alice"), &apipb.EventsRequest{Job: "sleeper", Type: "TaskStarted"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Events {
		var pid int
		if i := strings.Index(e.PayloadJson, `"pid":`); i >= 0 {
			fmt.Sscanf(strings.Trim(e.PayloadJson[i+6:], `" `), "%d", &pid)
		}
		if pid <= 0 || !pidAlive(pid) {
			t.Fatalf("TaskStarted %s names pid %d, which does not run", e.PayloadJson, pid)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 3 {
		t.Fatalf("%d TaskStarted events, want 3", len(pids))
	}

	return pids
}

// checkWhyPendingIsHistory: a job no machine can hold stays pending and
// says why; the reason is recorded once, belongs to the job's history, and
// is there to ask at a later position, after the job is gone.
func checkWhyPendingIsHistory(t *testing.T, c *cell) {
	t.Helper()
	big := &events.JobSpec{Name: "huge", Priority: 0, TaskCount: 1, Command: "/bin/true", Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 30}}
	if _, err := c.client.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "s2", Spec: big}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "why pending explains the memory", func() (bool, string) {
		why, err := c.client.WhyPending(as("alice"), &apipb.WhyPendingRequest{Job: "huge"})
		if err != nil {
			return false, err.Error()
		}
		if len(why.Classes) == 0 {
			return false, why.Summary
		}
		text := why.Summary
		for _, r := range why.Classes[0].Rejections {
			text += fmt.Sprintf(" | %d %s", r.Machines, r.Reason)
		}
		return strings.Contains(text, "memory") && why.Classes[0].Rejections[0].Machines == 2, text
	})
	// The reason is history: recorded once, and there to ask at a later
	// position, after the job is gone.
	var recorded int64
	testkit.Eventually(t, 10*time.Second, "the reason recorded in the log", func() (bool, string) {
		evs, err := c.client.Events(as("alice"), &apipb.EventsRequest{Type: "PendingReasonsChanged"})
		if err != nil || len(evs.Events) == 0 {
			return false, fmt.Sprint(evs, err)
		}
		recorded = evs.Events[0].Position
		return strings.Contains(evs.Events[0].PayloadJson, `"reason":"not enough memory"`), evs.Events[0].PayloadJson
	})
	if _, err := c.client.Kill(as("alice"), &apipb.KillRequest{RequestId: "k0", Job: "huge"}); err != nil {
		t.Fatal(err)
	}
	then, err := c.client.WhyPending(as("alice"), &apipb.WhyPendingRequest{Job: "huge", AtPosition: recorded})
	if err != nil || len(then.Classes) != 1 || then.Classes[0].Summary != "not enough memory" || len(then.Classes[0].TaskIndexes) != 1 ||
		!strings.Contains(then.Summary, fmt.Sprintf("at position %d", recorded)) {
		t.Fatalf("why huge was pending at %d: %v %v", recorded, then, err)
	}
	if evs, _ := c.client.Events(as("alice"), &apipb.EventsRequest{Type: "PendingReasonsChanged"}); len(evs.Events) != 1 {
		t.Errorf("the same reason was recorded %d times", len(evs.Events))
	}
	// The record belongs to the job's history, and to no other job's.
	if evs, _ := c.client.Events(as("alice"), &apipb.EventsRequest{Job: "huge"}); !slices.ContainsFunc(evs.GetEvents(), func(e *apipb.EventView) bool { return e.Type == "PendingReasonsChanged" }) {
		t.Errorf("events --job huge lacks why it waited: %v", evs)
	}
	if evs, _ := c.client.Events(as("alice"), &apipb.EventsRequest{Job: "sleeper"}); slices.ContainsFunc(evs.GetEvents(), func(e *apipb.EventView) bool { return e.Type == "PendingReasonsChanged" }) {
		t.Errorf("events --job sleeper shows huge's wait")
	}
	if _, err := c.client.WhyPending(as("alice"), &apipb.WhyPendingRequest{Job: "huge", AtPosition: 1}); status.Code(err) != codes.NotFound {
		t.Errorf("why huge was pending before it existed: %v", err)
	}

}

func TestPreemptionThroughTheAPI(t *testing.T) {
	c := startCell(t, backends[1].Open(t), 1)
	testkit.Eventually(t, 15*time.Second, "machine registered", func() (bool, string) {
		ms, err := c.client.ListMachines(as("alice"), &apipb.ListMachinesRequest{})
		if err != nil {
			return false, err.Error()
		}
		return len(ms.Machines) == 1, fmt.Sprint(len(ms.Machines))
	})
	if _, err := c.client.SetQuota(as("root"), &apipb.SetQuotaRequest{RequestId: "q", User: "alice", Band: "production", Resources: &events.Resources{CpuMilli: 2000, MemoryBytes: 1 << 30}}); err != nil {
		t.Fatal(err)
	}
	// Batch work fills the machine's CPU ...
	batch := &events.JobSpec{Name: "filler", Priority: 2, TaskCount: 4, Command: "/bin/sh", Args: []string{"-c", "exec sleep 300"},
		Resources: &events.Resources{CpuMilli: 500, MemoryBytes: 32 << 20}}
	if _, err := c.client.SetQuota(as("root"), &apipb.SetQuotaRequest{RequestId: "qb", User: "bob", Band: "batch", Resources: &events.Resources{CpuMilli: 2000, MemoryBytes: 1 << 30}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.Submit(as("bob"), &apipb.SubmitRequest{RequestId: "b1", Spec: batch}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "filler running", func() (bool, string) {
		job, err := c.client.Get(as("bob"), &apipb.GetRequest{Job: "filler"})
		if err != nil {
			return false, err.Error()
		}
		return job.Running == 4, fmt.Sprintf("running %d", job.Running)
	})
	// ... so a production task preempts the lowest-priority ones.
	prod := &events.JobSpec{Name: "frontend", Priority: 9, TaskCount: 1, Command: "/bin/sh", Args: []string{"-c", "exec sleep 300"},
		Resources: &events.Resources{CpuMilli: 1000, MemoryBytes: 32 << 20}}
	if _, err := c.client.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "p1", Spec: prod}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "frontend running", func() (bool, string) {
		job, err := c.client.Get(as("alice"), &apipb.GetRequest{Job: "frontend"})
		if err != nil {
			return false, err.Error()
		}
		return job.Running == 1, fmt.Sprintf("running %d pending %d", job.Running, job.Pending)
	})
	evs, err := c.client.Events(as("bob"), &apipb.EventsRequest{User: "bob", Job: "filler", Type: "TaskEvicted"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Events) != 2 {
		t.Fatalf("%d filler tasks evicted, want the 2 that free 1000 millicores", len(evs.Events))
	}
	for _, e := range evs.Events {
		if !strings.Contains(e.PayloadJson, `"preempted"`) || !strings.Contains(e.PayloadJson, `"frontend"`) {
			t.Fatalf("eviction %s does not name its reason and preemptor", e.PayloadJson)
		}
	}
	sched, err := c.client.Events(as("alice"), &apipb.EventsRequest{Job: "frontend", Type: "TaskScheduled"})
	if err != nil || len(sched.Events) != 1 || !strings.Contains(sched.Events[0].Summary, "preempting") {
		t.Fatalf("the frontend's placement does not record what it preempted: %v %v", sched, err)
	}
	// The evicted tasks wait again, and say why.
	why, err := c.client.WhyPending(as("bob"), &apipb.WhyPendingRequest{Job: "filler"})
	if err != nil {
		t.Fatal(err)
	}
	if why.Pending != 2 {
		t.Fatalf("filler has %d pending tasks after the eviction, want 2", why.Pending)
	}
}
