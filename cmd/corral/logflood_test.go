package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
	if testing.Short() {
		t.Skip("builds the corral binary and runs a whole cell")
	}
	const (
		users, perUser       = 14, 300
		capPerUser, capTotal = 16, 128
	)
	bin := buildCorral(t)
	data := t.TempDir()
	grpcAddr, httpAddr, dnsAddr := freeTCP(t), freeTCP(t), freeUDPAndTCP(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CORRAL_USER=alice", "CORRAL_MASTER="+grpcAddr, "CORRAL_CELL=dev", "CORRAL_DATA="+data)
	up := startUp(t, bin, root, env, []string{"up", "--data", data, "--listen", grpcAddr, "--http", httpAddr, "--dns", dnsAddr,
		"--port-base", strconv.Itoa(freeTaskPorts(t, 3)),
		"--max-streams-per-user", strconv.Itoa(capPerUser), "--max-streams", strconv.Itoa(capTotal)})
	pid := up.cmd.Process.Pid

	// Every user gets a token, as `corral token issue` gives one, and a
	// best-effort task (no quota needed) that prints a line a second.
	tokens := auth.NewTokens(filepath.Join(data, "certs", auth.TokensFile))
	jobFile := filepath.Join(t.TempDir(), "chatty.jsonnet")
	if err := os.WriteFile(jobFile, []byte(`{name: 'chatty', priority: 'best-effort', count: 1, command: '/bin/sh',
  args: ['-c', 'while true; do echo "line of $CORRAL_USER"; sleep 1; done'], resources: {cpu: '10m', memory: '16MiB'}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	issued := map[string]string{}
	dial := func(user string) *grpc.ClientConn {
		t.Helper()
		tok, err := tokens.Issue(user, auth.RoleUser)
		if err != nil {
			t.Fatal(err)
		}
		issued[user] = tok
		opts, err := auth.ClientOptions{CAFile: filepath.Join(data, "certs", auth.CAFile), Token: tok}.DialOptions()
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient(grpcAddr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	flooders := make([]apipb.CellClient, users)
	names := make([]string, users)
	for i := range flooders {
		names[i] = fmt.Sprintf("u%02d", i+1)
		flooders[i] = apipb.NewCellClient(dial(names[i]))
	}
	carol := apipb.NewCellClient(dial("carol"))
	// The master reads the tokens file again within a second of a change.
	testkit.Eventually(t, 10*time.Second, "the new tokens accepted", func() (bool, string) {
		for i, c := range append(slices.Clone(flooders), carol) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := c.WhoAmI(ctx, &apipb.WhoAmIRequest{})
			cancel()
			if err != nil {
				return false, fmt.Sprintf("client %d: %v", i, err)
			}
		}
		return true, ""
	})
	for _, u := range names {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, "job", "submit", jobFile, "--wait")
		cmd.Dir, cmd.Env = root, append(slices.Clone(env), "CORRAL_TOKEN="+issued[u])
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s submitting chatty: %v\n%s", u, err, out)
		}
	}

	// Carol's ordinary call, timed: the usual latency before the flood.
	ordinary := func() time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := carol.ListTasks(ctx, &apipb.ListTasksRequest{User: "u01", Job: "chatty"}); err != nil {
			t.Errorf("carol's ListTasks: %v", err)
		}
		return time.Since(start)
	}
	var before []time.Duration
	for range 30 {
		before = append(before, ordinary())
		time.Sleep(20 * time.Millisecond)
	}
	rssBefore, fdsBefore := rssOf(t, pid), fdsOf(t, pid)

	floodCtx, endFlood := context.WithCancel(context.Background())
	defer endFlood()
	var (
		held, refusedUser, refusedCell, otherErrs atomic.Int64
		mu                                        sync.Mutex
		firstOther                                error
		streams                                   sync.WaitGroup
	)
	// follow opens one stream as `corral task logs -f` does; an accepted
	// one is read until the flood ends, as a client that stays.
	follow := func(cl apipb.CellClient, user string) {
		st, err := cl.TaskLogs(floodCtx, &apipb.TaskLogsRequest{User: user, Job: "chatty", Index: 0, Follow: true})
		if err == nil {
			_, err = st.Recv()
		}
		switch {
		case err == nil:
			held.Add(1)
			streams.Add(1)
			go func() {
				defer streams.Done()
				for {
					if _, err := st.Recv(); err != nil {
						return
					}
				}
			}()
		case status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), fmt.Sprintf("--max-streams-per-user %d", capPerUser)):
			refusedUser.Add(1)
		case status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), fmt.Sprintf("--max-streams %d", capTotal)):
			refusedCell.Add(1)
		default:
			otherErrs.Add(1)
			mu.Lock()
			if firstOther == nil {
				firstOther = err
			}
			mu.Unlock()
		}
	}

	// Sample the master's memory and open files while the flood runs.
	var rssPeak, fdsPeak atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for floodCtx.Err() == nil {
			rssPeak.Store(max(rssPeak.Load(), rssOf(t, pid)))
			fdsPeak.Store(max(fdsPeak.Load(), fdsOf(t, pid)))
			time.Sleep(200 * time.Millisecond)
		}
	}()

	// u01 first, alone: past its own cap, its streams are refused by the
	// cap per user while the cell has room.
	const early = capPerUser + 8
	for range early {
		follow(flooders[0], names[0])
	}
	if refusedUser.Load() != early-capPerUser || held.Load() != capPerUser {
		t.Errorf("u01 alone: %d streams held, %d refused by the cap per user; want %d and %d (first other error: %v)",
			held.Load(), refusedUser.Load(), capPerUser, early-capPerUser, firstOther)
	}

	// The flood: every user opens perUser streams at 50 a second (the
	// per-user rate limit is 200), all users at once, while carol works.
	start := time.Now()
	var flood sync.WaitGroup
	for i, cl := range flooders {
		flood.Add(1)
		go func() {
			defer flood.Done()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			var opens sync.WaitGroup
			for range perUser {
				<-tick.C
				opens.Add(1)
				go func() { defer opens.Done(); follow(cl, names[i]) }()
			}
			opens.Wait()
		}()
	}
	floodDone := make(chan struct{})
	go func() { flood.Wait(); close(floodDone) }()
	var during []time.Duration
	for flooding := true; flooding; {
		select {
		case <-floodDone:
			flooding = false
		default:
			during = append(during, ordinary())
			time.Sleep(50 * time.Millisecond)
		}
	}
	floodTook := time.Since(start)
	// The streams stay open past the time the link needs to mark a
	// machine down (3 missed polls a second apart, after its grace).
	for hold := time.Now().Add(8 * time.Second); time.Now().Before(hold); time.Sleep(50 * time.Millisecond) {
		during = append(during, ordinary())
	}
	endFlood()
	<-sampled
	streams.Wait()

	t.Logf("flood: %d users x %d streams in %s: %d held, %d refused by the cap per user, %d by the cell's cap, %d other errors (first: %v)",
		users, perUser, floodTook.Round(time.Millisecond), held.Load(), refusedUser.Load(), refusedCell.Load(), otherErrs.Load(), firstOther)
	if held.Load() > capTotal || held.Load() < capTotal/2 {
		t.Errorf("%d streams were served, want at most the cell's cap of %d and most of it", held.Load(), capTotal)
	}
	if refusedUser.Load() == 0 || refusedCell.Load() == 0 {
		t.Errorf("refusals naming the cap per user: %d, the cell's: %d; want both", refusedUser.Load(), refusedCell.Load())
	}
	if n := held.Load() + refusedUser.Load() + refusedCell.Load(); n != users*perUser+early {
		t.Errorf("%d of %d streams were served or refused by a cap; first other error: %v", n, users*perUser+early, firstOther)
	}

	// No machine was marked down, and every task still runs.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	downs, err := carol.Events(ctx, &apipb.EventsRequest{Type: "MachineDown"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(downs.GetEvents()); n != 0 {
		t.Errorf("%d MachineDown events during the flood: %v", n, downs.GetEvents())
	}
	if lost, err := carol.Events(ctx, &apipb.EventsRequest{Type: "TaskLost"}); err != nil || len(lost.GetEvents()) != 0 {
		t.Errorf("TaskLost during the flood: %v %v", lost.GetEvents(), err)
	}

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
	if fdsPeak.Load() > fdsBefore+2*capTotal+100 {
		t.Errorf("open files grew from %d to %d", fdsBefore, fdsPeak.Load())
	}

	// The clients left: their slots came back, and a user streams again.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := flooders[0].TaskLogs(c, &apipb.TaskLogsRequest{Job: "chatty", Follow: true})
		if err == nil {
			_, err = st.Recv()
		}
		cancel()
		if err == nil {
			break
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("a stream after the flood's clients left: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rssOf is a process's resident memory in bytes (VmRSS).
func rssOf(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Errorf("reading the master's status: %v", err)
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
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
