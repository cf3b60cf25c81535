package agent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
)

func TestSelectRunAndTail(t *testing.T) {
	log := []byte("old\n" + RunMarker + "1 started x ---\none\ntwo\n" + RunMarker + "2 started y ---\nthree\n")
	if got := string(SelectRun(log, false)); got != RunMarker+"2 started y ---\nthree\n" {
		t.Fatalf("current run: %q", got)
	}
	if got := string(SelectRun(log, true)); got != RunMarker+"1 started x ---\none\ntwo\n" {
		t.Fatalf("previous run: %q", got)
	}
	if got := SelectRun([]byte("no markers\n"), true); got != nil {
		t.Fatalf("previous of a single run: %q", got)
	}
	// A marker inside a line is output, not a marker.
	if got := string(SelectRun([]byte("a "+RunMarker+"9\nb\n"), false)); !strings.HasPrefix(got, "a ") {
		t.Fatalf("a marker mid-line split the run: %q", got)
	}
	if got := string(TailOf([]byte("1\n2\n3\n"), 2, 0)); got != "2\n3\n" {
		t.Fatalf("tail 2: %q", got)
	}
	if got := string(TailOf([]byte("1\n2\n3"), 5, 0)); got != "1\n2\n3" {
		t.Fatalf("tail past the start: %q", got)
	}
	if got := string(TailOf([]byte("123456"), 0, 4)); got != "3456" {
		t.Fatalf("tail bytes: %q", got)
	}
}

// A log request names a task, never a path: nothing outside the agent's
// tasks directory can be read through it.
func TestLogRequestsCannotLeaveTheSandboxes(t *testing.T) {
	for _, ref := range []*events.TaskRef{
		nil,
		{User: "..", Job: "x"},
		{User: "alice", Job: "../../etc"},
		{User: "alice", Job: "a/b"},
		{User: "alice", Job: "x\x00y"},
		{User: "", Job: "x"},
		{User: "alice", Job: "x", Index: -1},
	} {
		if err := validRef(ref); err == nil {
			t.Errorf("%v: accepted", ref)
		}
	}
	if err := validRef(&events.TaskRef{User: "alice", Job: "web", Index: 3}); err != nil {
		t.Error(err)
	}
}

// An agent serves at most MaxLogStreams log streams at once: one more is
// refused at once, naming the cap, and a stream whose reader leaves gives
// its slot back.
func TestLogStreamsAreCapped(t *testing.T) {
	dir := t.TempDir()
	a, err := New(Config{Name: "m1", DataDir: filepath.Join(dir, "data"), CgroupParent: testCgroupParent(t),
		MemoryLowWater: -1, Logger: quietLogger(), MaxLogStreams: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	r := ref("web", 0)
	logs := filepath.Join(a.sandboxOf(r), "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logs, "stdout"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	agentpb.RegisterAgentServer(srv, a)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c, err := Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// follow opens a stream and waits for its first chunk: the agent holds
	// its slot from then on.
	follow := func(ctx context.Context) error {
		st, err := c.Logs(ctx, &agentpb.LogsRequest{Task: r, Follow: true})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	first, leave := context.WithCancel(ctx)
	if err := follow(first); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	if err := follow(ctx); err != nil {
		t.Fatalf("second stream: %v", err)
	}
	err = follow(ctx)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "cap of 2 log streams") || !strings.Contains(err.Error(), "--max-log-streams") {
		t.Fatalf("third stream: %v, want ResourceExhausted naming the cap", err)
	}
	// The first reader leaves: its stream ends on the agent and frees its
	// slot (the agent notices within a follow poll).
	leave()
	var again error
	testkit.Poll(5*time.Second, func() bool {
		again = follow(ctx)
		return status.Code(again) != codes.ResourceExhausted
	})
	if again != nil {
		t.Fatalf("a stream after a reader left: %v", again)
	}
}

// TestSelectPlacementRun: over generated histories of placements on one
// machine (each numbering its runs from 1, as markRun does), every run
// is found by its placement counted back from the last and its number,
// with exactly its own lines; a run whose marker rotation cut away is
// reported missing, never answered with another run's lines.
func TestSelectPlacementRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 500 {
		type run struct {
			back int
			n    int32
			text string
			at   int
		}
		var log []byte
		var runs []run
		placements := 1 + rng.IntN(4)
		for p := range placements {
			for n := int32(1); n <= int32(1+rng.IntN(4)); n++ {
				at := len(log)
				log = fmt.Appendf(log, "%s%d started 2026-01-0%dT00:00:00Z ---\n", RunMarker, n, p+1)
				for l := range rng.IntN(3) {
					log = fmt.Appendf(log, "placement %d run %d line %d\n", p, n, l)
				}
				runs = append(runs, run{back: placements - 1 - p, n: n, at: at})
			}
		}
		for i := range runs {
			end := len(log)
			if i+1 < len(runs) {
				end = runs[i+1].at
			}
			runs[i].text = string(log[runs[i].at:end])
		}
		cut := 0
		if trial%2 == 1 { // rotation kept only the end of the log
			cut = rng.IntN(len(log))
		}
		window := log[cut:]
		for _, r := range runs {
			got, ok := SelectPlacementRun(window, r.back, r.n)
			switch {
			case r.at >= cut && (!ok || string(got) != r.text):
				t.Fatalf("trial %d: placement %d back, run %d: %q, %v; want %q\nlog:\n%s", trial, r.back, r.n, got, ok, r.text, window)
			case r.at < cut && ok && !strings.Contains(r.text, string(got)):
				t.Fatalf("trial %d: placement %d back, run %d was cut, yet answered %q", trial, r.back, r.n, got)
			}
		}
		if _, ok := SelectPlacementRun(window, placements, 1); ok {
			t.Fatalf("trial %d: a placement older than all answered", trial)
		}
	}
}
