package master_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

// hostClock is one host's clock: the real time plus an offset the test
// moves, as when NTP steps a clock or an operator sets it wrong.
type hostClock struct{ off atomic.Int64 }

func (c *hostClock) now() time.Time        { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *hostClock) jump(by time.Duration) { c.off.Add(int64(by)) }
func (c *hostClock) String() string        { return time.Duration(c.off.Load()).String() }

// hostReplica is a master on its own host: its store connection and the
// master read the host's clock (recorded_at, lease expiry, command times).
type hostReplica struct {
	m    *master.Master
	addr string
	stop func()
}

func startHostReplica(t *testing.T, name, url, addr string, clock *hostClock) *hostReplica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	store, err := pgstore.Open(ctx, url, pgstore.Options{Clock: clock.now, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var lis net.Listener
	// The last incarnation's port may linger.
	testkit.Eventually(t, 5*time.Second, "listening on "+addr, func() (bool, string) {
		var err error
		lis, err = net.Listen("tcp", addr)
		return err == nil, fmt.Sprint(err)
	})
	m, err := master.New(ctx, master.Config{Name: name, Advertise: lis.Addr().String(), Store: store, Clock: clock.now,
		Admins: []string{"root"}, LeaseTTL: 3 * time.Second,
		OnLeading: []func(context.Context, *master.Master){master.SchedulerLoop(master.SchedulerConfig{Interval: 50 * time.Millisecond})}})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	api.NewService(m).Register(g)
	master.NewAgentRegistry(m, "test", time.Second).Attach(g)
	go g.Serve(lis)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	r := &hostReplica{m: m, addr: lis.Addr().String()}
	stopped := false
	r.stop = func() {
		if !stopped {
			stopped = true
			g.Stop()
			cancel()
			<-done
			store.Close()
		}
	}
	t.Cleanup(r.stop)
	return r
}

func waitLeader(t *testing.T, timeout time.Duration, r *hostReplica) time.Duration {
	t.Helper()
	start := time.Now()
	testkit.Eventually(t, timeout, r.m.Name()+" leading", func() (bool, string) { return r.m.Leading(), "" })
	return time.Since(start)
}

// A host's clock jumps back an hour while two masters, each on its own
// clock, take turns leading under a stream of submissions. Leases are
// judged on each writer's own clock, so the master an hour behind loses
// the lease at once to the other and leads again only when the other steps
// aside; the log is ordered by positions, and its times go back and forth
// without disturbing anything: positions stay gap-free, every acknowledged
// submission is in the log once, no task is placed twice, epochs rise, and
// every replica's projection equals the replay of the log.
func TestClockJumpDoesNotReorderTheLog(t *testing.T) {
	if testing.Short() {
		t.Skip("takes turns at leading")
	}
	url := migratedDatabase(t)
	clockA, clockB := &hostClock{}, &hostClock{}
	a := startHostReplica(t, "hostA", url, "127.0.0.1:0", clockA)
	waitLeader(t, 10*time.Second, a)
	b := startHostReplica(t, "hostB", url, "127.0.0.1:0", clockB)
	registerMachines(t, a.addr, 3)
	sub, stopSubmitting := startSubmitting(t, []string{a.addr, b.addr})
	sub.waitAcks(t, 20)

	// A's clock goes back an hour: its renewal writes an expiry an hour in
	// B's past, and B takes the lease.
	clockA.jump(-time.Hour)
	took := waitLeader(t, 10*time.Second, b)
	t.Logf("hostA's clock back an hour: hostB leads after %s", took.Round(time.Millisecond))
	testkit.Eventually(t, 5*time.Second, "hostA stepping down", func() (bool, string) { return !a.m.Leading(), "" })
	sub.waitAcks(t, 20)

	// B steps aside (released lease): A, an hour behind, leads and writes.
	b.stop()
	took = waitLeader(t, 10*time.Second, a)
	t.Logf("hostB stopped: hostA (clock %s) leads after %s", clockA, took.Round(time.Millisecond))
	sub.waitOKSince(t, time.Now(), 10*time.Second, "a write acknowledged while hostA leads with its clock an hour behind")
	sub.waitAcks(t, 20)

	// B back: A's lease looks an hour expired to it, so it takes over again.
	b = startHostReplica(t, "hostB", url, b.addr, clockB)
	took = waitLeader(t, 10*time.Second, b)
	t.Logf("hostB restarted: leads again after %s", took.Round(time.Millisecond))
	sub.waitOKSince(t, time.Now(), 10*time.Second, "a write acknowledged after hostB took over again")
	sub.waitAcks(t, 10)
	acked := stopSubmitting()
	checkLog(t, url, acked)

	// Times go back; positions do not.
	store, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	checkTimesGoBack(t, store)
	checkReplicasReplay(t, store, a, b)
}

// checkTimesGoBack: the log's occurred_at went back by about the hour of
// the jump, and its recorded_at never did.
func checkTimesGoBack(t *testing.T, store events.Store) {
	t.Helper()
	evs, err := store.Read(context.Background(), 1, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	var backwards, recordedBack int
	var deepest time.Duration
	for i := 1; i < len(evs); i++ {
		if d := evs[i-1].OccurredAt.Sub(evs[i].OccurredAt); d > 0 {
			backwards++
			deepest = max(deepest, d)
		}
		if evs[i].RecordedAt.Before(evs[i-1].RecordedAt) {
			recordedBack++
		}
	}
	if deepest < 50*time.Minute {
		t.Errorf("the log's times never went back by the hour hostA's clock jumped (deepest %s): the test did not exercise the jump", deepest)
	}
	// recorded_at is stamped by the writer's clock but never before the
	// last one recorded (events.RecordedAt), so a search of the log by time
	// (projections.PositionAt, StateAtTime) stays sound across the jump.
	if recordedBack != 0 {
		t.Errorf("recorded_at goes back %d times along the log", recordedBack)
	}
	t.Logf("%d events; occurred_at goes back %d times, by up to %s, recorded_at %d times; positions 1..%d without a gap",
		len(evs), backwards, deepest.Round(time.Second), recordedBack, len(evs))
}

// checkReplicasReplay: every replica's projection is the replay of the log
// at its position.
func checkReplicasReplay(t *testing.T, store events.Store, replicas ...*hostReplica) {
	t.Helper()
	for _, r := range replicas {
		head, err := store.Head(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.m.WaitFor(context.Background(), head); err != nil {
			t.Fatal(err)
		}
		var got []byte
		var pos int64
		r.m.View(func(s *projections.State) { pos, got = s.Position, projections.Encode(s) })
		want, err := projections.StateAt(context.Background(), store, pos)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(projections.Encode(want)) {
			t.Errorf("%s's projection at %d differs from the replay of the log", r.m.Name(), pos)
		}
	}
}
