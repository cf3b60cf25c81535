package master_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

// cutStore is one replica's connection to the log, which the test can cut:
// every call fails, as for a master partitioned from the database or dead.
type cutStore struct {
	events.Store
	cut atomic.Bool
}

func (s *cutStore) err() error {
	if s.cut.Load() {
		return errUnreachable
	}
	return nil
}

func (s *cutStore) AppendMany(ctx context.Context, reqs []events.AppendRequest) ([]events.AppendResult, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.AppendMany(ctx, reqs)
}

func (s *cutStore) Append(ctx context.Context, req events.AppendRequest) (events.AppendResult, error) {
	if err := s.err(); err != nil {
		return events.AppendResult{}, err
	}
	return s.Store.Append(ctx, req)
}

func (s *cutStore) Read(ctx context.Context, from int64, limit int) ([]events.Event, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Read(ctx, from, limit)
}

func (s *cutStore) Subscribe(after int64) *events.Subscription {
	return events.NewSubscription(s, nil, after, 1000, 20*time.Millisecond)
}

func (s *cutStore) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (events.Lease, error) {
	if err := s.err(); err != nil {
		return events.Lease{}, err
	}
	return s.Store.AcquireLease(ctx, name, holder, ttl)
}

func (s *cutStore) RenewLease(ctx context.Context, l events.Lease, ttl time.Duration) (events.Lease, error) {
	if err := s.err(); err != nil {
		return events.Lease{}, err
	}
	return s.Store.RenewLease(ctx, l, ttl)
}

func (s *cutStore) ReleaseLease(ctx context.Context, l events.Lease) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.ReleaseLease(ctx, l)
}

// startStandby starts another replica of the cell on store, with the link
// and the scheduler, and returns at once: it follows until it leads.
func (c *linkCell) startStandby(name string, store events.Store) *liveMaster {
	c.t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stats := &master.LinkStats{}
	lc := c.linkCfg
	lc.Stats = stats
	m, err := master.New(ctx, master.Config{Name: name, Advertise: lis.Addr().String(), Store: store, Admins: []string{"root"},
		Logger:    slog.New(slog.NewTextHandler(&testLog{t: c.t, prefix: name}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnLeading: []func(context.Context, *master.Master){master.SchedulerLoop(c.schedCfg), master.Link(lc)}})
	if err != nil {
		c.t.Fatal(err)
	}
	g := grpc.NewServer()
	api.NewService(m).Register(g)
	master.NewAgentRegistry(m, "test", lc.Interval).Attach(g)
	go g.Serve(lis)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	var once sync.Once
	lm := &liveMaster{m: m, client: apipb.NewCellClient(conn), stats: stats, stop: func() {
		once.Do(func() { conn.Close(); g.Stop(); cancel(); <-done })
	}}
	c.t.Cleanup(lm.stop)
	return lm
}

// An agent killed and restarted, and another partitioned and healed, while
// the leader dies and a standby takes over, all at once. The restarted
// agent re-adopts its tasks across the failover (same pids, nothing
// rescheduled); the partitioned machine's tasks move to the machines the
// new leader reaches, and once the partition heals the copies left behind
// are killed: every task ends with exactly one process, where the new
// leader's projection says, and that projection is the log's.
func TestAgentFaultsDuringFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a lease and a partition")
	}
	store := backends[1].Open(t)
	leaderConn := &cutStore{Store: store}
	c := newLinkCellOn(t, leaderConn, testLinkConfig())
	standby := c.startStandby("master2", store)
	c.startAgent("m0", true)
	c.startAgent("m1", true)
	c.startAgent("m2", false)
	testkit.Eventually(t, 10*time.Second, "three machines up", func() (bool, string) {
		return c.machineState("m0") == projections.MachineUp && c.machineState("m1") == projections.MachineUp && c.machineState("m2") == projections.MachineUp, ""
	})
	c.submit(c.spec("svc", 9, "exec sleep 600"))
	before := c.runningOn("svc", 9, 30*time.Second, func(string) bool { return true })
	onM0, onM1 := tasksOn(before, "m0"), tasksOn(before, "m1")
	if len(onM0) == 0 || len(onM1) == 0 {
		t.Fatalf("the scheduler left m0 or m1 empty: %v", before)
	}

	// All at once: the leader is cut off the store and stopped (its lease
	// is not released: a standby must wait it out), m0's agent is killed,
	// m1 is partitioned.
	t0 := time.Now()
	leaderConn.cut.Store(true)
	c.stopMaster()
	c.killAgent("m0")
	c.proxies["m1"].setCut(true)
	c.mu.Lock()
	c.master = standby
	c.mu.Unlock()
	// The sleep is the subject: m0's agent stays dead a while, and is
	// restarted before any leader polls it.
	time.Sleep(2 * time.Second)
	c.startAgent("m0", true)
	testkit.Eventually(t, 20*time.Second, "the standby leading", func() (bool, string) { return standby.m.Leading(), "" })
	failover := time.Since(t0)

	// m1's tasks run elsewhere; m0's were adopted where they ran.
	moved := c.runningOn("svc", 9, 30*time.Second, func(m string) bool { return m != "m1" })
	movedAfter := time.Since(t0)
	for _, i := range onM0 {
		if moved[i].Machine != "m0" || moved[i].Pid != before[i].Pid {
			t.Errorf("task %d ran on m0 as pid %d; across the agent's restart and the failover it became pid %d on %s", i, before[i].Pid, moved[i].Pid, moved[i].Machine)
		}
	}
	procs := c.procs("svc")
	for _, i := range onM1 {
		if !slices.Contains(procs[i], int(before[i].Pid)) {
			t.Errorf("task %d's process %d on the partitioned m1 died before the partition healed", i, before[i].Pid)
		}
	}

	healed := time.Now()
	c.proxies["m1"].setCut(false)
	testkit.Eventually(t, 20*time.Second, "one process per task, and m1 up", func() (bool, string) {
		procs := c.procs("svc")
		for i := int32(0); i < 9; i++ {
			if len(procs[i]) != 1 {
				return false, fmt.Sprint(procs)
			}
		}
		return c.machineState("m1") == projections.MachineUp, "m1 not up"
	})
	dupsGone := time.Since(healed)
	final := c.runningOn("svc", 9, 10*time.Second, func(m string) bool { return m != "m1" })
	for _, i := range onM1 {
		if alive(int(before[i].Pid)) {
			t.Errorf("task %d's copy %d on m1 still runs", i, before[i].Pid)
		}
	}

	checkProjectionIsLog(t, standby.m, store)
	t.Logf("leader cut off and stopped, m0's agent killed, m1 partitioned: master2 led after %s; m0 restarted and re-adopted %d tasks (same pids); m1's %d tasks ran elsewhere %s after the faults",
		failover.Round(time.Millisecond), len(onM0), len(onM1), movedAfter.Round(time.Millisecond))
	t.Logf("partition healed: m1's copies killed and every task one process after %s; final placement %v", dupsGone.Round(time.Millisecond), placement(final))
}

// tasksOn are the indexes of the tasks of ts on machine, in order.
func tasksOn(ts map[int32]taskView, machine string) []int32 {
	var out []int32
	for i, tv := range ts {
		if tv.Machine == machine {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// checkProjectionIsLog: the leader m's projection is the log's, once it has
// applied what the log holds.
func checkProjectionIsLog(t *testing.T, m *master.Master, store events.Store) {
	t.Helper()
	loaded, err := projections.Load(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	var same bool
	testkit.Eventually(t, 5*time.Second, "the leader's state equal to the log's", func() (bool, string) {
		loaded, err = projections.Load(context.Background(), store)
		if err != nil {
			t.Fatal(err)
		}
		m.View(func(s *projections.State) {
			same = s.Position == loaded.Position && string(projections.Encode(s)) == string(projections.Encode(loaded))
		})
		return same, ""
	})
}

func placement(ts map[int32]taskView) map[string][]int32 {
	out := map[string][]int32{}
	for i, tv := range ts {
		out[tv.Machine] = append(out[tv.Machine], i)
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}
