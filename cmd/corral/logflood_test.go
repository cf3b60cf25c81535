package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/internal/testkit"
)

// TestLogStreamFloodLeavesMachinesUp is issue 36's first attack on a real
// `corral up`: 14 non-admin users each open 300 `task logs -f` streams on
// their own task (4,200 in all), paced under the per-user request rate,
// against a cell capped at 16 streams a user and 128 in all. The caps
// refuse the rest at once, naming themselves; no machine is marked down
// (the link's polls never wait behind streams); another user's ordinary
// calls stay near their usual latency; the master's memory and open files
// stay bounded; and a stream whose client leaves gives its slot back.
func TestLogStreamFloodLeavesMachinesUp(t *testing.T) {
	c := startCell(t, cellOptions{flags: []string{"--max-streams-per-user", strconv.Itoa(floodCapPerUser), "--max-streams", strconv.Itoa(floodCapTotal)}})
	f := newStreamFlood(t, c)
	before := f.carolsLatency(30)
	pid := c.pid()
	rssBefore, fdsBefore := rssOf(t, pid), fdsOf(t, pid)
	floodCtx, endFlood := context.WithCancel(context.Background())
	defer endFlood()
	f.ctx = floodCtx
	// Sample the master's memory and open files while the flood runs.
	var rssPeak, fdsPeak atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		// A ticker: sampling paces itself, it waits for nothing.
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for floodCtx.Err() == nil {
			rssPeak.Store(max(rssPeak.Load(), rssOf(t, pid)))
			fdsPeak.Store(max(fdsPeak.Load(), fdsOf(t, pid)))
			select {
			case <-tick.C:
			case <-floodCtx.Done():
			}
		}
	}()

	f.firstUserAloneMeetsItsCap()
	during, floodTook := f.floodWhileCarolWorks()
	endFlood()
	<-sampled
	f.streams.Wait()

	f.servedOrRefusedByACap(floodTook)
	f.noMachineDownNoTaskLost()
	// Carol was answered near her usual latency.
	medBefore, medDuring := median(before), median(during)
	t.Logf("carol's ListTasks: median %s before (%d calls), %s during the flood (%d calls), slowest during %s",
		medBefore, len(before), medDuring, len(during), slices.Max(during))
	if medDuring > 3*medBefore+25*time.Millisecond {
		t.Errorf("carol's median latency went from %s to %s during the flood", medBefore, medDuring)
	}
	// Memory and open files stayed bounded (in the issue: 60 MB to 1.47 GB
	// and 35 to 13,287 files).
	t.Logf("corral up: RSS %d MiB before, at most %d MiB during; open files %d before, at most %d during",
		rssBefore>>20, rssPeak.Load()>>20, fdsBefore, fdsPeak.Load())
	if rssPeak.Load() > rssBefore+256<<20 {
		t.Errorf("RSS grew from %d MiB to %d MiB", rssBefore>>20, rssPeak.Load()>>20)
	}
	if fdsPeak.Load() > fdsBefore+2*floodCapTotal+100 {
		t.Errorf("open files grew from %d to %d", fdsBefore, fdsPeak.Load())
	}
	f.slotsComeBack()
}

const (
	floodUsers, floodPerUser       = 14, 300
	floodCapPerUser, floodCapTotal = 16, 128
	// floodEarly is how many streams u01 opens alone, past its cap.
	floodEarly = floodCapPerUser + 8
)

// streamFlood is the attack: the flooding users' clients, carol's, and
// what became of every stream opened.
type streamFlood struct {
	t                                   *testing.T
	ctx                                 context.Context // ends the flood's streams
	flooders                            []apipb.CellClient
	names                               []string
	carol                               apipb.CellClient
	held                                atomic.Int64 // streams served
	refusedUser, refusedCell, otherErrs atomic.Int64
	mu                                  sync.Mutex
	firstOther                          error
	streams                             sync.WaitGroup // the readers of held streams
}

// newStreamFlood gives every user a token, as `corral token issue` gives
// one, and a best-effort task (no quota needed) that prints a line a
// second; carol gets a token to work beside them.
func newStreamFlood(t *testing.T, c *testCell) *streamFlood {
	t.Helper()
	f := &streamFlood{t: t}
	for i := range floodUsers {
		f.names = append(f.names, fmt.Sprintf("u%02d", i+1))
	}
	tokens, _ := c.issueUserTokens(t, append(slices.Clone(f.names), "carol")...)
	for _, u := range f.names {
		f.flooders = append(f.flooders, apipb.NewCellClient(dialWithToken(t, c, tokens[u])))
	}
	f.carol = apipb.NewCellClient(dialWithToken(t, c, tokens["carol"]))
	testkit.Eventually(t, 10*time.Second, "the new tokens accepted", func() (bool, string) {
		for i, cl := range append(slices.Clone(f.flooders), f.carol) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := cl.WhoAmI(ctx, &apipb.WhoAmIRequest{})
			cancel()
			if err != nil {
				return false, fmt.Sprintf("client %d: %v", i, err)
			}
		}
		return true, ""
	})
	jobFile := filepath.Join(t.TempDir(), "chatty.jsonnet")
	if err := os.WriteFile(jobFile, []byte(`{name: 'chatty', priority: 'best-effort', count: 1, command: '/bin/sh',
  args: ['-c', 'while true; do echo "line of $CORRAL_USER"; sleep 1; done'], resources: {cpu: '10m', memory: '16MiB'}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, u := range f.names {
		if out, code := runCorral(t, c.root, append(slices.Clone(c.env), "CORRAL_TOKEN="+tokens[u]), 60*time.Second, "job", "submit", jobFile, "--wait"); code != 0 {
			t.Fatalf("%s submitting chatty: exit %d\n%s", u, code, out)
		}
	}
	return f
}

// dialWithToken is a client of the cell's API holding token.
func dialWithToken(t *testing.T, c *testCell, token string) *grpc.ClientConn {
	t.Helper()
	opts, err := auth.ClientOptions{CAFile: filepath.Join(c.data, "certs", auth.CAFile), Token: token}.DialOptions()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(c.grpcAddr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// ordinary is carol's ordinary call, timed.
func (f *streamFlood) ordinary() time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := f.carol.ListTasks(ctx, &apipb.ListTasksRequest{User: "u01", Job: "chatty"}); err != nil {
		f.t.Errorf("carol's ListTasks: %v", err)
	}
	return time.Since(start)
}

// carolsLatency is n of carol's calls before the flood, her usual latency.
func (f *streamFlood) carolsLatency(n int) []time.Duration {
	// A ticker paces the calls: a measure of latency, not a wait.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var ds []time.Duration
	for range n {
		ds = append(ds, f.ordinary())
		<-tick.C
	}
	return ds
}

// follow opens one stream as `corral task logs -f` does; an accepted one
// is read until the flood ends, as a client that stays.
func (f *streamFlood) follow(cl apipb.CellClient, user string) {
	st, err := cl.TaskLogs(f.ctx, &apipb.TaskLogsRequest{User: user, Job: "chatty", Index: 0, Follow: true})
	if err == nil {
		_, err = st.Recv()
	}
	switch {
	case err == nil:
		f.held.Add(1)
		f.streams.Add(1)
		go func() {
			defer f.streams.Done()
			for {
				if _, err := st.Recv(); err != nil {
					return
				}
			}
		}()
	case status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), fmt.Sprintf("--max-streams-per-user %d", floodCapPerUser)):
		f.refusedUser.Add(1)
	case status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), fmt.Sprintf("--max-streams %d", floodCapTotal)):
		f.refusedCell.Add(1)
	default:
		f.otherErrs.Add(1)
		f.mu.Lock()
		if f.firstOther == nil {
			f.firstOther = err
		}
		f.mu.Unlock()
	}
}

// firstUserAloneMeetsItsCap: u01 first, alone: past its own cap, its
// streams are refused by the cap per user while the cell has room.
func (f *streamFlood) firstUserAloneMeetsItsCap() {
	f.t.Helper()
	for range floodEarly {
		f.follow(f.flooders[0], f.names[0])
	}
	if f.refusedUser.Load() != floodEarly-floodCapPerUser || f.held.Load() != floodCapPerUser {
		f.t.Errorf("u01 alone: %d streams held, %d refused by the cap per user; want %d and %d (first other error: %v)",
			f.held.Load(), f.refusedUser.Load(), floodCapPerUser, floodEarly-floodCapPerUser, f.firstOther)
	}
}

// floodWhileCarolWorks: every user opens floodPerUser streams at 50 a
// second (the per-user rate limit is 200), all users at once, while carol
// works; the streams stay open past the time the link needs to mark a
// machine down (3 missed polls a second apart, after its grace). It
// returns carol's latencies meanwhile and how long the opening took.
func (f *streamFlood) floodWhileCarolWorks() ([]time.Duration, time.Duration) {
	start := time.Now()
	var flood sync.WaitGroup
	for i, cl := range f.flooders {
		flood.Add(1)
		go func() {
			defer flood.Done()
			tick := time.NewTicker(20 * time.Millisecond) // the pace of the attack
			defer tick.Stop()
			var opens sync.WaitGroup
			for range floodPerUser {
				<-tick.C
				opens.Add(1)
				go func() { defer opens.Done(); f.follow(cl, f.names[i]) }()
			}
			opens.Wait()
		}()
	}
	floodDone := make(chan struct{})
	go func() { flood.Wait(); close(floodDone) }()
	// A ticker paces carol's calls, as a user's own pace.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var during []time.Duration
	for flooding := true; flooding; {
		during = append(during, f.ordinary())
		select {
		case <-floodDone:
			flooding = false
		case <-tick.C:
		}
	}
	took := time.Since(start)
	for hold := time.After(8 * time.Second); ; {
		during = append(during, f.ordinary())
		select {
		case <-hold:
			return during, took
		case <-tick.C:
		}
	}
}

// servedOrRefusedByACap: at most the cell's cap of streams were served,
// and most of it; both caps refused some; every stream was served or
// refused by a cap.
func (f *streamFlood) servedOrRefusedByACap(took time.Duration) {
	t := f.t
	t.Helper()
	t.Logf("flood: %d users x %d streams in %s: %d held, %d refused by the cap per user, %d by the cell's cap, %d other errors (first: %v)",
		floodUsers, floodPerUser, took.Round(time.Millisecond), f.held.Load(), f.refusedUser.Load(), f.refusedCell.Load(), f.otherErrs.Load(), f.firstOther)
	if f.held.Load() > floodCapTotal || f.held.Load() < floodCapTotal/2 {
		t.Errorf("%d streams were served, want at most the cell's cap of %d and most of it", f.held.Load(), floodCapTotal)
	}
	if f.refusedUser.Load() == 0 || f.refusedCell.Load() == 0 {
		t.Errorf("refusals naming the cap per user: %d, the cell's: %d; want both", f.refusedUser.Load(), f.refusedCell.Load())
	}
	if n := f.held.Load() + f.refusedUser.Load() + f.refusedCell.Load(); n != floodUsers*floodPerUser+floodEarly {
		t.Errorf("%d of %d streams were served or refused by a cap; first other error: %v", n, floodUsers*floodPerUser+floodEarly, f.firstOther)
	}
}

// noMachineDownNoTaskLost: no machine was marked down, and every task
// still runs.
func (f *streamFlood) noMachineDownNoTaskLost() {
	t := f.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	downs, err := f.carol.Events(ctx, &apipb.EventsRequest{Type: "MachineDown"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(downs.GetEvents()); n != 0 {
		t.Errorf("%d MachineDown events during the flood: %v", n, downs.GetEvents())
	}
	if lost, err := f.carol.Events(ctx, &apipb.EventsRequest{Type: "TaskLost"}); err != nil || len(lost.GetEvents()) != 0 {
		t.Errorf("TaskLost during the flood: %v %v", lost.GetEvents(), err)
	}
}

// slotsComeBack: the clients left, their slots came back, and a user
// streams again.
func (f *streamFlood) slotsComeBack() {
	f.t.Helper()
	testkit.EventuallyEvery(f.t, 10*time.Second, 100*time.Millisecond, "a stream after the flood's clients left", func() (bool, string) {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := f.flooders[0].TaskLogs(c, &apipb.TaskLogsRequest{Job: "chatty", Follow: true})
		if err == nil {
			_, err = st.Recv()
		}
		if err != nil && status.Code(err) != codes.ResourceExhausted {
			f.t.Fatalf("a stream after the flood's clients left: %v", err)
		}
		return err == nil, fmt.Sprint(err)
	})
}

// rssOf is a process's resident memory in bytes (VmRSS).
func rssOf(t *testing.T, pid int) int64 {
	kb, err := testkit.ProcStatus(pid, "VmRSS:")
	if err != nil {
		t.Errorf("reading the master's status: %v", err)
	}
	return kb << 10
}

// fdsOf is how many files a process has open.
func fdsOf(t *testing.T, pid int) int64 {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Errorf("reading the master's open files: %v", err)
	}
	return int64(len(ents))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
