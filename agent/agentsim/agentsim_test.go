package agentsim

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func spec(mode string) *agentpb.TaskSpec {
	return &agentpb.TaskSpec{Command: "/srv/app", Resources: &events.Resources{CpuMilli: 1000, MemoryBytes: 100 << 20},
		Restart: &events.RestartPolicy{Mode: mode}}
}

func TestSimulatedAgentOverGRPC(t *testing.T) {
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	f, err := NewFleet(3, func(i int) Config {
		return Config{Name: []string{"a", "b", "c"}[i], Now: clk.Now, RunFor: 10 * time.Second}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ServeEach(); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := agent.Dial(f.Addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	web, batch := &events.TaskRef{User: "u", Job: "web", Index: 0}, &events.TaskRef{User: "u", Job: "batch", Index: 0}
	st, err := c.Poll(ctx, &agentpb.PollRequest{Machine: "b", Epoch: 1, Requests: []*agentpb.Request{
		agent.StartRequest("1", web, 1, 0, spec("always")),
		agent.StartRequest("2", batch, 1, 0, spec("on-failure")),
		agent.StartRequest("3", &events.TaskRef{User: "u", Job: "bad/job"}, 1, 0, spec("")),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Machine != "b" || len(st.Tasks) != 2 || st.Results[2].Error == "" || len(st.Events) != 2 {
		t.Fatalf("reply %v", st)
	}
	// 10 s later both runs end: web restarts (always), batch finishes.
	clk.add(10 * time.Second)
	st, err = c.Poll(ctx, &agentpb.PollRequest{Machine: "b", Epoch: 1, EventsAcked: st.LastEventSeq})
	if err != nil {
		t.Fatal(err)
	}
	checkRunsEnded(t, st)
	// A failure injected into a running task: restarted in place.
	if err := f.Agents[1].Fail(batch, 1); err == nil {
		t.Errorf("failing a finished task succeeded")
	}
	if err := f.Agents[1].Fail(web, 3); err != nil {
		t.Fatal(err)
	}
	st, err = c.Poll(ctx, &agentpb.PollRequest{Machine: "b", Epoch: 1, EventsAcked: st.LastEventSeq})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Events) != 2 || st.Events[0].Kind != agentpb.EventKind_EVENT_KIND_FAILED || st.Events[0].ExitCode != 3 ||
		!st.Events[0].WillRestart || st.Events[1].Kind != agentpb.EventKind_EVENT_KIND_STARTED {
		t.Errorf("events after a failure %v", st.Events)
	}
	f.Agents[1].Partition(true)
	if _, err := c.Poll(ctx, &agentpb.PollRequest{Machine: "b", Epoch: 1}); status.Code(err) != codes.Unavailable {
		t.Errorf("poll during partition: %v", err)
	}
	f.Agents[1].Partition(false)
	if _, err := c.Poll(ctx, &agentpb.PollRequest{Machine: "a", Epoch: 1}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("poll for another machine: %v", err)
	}
	st, err = c.Poll(ctx, &agentpb.PollRequest{Machine: "b", Epoch: 1, Requests: []*agentpb.Request{agent.StopRequest("4", web, "moved", 0)}})
	if err != nil {
		t.Fatal(err)
	}
	last := st.Events[len(st.Events)-1]
	if last.Kind != agentpb.EventKind_EVENT_KIND_KILLED || last.Reason != "moved" || last.Pid == 0 {
		t.Errorf("stop event %v", last)
	}
}

// checkRunsEnded: once both runs ended, web restarted (always) and batch
// finished, having used 10 s at half a core, and no acknowledged event
// came again.
func checkRunsEnded(t *testing.T, st *agentpb.AgentState) {
	t.Helper()
	for _, ts := range st.Tasks {
		switch ts.Task.Job {
		case "web":
			if ts.State != agentpb.TaskState_TASK_STATE_RUNNING || ts.Restarts < 1 {
				t.Errorf("web %v", ts)
			}
		case "batch":
			if ts.State != agentpb.TaskState_TASK_STATE_FINISHED {
				t.Errorf("batch %v", ts)
			}
		}
	}
	for _, u := range st.Usage {
		if u.Task.Job == "batch" && u.CpuCoreSecondsTotal != 5 {
			t.Errorf("batch cpu %v, want 10 s at half a core", u.CpuCoreSecondsTotal)
		}
	}
	for _, e := range st.Events {
		if e.Seq <= 2 {
			t.Errorf("acknowledged event resent: %v", e)
		}
	}
}

func TestSharedListenerRoutesByMachine(t *testing.T) {
	f, err := NewFleet(50, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ServeShared(); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := agent.Dial(f.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, name := range []string{"sim-0", "sim-49"} {
		st, err := c.Poll(context.Background(), &agentpb.PollRequest{Machine: name})
		if err != nil || st.Machine != name {
			t.Errorf("poll %s: %v, %v", name, st.GetMachine(), err)
		}
	}
	if _, err := c.Poll(context.Background(), &agentpb.PollRequest{}); status.Code(err) != codes.NotFound {
		t.Errorf("poll naming no machine: %v", err)
	}
	if f.Agents[49].Polls() != 1 {
		t.Errorf("sim-49 polled %d times", f.Agents[49].Polls())
	}
}
