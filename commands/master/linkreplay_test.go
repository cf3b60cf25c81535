package master_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

// startsHeld is a scripted agent that can hold back the starts it is sent
// (they are neither done nor answered), so that a task the master placed
// again stays scheduled.
type startsHeld struct {
	*scriptedAgent
	hold atomic.Bool
}

func (a *startsHeld) Poll(ctx context.Context, req *agentpb.PollRequest) (*agentpb.AgentState, error) {
	if a.hold.Load() {
		var keep []*agentpb.Request
		for _, r := range req.Requests {
			if r.GetStart() == nil {
				keep = append(keep, r)
			}
		}
		req.Requests = keep
	}
	return a.scriptedAgent.Poll(ctx, req)
}

// A start the link left to the full-state report (it went into the log
// without an idempotency key), replayed to a new leader after the task was
// evicted and placed on the same machine again, is history of the earlier
// placement: the new leader must not take it for the new placement's start
// and record a running task whose process is long gone. Found by the
// simulation (internal/cellsim, seed 30040 before the fix).
func TestLinkReplayedStartOfAnEarlierPlacement(t *testing.T) {
	c := newLinkCell(t, testLinkConfig())
	sa := &scriptedAgent{tasks: map[string]*agentpb.TaskStatus{}, pid: 100}
	a := &startsHeld{scriptedAgent: sa}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	agentpb.RegisterAgentServer(g, a)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	if _, err := c.m().Do(context.Background(), commands.RegisterMachine{Meta: root, Machine: "f0", Address: lis.Addr().String(),
		Capacity: projections.Resources{CPUMilli: 4000, MemoryBytes: 4 * gib, DiskBytes: 10 * gib, Ports: 100}}); err != nil {
		t.Fatal(err)
	}
	// The agent keeps its events, as if no leader ever acknowledged them.
	sa.setIgnoreAcks(true)
	c.submit(c.spec("again", 1, "exec sleep 600"))
	key := "alice/again/0"
	testkit.Eventually(t, 10*time.Second, "started", func() (bool, string) {
		return c.tasks("again")[0].State == projections.TaskRunning, fmt.Sprint(c.tasks("again"))
	})
	first := c.tasks("again")[0].Pid

	// Evicted; placed on f0 again, where its start is held back.
	a.hold.Store(true)
	sa.mu.Lock()
	ts := sa.tasks[key]
	// Evicted for the machine's memory pressure, which is not the task's
	// doing (an OOM kill would be its failure, and back off).
	sa.emit(agentpb.EventKind_EVENT_KIND_EVICTED, ts.Task, ts.Pid, false)
	sa.events[len(sa.events)-1].Reason = "overcommitted"
	ts.State, ts.Pid, ts.Reason = agentpb.TaskState_TASK_STATE_EVICTED, 0, "overcommitted"
	sa.mu.Unlock()
	testkit.Eventually(t, 10*time.Second, "evicted and placed on f0 again", func() (bool, string) {
		tv := c.tasks("again")[0]
		return len(c.events("again", "TaskEvicted")) == 1 && tv.State == projections.TaskScheduled && tv.Machine == "f0", fmt.Sprint(tv)
	})

	// A new leader gets the old start and the eviction back.
	c.stopMaster()
	lm := c.startMaster("master2")
	testkit.Eventually(t, 10*time.Second, "polled by the new leader", func() (bool, string) {
		return lm.stats.Polls.Load() >= 3, fmt.Sprint(lm.stats.Polls.Load())
	})
	if tv := c.tasks("again")[0]; tv.State != projections.TaskScheduled {
		t.Fatalf("after the new leader's polls the task is %s with pid %d (the earlier placement's was %d): want still scheduled, its start held back", tv.State, tv.Pid, first)
	}
	a.hold.Store(false)
	testkit.Eventually(t, 10*time.Second, "started again", func() (bool, string) {
		tv := c.tasks("again")[0]
		return tv.State == projections.TaskRunning && tv.Pid != first, fmt.Sprint(tv)
	})
	if n := len(c.events("again", "TaskStarted")); n != 2 {
		t.Errorf("%d TaskStarted in the log, want 2 (one per placement)", n)
	}
}
