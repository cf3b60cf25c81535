package master_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/client"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/internal/pgtest"
	"github.com/corralhq/corral/internal/testkit"
)

// TestHelperMasterProcess is not a test: the failover tests run it as a
// separate master process (re-executing the test binary), so that it can be
// killed with SIGKILL or paused with SIGSTOP.
func TestHelperMasterProcess(t *testing.T) {
	name := os.Getenv("CORRAL_HELPER_MASTER")
	if name == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	store, err := pgstore.Open(ctx, os.Getenv("CORRAL_HELPER_STORE"), pgstore.Options{PollInterval: 50 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	addr := os.Getenv("CORRAL_HELPER_LISTEN")
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	m, err := master.New(ctx, master.Config{Name: name, Advertise: addr, Store: store, Admins: []string{"root"}, LeaseTTL: 3 * time.Second,
		OnLeading: []func(context.Context, *master.Master){master.SchedulerLoop(master.SchedulerConfig{Interval: 100 * time.Millisecond})}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	g := grpc.NewServer()
	api.NewService(m).Register(g)
	master.NewAgentRegistry(m, "test", time.Second).Attach(g)
	go g.Serve(lis)
	m.Run(ctx)
	g.Stop()
	os.Exit(0)
}

type masterProc struct {
	name, addr string
	cmd        *exec.Cmd
}

func startMasterProc(t *testing.T, name, url string) *masterProc {
	t.Helper()
	return startMasterProcAt(t, name, url, testkit.FreeAddr(t))
}

func startMasterProcAt(t *testing.T, name, url, addr string) *masterProc {
	t.Helper()
	p := &masterProc{name: name, addr: addr}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperMasterProcess$", "-test.count=1")
	p.cmd.Env = append(os.Environ(), "CORRAL_HELPER_MASTER="+name, "CORRAL_HELPER_STORE="+url, "CORRAL_HELPER_LISTEN="+p.addr)
	p.cmd.Stderr = &prefixWriter{t: t, prefix: name}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	return p
}

type prefixWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if strings.Contains(line, "fenced") || strings.Contains(line, "leading") || strings.Contains(line, "no longer") {
			w.t.Logf("%s: %s", w.prefix, line)
		}
	}
}

func statusOf(addr string) (*apipb.StatusReply, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(as("root"), 2*time.Second)
	defer cancel()
	return apipb.NewCellClient(cc).Status(ctx, &apipb.StatusRequest{})
}

func leaderOf(t *testing.T, procs []*masterProc, timeout time.Duration, except string) *masterProc {
	t.Helper()
	var leader *masterProc
	found := testkit.Poll(timeout, func() bool {
		for _, p := range procs {
			if p.name == except {
				continue
			}
			if st, err := statusOf(p.addr); err == nil && st.Leader {
				leader = p
				return true
			}
		}
		return false
	})
	if !found {
		t.Fatalf("no leader among the masters within %s", timeout)
	}
	return leader
}

// submitter submits jobs continuously through a leader-following client
// and records every acknowledged submission.
type submitter struct {
	mu     sync.Mutex
	acked  map[string]int64 // request id -> last position
	lastOK time.Time
}

func (s *submitter) run(ctx context.Context, t *testing.T, c *client.Client, prefix string) {
	// A ticker paces the submissions: a steady load is the point, not the
	// most the cell can take.
	pace := time.NewTicker(5 * time.Millisecond)
	defer pace.Stop()
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		spec := &events.JobSpec{Name: id, Priority: 0, TaskCount: 2, Command: "/bin/true", Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 32 << 20}}
		callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		var rep *apipb.MutationReply
		err := c.Do(callCtx, func(ctx context.Context, api apipb.CellClient, opts ...grpc.CallOption) error {
			var err error
			rep, err = api.Submit(ctx, &apipb.SubmitRequest{RequestId: id, Spec: spec}, opts...)
			return err
		})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("submission %s never acknowledged: %v", id, err)
			}
			return
		}
		s.mu.Lock()
		s.acked[id] = rep.LastPosition
		s.lastOK = time.Now()
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-pace.C:
		}
	}
}

// acks counts the acknowledged submissions.
func (s *submitter) acks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acked)
}

// waitAcks waits until n more submissions than now are acknowledged: the
// stream runs under the replica that leads before the next fault.
func (s *submitter) waitAcks(t *testing.T, n int) {
	t.Helper()
	want := s.acks() + n
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%d more writes acknowledged", n), func() (bool, string) {
		got := s.acks()
		return got >= want, fmt.Sprintf("%d of %d", got, want)
	})
}

// waitOKSince waits until a submission is acknowledged after t0.
func (s *submitter) waitOKSince(t *testing.T, t0 time.Time, within time.Duration, what string) {
	t.Helper()
	testkit.Eventually(t, within, what, func() (bool, string) { return s.okSince(t0), "none" })
}

func (s *submitter) okSince(t0 time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastOK.After(t0)
}

// checkLog verifies the invariants of a log written across failovers.
func checkLog(t *testing.T, url string, acked map[string]int64) map[string]int {
	t.Helper()
	ctx := context.Background()
	store, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	submitted := map[string]int{}
	scheduled := map[string]int{}
	var epochs []int64
	var pos int64
	for {
		evs, err := store.Read(ctx, pos+1, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.Position != pos+1 {
				t.Fatalf("gap: position %d after %d", e.Position, pos)
			}
			pos = e.Position
			switch p := e.Data.(type) {
			case *events.JobSubmitted:
				submitted[e.CausationID]++
			case *events.TaskScheduled:
				scheduled[fmt.Sprintf("%s/%s/%d", p.User, p.Job, p.Index)]++
			case *events.LeaderElected:
				epochs = append(epochs, p.Epoch)
			}
		}
	}
	for id := range acked {
		if submitted[id] != 1 {
			t.Errorf("acknowledged submission %s is in the log %d times, want exactly once", id, submitted[id])
		}
	}
	for id, n := range submitted {
		if n != 1 {
			t.Errorf("submission %s appended %d times", id, n)
		}
	}
	for task, n := range scheduled {
		if n != 1 {
			t.Errorf("task %s placed %d times", task, n)
		}
	}
	for i := 1; i < len(epochs); i++ {
		if epochs[i] <= epochs[i-1] {
			t.Errorf("leader epochs go %v: not increasing", epochs)
		}
	}
	t.Logf("log: %d events, %d submissions, %d placements, leaders at epochs %v", pos, len(submitted), len(scheduled), epochs)
	return submitted
}

func registerMachines(t *testing.T, addr string, n int) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for i := 0; i < n; i++ {
		_, err := agentpb.NewMasterClient(cc).Register(context.Background(), &agentpb.MachineInfo{
			Name: fmt.Sprintf("m%d", i), Address: fmt.Sprintf("127.0.0.1:%d", 1+i),
			Capacity:  &events.Resources{CpuMilli: 64000, MemoryBytes: 256 << 30, DiskBytes: 1 << 40, Ports: 1000},
			PortFirst: 20000, PortLast: 20999})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestFailoverUnderLoad(t *testing.T) {
	url := migratedDatabase(t)
	var procs []*masterProc
	var addrs []string
	for _, n := range []string{"master1", "master2", "master3"} {
		p := startMasterProc(t, n, url)
		procs = append(procs, p)
		addrs = append(addrs, p.addr)
	}
	leader := leaderOf(t, procs, 20*time.Second, "")
	registerMachines(t, leader.addr, 3)
	sub, stopSubmitting := startSubmitting(t, addrs)
	sub.waitAcks(t, 30)

	// kill -9 the leader in the middle of the stream.
	killed := time.Now()
	if err := leader.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	next := leaderOf(t, procs, 15*time.Second, leader.name)
	sub.waitOKSince(t, killed, 15*time.Second, "a write acknowledged after the leader's death")
	failover := time.Since(killed)
	t.Logf("kill -9 of %s: %s leads and serves writes after %s", leader.name, next.name, failover.Round(time.Millisecond))
	if failover > 10*time.Second {
		t.Errorf("failover took %s, want under 10 s", failover)
	}
	sub.waitAcks(t, 20)

	// Pause the new leader instead: a request it received while paused is
	// fenced when it resumes, never appended.
	if err := next.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	late := lateWrite(next.addr)
	third := leaderOf(t, procs, 15*time.Second, next.name)
	sub.waitOKSince(t, paused.Add(time.Second), 20*time.Second, "a write acknowledged after pausing the leader")
	t.Logf("SIGSTOP of %s: %s leads after %s", next.name, third.name, time.Since(paused).Round(time.Millisecond))
	if err := next.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := <-late; err == nil {
		t.Error("the paused leader acknowledged a write after it was deposed")
	}
	testkit.Eventually(t, 5*time.Second, "the resumed old leader a follower", func() (bool, string) {
		st, err := statusOf(next.addr)
		return err == nil && !st.Leader, fmt.Sprint(st, err)
	})
	acked := stopSubmitting()
	if len(acked) < 20 {
		t.Fatalf("only %d submissions acknowledged", len(acked))
	}
	if n := checkLog(t, url, acked)["late-write"]; n != 0 {
		t.Errorf("the deposed leader's late write is in the log %d times", n)
	}
}

// lateWrite submits the job late-write to the master at addr, and answers
// when it does (a paused master: once it resumes).
func lateWrite(addr string) <-chan error {
	late := make(chan error, 1)
	go func() {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			late <- err
			return
		}
		defer cc.Close()
		lctx, lcancel := context.WithTimeout(as("alice"), 30*time.Second)
		defer lcancel()
		_, err = apipb.NewCellClient(cc).Submit(lctx, &apipb.SubmitRequest{RequestId: "late-write",
			Spec: &events.JobSpec{Name: "late", Priority: 0, TaskCount: 1, Command: "/bin/true", Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 32 << 20}}})
		late <- err
	}()
	return late
}

// TestFailoverSameNameRestart: the leader is paused (SIGSTOP) and a
// supervisor starts the replica again under the same name meanwhile. The
// new process is another holder: it waits for the paused one's lease to
// lapse and leads at a new epoch, so when the old one resumes its appends
// are fenced and it steps down; never do two processes lead at one epoch,
// and the cell keeps taking writes when either dies.
func TestFailoverSameNameRestart(t *testing.T) {
	url := migratedDatabase(t)
	old := startMasterProc(t, "master1", url)
	if leaderOf(t, []*masterProc{old}, 20*time.Second, "") != old {
		t.Fatal("master1 does not lead")
	}
	other := startMasterProc(t, "master2", url)
	registerMachines(t, old.addr, 3)
	procs := []*masterProc{old, other}

	// The client knows every address the replicas may be at, the
	// restarted one's included (a supervisor's restart elsewhere).
	fresh := &masterProc{name: "master1", addr: testkit.FreeAddr(t)}
	sub, stopSubmitting := startSubmitting(t, []string{old.addr, other.addr, fresh.addr})
	sub.waitAcks(t, 20)

	if err := old.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	started := startMasterProcAt(t, "master1", url, fresh.addr)
	procs = append(procs, started)
	sub.waitOKSince(t, paused.Add(100*time.Millisecond), 15*time.Second, "a write acknowledged after pausing the leader")
	t.Logf("leader paused and restarted under its name: writes acknowledged again after %s", time.Since(paused).Round(time.Millisecond))
	sub.waitAcks(t, 10)

	// The old process resumes believing it leads.
	if err := old.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "one leader after the old process resumed", func() (bool, string) {
		var leaders []string
		for _, p := range procs {
			if st, err := statusOf(p.addr); err == nil && st.Leader {
				leaders = append(leaders, p.addr)
			}
		}
		return len(leaders) == 1, fmt.Sprintf("%d replicas say they lead: %v", len(leaders), leaders)
	})
	if st, err := statusOf(old.addr); err != nil || st.Leader {
		t.Errorf("the resumed old process: %+v %v, want a follower", st, err)
	}

	// Whoever leads now dies: the others take over and writes go on.
	leader := leaderOf(t, procs, 5*time.Second, "")
	if err := leader.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	sub.waitOKSince(t, killed.Add(100*time.Millisecond), 15*time.Second, "a write acknowledged after killing the leader at "+leader.addr)
	t.Logf("kill -9 of the leader at %s: writes acknowledged again after %s", leader.addr, time.Since(killed).Round(time.Millisecond))
	acked := stopSubmitting()
	checkLog(t, url, acked)
}

// migratedDatabase is a new database with the event store's schema: made
// first, so that the masters started on it do not race to create it.
func migratedDatabase(t *testing.T) string {
	t.Helper()
	url := pgtest.NewDatabase(t)
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return url
}

// startSubmitting streams alice's submissions to the masters at addrs,
// through the client's failover, until stop, which returns the
// acknowledged ones (request id -> last position).
func startSubmitting(t *testing.T, addrs []string) (sub *submitter, stop func() map[string]int64) {
	c, err := client.New(addrs, "alice", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sub = &submitter{acked: map[string]int64{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sub.run(ctx, t, c, "job") }()
	t.Cleanup(func() { cancel(); <-done })
	return sub, func() map[string]int64 {
		cancel()
		<-done
		sub.mu.Lock()
		defer sub.mu.Unlock()
		return sub.acked
	}
}
