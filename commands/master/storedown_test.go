package master_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/internal/pgtest"
	"github.com/corralhq/corral/internal/testkit"
)

// newLinkCellOn is newLinkCell on a given store.
func newLinkCellOn(t *testing.T, store events.Store, cfg master.LinkConfig) *linkCell {
	t.Helper()
	cfg.Cell = "test"
	c := &linkCell{t: t, store: store, linkCfg: cfg, schedCfg: master.SchedulerConfig{Interval: 50 * time.Millisecond}, dir: t.TempDir(),
		run:    fmt.Sprintf("%d-%d", os.Getpid(), runs.Add(1)),
		agents: map[string]*agentProc{}, proxies: map[string]*proxy{}}
	c.cgroups = "corral-linktest-" + c.run
	t.Cleanup(c.cleanup)
	c.startMaster("master1")
	return c
}

// writer submits jobs one after another through the API, each retried
// with its request id until it is acknowledged, and records what every
// attempt was answered.
type writer struct {
	mu      sync.Mutex
	acked   map[string]int64 // request id -> last position
	refused []attempt        // attempts answered with an error
	lastOK  time.Time
}

type attempt struct {
	at   time.Time
	code codes.Code
	msg  string
	took time.Duration
}

func (w *writer) run(ctx context.Context, api apipb.CellClient, prefix string) {
	// Tickers pace the writes and their retries: a steady load through the
	// outage is the point, not the most the cell can take.
	pace, retry := time.NewTicker(20*time.Millisecond), time.NewTicker(100*time.Millisecond)
	defer pace.Stop()
	defer retry.Stop()
	wait := func(tick *time.Ticker) {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		// Pending for ever (no machine has the rack): the jobs cost no
		// processes, only appends.
		spec := &events.JobSpec{Name: id, TaskCount: 1, Command: "/bin/true", Resources: &events.Resources{CpuMilli: 10, MemoryBytes: 8 << 20},
			Constraints: []*events.Constraint{{Attribute: "rack", Op: "=", Values: []string{"nowhere"}}}}
		for ctx.Err() == nil {
			actx, cancel := context.WithTimeout(as("alice"), 3*time.Second)
			start := time.Now()
			rep, err := api.Submit(actx, &apipb.SubmitRequest{RequestId: id, Spec: spec})
			cancel()
			w.mu.Lock()
			if err == nil {
				w.acked[id], w.lastOK = rep.LastPosition, time.Now()
				w.mu.Unlock()
				break
			}
			if ctx.Err() == nil {
				st, _ := status.FromError(err)
				w.refused = append(w.refused, attempt{start, st.Code(), st.Message(), time.Since(start)})
			}
			w.mu.Unlock()
			wait(retry)
		}
		wait(pace)
	}
}

func (w *writer) okSince(t0 time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastOK.After(t0)
}

// checkAcked reads the whole log: positions gap-free, every acknowledged
// submission there exactly once, at the position acknowledged.
func checkAcked(t *testing.T, store events.Store, acked map[string]int64) {
	t.Helper()
	evs, err := store.Read(context.Background(), 1, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	submitted := map[string][]int64{}
	for i, e := range evs {
		if e.Position != int64(i+1) {
			t.Fatalf("gap: position %d at index %d", e.Position, i)
		}
		if _, ok := e.Data.(*events.JobSubmitted); ok {
			submitted[e.CausationID] = append(submitted[e.CausationID], e.Position)
		}
	}
	for id, last := range acked {
		if ps := submitted[id]; len(ps) != 1 || ps[0] > last {
			t.Errorf("acknowledged submission %s (at ..%d) is in the log at %v, want once", id, last, ps)
		}
	}
}

// The event store goes away: a private PostgreSQL, stopped with
// `pg_ctl stop -m immediate` for longer than the lease, then started again.
// Writes are refused at once with Unavailable naming the log, tasks (real
// processes under real agents) run on untouched, writes resume once the
// database is back (a new term: the lease lapsed meanwhile), and nothing
// acknowledged is lost.
func TestStoreDownTasksRunOnAndWritesResume(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a database for 8 s")
	}
	pg := pgtest.NewServer(t, pgtest.Options{Durable: true}) // acknowledged commits survive the stop
	ctx := context.Background()
	store, err := pgstore.Open(ctx, pg.URL(), pgstore.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c := newLinkCellOn(t, store, testLinkConfig())
	c.startAgent("m0", false)
	c.startAgent("m1", false)
	c.submit(c.spec("svc", 4, "exec sleep 600"))
	before := c.runningOn("svc", 4, 30*time.Second, func(string) bool { return true })
	agents := map[string]int{}
	for n, ap := range c.agents {
		agents[n] = ap.cmd.Process.Pid
	}

	w := &writer{acked: map[string]int64{}}
	wctx, stopWriter := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.run(wctx, c.master.client, "sub") }()
	testkit.Eventually(t, 30*time.Second, "writes acknowledged before the outage", func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.acked) >= 10, fmt.Sprint(len(w.acked), " acknowledged")
	})

	down := time.Now()
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	outage := 8 * time.Second
	stayAliveThrough(t, down.Add(outage), before, agents, "the store was down")
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	testkit.Eventually(t, 30*time.Second, "a write acknowledged after the store came back", func() (bool, string) { return w.okSince(up), "" })
	resumed := time.Since(up)
	stopWriter()
	<-done

	// The same processes, and the master knows them; new work runs.
	after := c.runningOn("svc", 4, 15*time.Second, func(string) bool { return true })
	for i, tv := range before {
		if after[i].Pid != tv.Pid || after[i].Machine != tv.Machine {
			t.Errorf("task %d: pid %d on %s before the outage, %d on %s after", i, tv.Pid, tv.Machine, after[i].Pid, after[i].Machine)
		}
	}
	c.submit(c.spec("after", 2, "exec sleep 600"))
	c.runningOn("after", 2, 20*time.Second, func(string) bool { return true })

	w.mu.Lock()
	acked, refused := w.acked, w.refused
	w.mu.Unlock()
	checkAcked(t, store, acked)
	during, slowest, names := checkRefusals(t, refused, down, up)
	t.Logf("store down %s: %d writes refused (all Unavailable; slowest answer %s; kinds %v); first refusal: %q",
		outage, len(during), slowest.Round(time.Millisecond), names, during[0].msg)
	t.Logf("store back: a write acknowledged after %s; %d submissions acknowledged in all, each in the log once; 4 tasks ran on with the same pids",
		resumed.Round(time.Millisecond), len(acked))
}

// stayAliveThrough watches the tasks and agents until an outage ends: the
// outage's length is the subject, and one that dies fails the test at once,
// saying it died while (what).
func stayAliveThrough(t *testing.T, end time.Time, tasks map[int32]taskView, agents map[string]int, what string) {
	t.Helper()
	dead := ""
	testkit.Poll(time.Until(end), func() bool {
		for i, tv := range tasks {
			if !alive(int(tv.Pid)) {
				dead = fmt.Sprintf("task %d (pid %d)", i, tv.Pid)
				return true
			}
		}
		for n, pid := range agents {
			if !alive(pid) {
				dead = "agent " + n
				return true
			}
		}
		return false
	})
	if dead != "" {
		t.Fatalf("%s died while %s", dead, what)
	}
}

// checkRefusals: every write refused was refused during the outage (down
// to up), as Unavailable, the first naming the event log. It returns
// those refusals, the slowest answer and the kinds of message.
func checkRefusals(t *testing.T, refused []attempt, down, up time.Time) (during []attempt, slowest time.Duration, names []string) {
	t.Helper()
	kinds := map[string]int{}
	for _, a := range refused {
		if a.at.Add(a.took).Before(down) {
			t.Errorf("a write was refused before the outage: %s %s", a.code, a.msg)
			continue
		}
		if a.code != codes.Unavailable {
			t.Errorf("a write %s after the store went down (%s after it came back) was answered %s (%s) after %s, want Unavailable", a.at.Sub(down), a.at.Sub(up), a.code, a.msg, a.took)
		}
		during = append(during, a)
		slowest = max(slowest, a.took)
		kind := a.msg
		if i := strings.Index(kind, ":"); i > 0 {
			kind = kind[:i]
		}
		kinds[kind]++
	}
	if len(during) == 0 {
		t.Fatal("no write was refused while the store was down")
	}
	if first := during[0]; !strings.Contains(first.msg, "event log") {
		t.Errorf("the first refusal does not name the event log: %s", first.msg)
	}
	names = slices.Sorted(func(yield func(string) bool) {
		for k := range kinds {
			if !yield(k) {
				return
			}
		}
	})
	return during, slowest, names
}
