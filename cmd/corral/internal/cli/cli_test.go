package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands/apipb"
	cellclient "github.com/corralhq/corral/commands/client"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2025, 6, 1, 15, 30, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Time
	}{
		{"now", now},
		{"today", time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)},
		{"yesterday", time.Date(2025, 5, 31, 0, 0, 0, 0, time.UTC)},
		{"5m", now.Add(-5 * time.Minute)},
		{"-5m", now.Add(-5 * time.Minute)},
		{"5m ago", now.Add(-5 * time.Minute)},
		{"+1h", now.Add(time.Hour)},
		{"2d", now.Add(-48 * time.Hour)},
		{"1d12h", now.Add(-36 * time.Hour)},
		{"2025-05-01T10:00:00Z", time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)},
		{"2025-05-01", time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)},
		{"2025-05-01 10:20", time.Date(2025, 5, 1, 10, 20, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		got, err := parseTime(c.in, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "5", "soon", "2025-13-01"} {
		if _, err := parseTime(bad, now); err == nil {
			t.Errorf("parseTime(%q): no error", bad)
		}
	}
	if p, _, err := parsePoint("1200", now); err != nil || p != 1200 {
		t.Errorf("parsePoint(1200) = %d, %v", p, err)
	}
	if p, tm, err := parsePoint("5m", now); err != nil || p != 0 || !tm.Equal(now.Add(-5*time.Minute)) {
		t.Errorf("parsePoint(5m) = %d %v %v", p, tm, err)
	}
	if _, _, err := parsePoint("0", now); err == nil {
		t.Error("parsePoint(0): no error")
	}
}

func TestFormatting(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 512: "512B", 1 << 20: "1MiB", 1536 << 20: "1.5GiB", 32 << 20: "32MiB"} {
		if got := bytesHuman(in); got != want {
			t.Errorf("bytesHuman(%d) = %q, want %q", in, got, want)
		}
	}
	if got := indexRanges([]int32{0, 1, 2, 5, 7, 8}); got != "0-2,5,7-8" {
		t.Errorf("indexRanges = %q", got)
	}
	if got := trimZeros("1.250000000"); got != "1.25" {
		t.Errorf("trimZeros = %q", got)
	}
	var b bytes.Buffer
	tab := &table{cols: []string{"A", "LONGER"}}
	tab.add("x,y", "1")
	if err := writeTable(&b, tab, "csv"); err != nil || b.String() != "a,longer\n\"x,y\",1\n" {
		t.Errorf("csv: %q %v", b.String(), err)
	}
	if got := redactURL("postgres://corral:secret@db:5432/corral"); got != "postgres://corral:***@db:5432/corral" {
		t.Errorf("redactURL = %q", got)
	}
}

// fakeCell is a Cell server that records the request ids it sees.
type fakeCell struct {
	apipb.UnimplementedCellServer
	name   string
	leader string // when set, refuse writes naming it
	fail   int    // refuse this many writes with Unavailable and no leader
	mu     sync.Mutex
	ids    []string
	users  []string
}

func (f *fakeCell) Submit(ctx context.Context, r *apipb.SubmitRequest) (*apipb.MutationReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids = append(f.ids, r.RequestId)
	md, _ := metadata.FromIncomingContext(ctx)
	f.users = append(f.users, strings.Join(md.Get(master.UserHeader), ","))
	if f.leader != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(master.LeaderHeader, f.leader))
		return nil, status.Errorf(codes.Unavailable, "master %s does not lead", f.name)
	}
	if f.fail > 0 {
		f.fail--
		return nil, status.Error(codes.Unavailable, "no leader is known yet; retry shortly")
	}
	return &apipb.MutationReply{FirstPosition: 7, LastPosition: 9, Message: "appended by " + f.name}, nil
}

func serveFake(t *testing.T, f *fakeCell) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	apipb.RegisterCellServer(g, f)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

func submit(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
	return c.Submit(ctx, &apipb.SubmitRequest{RequestId: id}, o...)
}

func noSleep(context.Context, time.Duration) error { return nil }

func TestMutationsFollowTheLeaderWithOneRequestID(t *testing.T) {
	leader := &fakeCell{name: "b", fail: 1}
	leaderAddr := serveFake(t, leader)
	follower := &fakeCell{name: "a", leader: leaderAddr}
	followerAddr := serveFake(t, follower)

	c, err := newClient([]string{followerAddr}, "alice", cellclient.Options{AttemptTimeout: 5 * time.Second, Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep, err := c.mutate(context.Background(), submit)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Message != "appended by b" {
		t.Fatalf("answered by %q, want the leader", rep.Message)
	}
	if len(follower.ids) != 1 || len(leader.ids) < 2 {
		t.Fatalf("follower saw %v, leader %v", follower.ids, leader.ids)
	}
	id := follower.ids[0]
	for _, got := range append(leader.ids, follower.ids...) {
		if got != id || !strings.HasPrefix(got, "cli-") {
			t.Fatalf("request ids %v %v: want one id reused on every retry", follower.ids, leader.ids)
		}
	}
	if leader.users[0] != "alice" {
		t.Fatalf("user header %q", leader.users[0])
	}
	// The next request goes to the leader first.
	if _, err := c.mutate(context.Background(), submit); err != nil || len(follower.ids) != 1 {
		t.Fatalf("second request: %v; follower saw %d", err, len(follower.ids))
	}
	// Another request gets another id.
	if leader.ids[len(leader.ids)-1] == id {
		t.Fatal("a new request reused the previous id")
	}
}

func TestMutationsTryEveryMasterGiven(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	live := &fakeCell{name: "live"}
	c, err := newClient([]string{deadAddr, serveFake(t, live)}, "alice", cellclient.Options{AttemptTimeout: 5 * time.Second, Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rep, err := c.mutate(context.Background(), submit); err != nil || rep.Message != "appended by live" {
		t.Fatalf("%v %v", rep, err)
	}
	// A refusal other than unavailability is not retried.
	bad := &fakeCell{name: "x"}
	c2, err := newClient([]string{serveFake(t, bad)}, "alice", cellclient.Options{AttemptTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, err = c2.mutate(context.Background(), func(ctx context.Context, cl apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
		return cl.Kill(ctx, &apipb.KillRequest{RequestId: id}, o...)
	})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("kill on a fake: %v", err)
	}
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		switch k {
		case "CORRAL_USER":
			return "alice"
		case "CORRAL_MASTER":
			return "127.0.0.1:1"
		}
		return ""
	}}
	code := Main(context.Background(), args, env)
	return code, out.String(), errb.String()
}

func TestExitCodes(t *testing.T) {
	for _, args := range [][]string{
		{"job", "get"},
		{"job", "frobnicate"},
		{"--no-such-flag"},
		{"-o", "xml", "job", "list"},
		{"state"},
		{"state", "--at", "soon"},
		{"job", "kill"},
		{"task", "get", "hello", "x"},
	} {
		code, _, stderr := run(t, args...)
		if code != ExitUsage {
			t.Errorf("corral %s: exit %d, want %d (%s)", strings.Join(args, " "), code, ExitUsage, stderr)
		}
		if !strings.HasPrefix(stderr, "corral: ") {
			t.Errorf("corral %s: stderr %q", strings.Join(args, " "), stderr)
		}
	}
	// No master: a failure that says what to do.
	code, _, stderr := run(t, "job", "list")
	if code != ExitFailed || !strings.Contains(stderr, "corral up") || !strings.Contains(stderr, "CORRAL_MASTER") {
		t.Errorf("job list with no master: exit %d, %q", code, stderr)
	}
}

func TestRender(t *testing.T) {
	code, out, stderr := run(t, "job", "render", "../../../../examples/hello.jsonnet")
	if code != 0 || !strings.Contains(out, `"name": "hello"`) || !strings.Contains(out, `"priority": "batch"`) || !strings.Contains(out, `"memory": "32MiB"`) {
		t.Fatalf("render: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, _ = run(t, "-o", "yaml", "job", "render", "../../../../examples/alloc.jsonnet")
	if code != 0 || !strings.Contains(out, "alloc_sets:") || !strings.Contains(out, "alloc_set: webset") {
		t.Fatalf("render yaml: exit %d\n%s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\ncount: 0\ncommand: /bin/true\nresources: {cpu: 1, memory: 1Mi}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, "job", "render", bad)
	if code != ExitFailed || !strings.Contains(stderr, bad+":2: count: must be > 0") {
		t.Fatalf("bad file: exit %d, %q", code, stderr)
	}
}

// fakeRegistry is agentpb's Master service: a follower names the leader,
// the leader records registrations.
type fakeRegistry struct {
	agentpb.UnimplementedMasterServer
	leader string
	mu     sync.Mutex
	got    []*agentpb.MachineInfo
}

func (f *fakeRegistry) Register(ctx context.Context, info *agentpb.MachineInfo) (*agentpb.RegisterReply, error) {
	if f.leader != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(master.LeaderHeader, f.leader))
		return nil, status.Error(codes.Unavailable, "not the leader")
	}
	f.mu.Lock()
	f.got = append(f.got, info)
	f.mu.Unlock()
	return &agentpb.RegisterReply{Cell: "dev", Epoch: 1}, nil
}

func serveRegistry(t *testing.T, f *fakeRegistry) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	agentpb.RegisterMasterServer(g, f)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

func TestAgentRegistersWithTheLeaderOfSeveralMasters(t *testing.T) {
	leader := &fakeRegistry{}
	leaderAddr := serveRegistry(t, leader)
	follower := &fakeRegistry{leader: leaderAddr}
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	r := &agentRun{
		cfg: agent.Config{Name: "m1", ListenAddr: "127.0.0.1:0", DataDir: t.TempDir(), Cgroups: "sampling",
			Capacity: &events.Resources{CpuMilli: 1000, MemoryBytes: 1 << 30, DiskBytes: 1 << 30, Ports: 10}},
		masters: []string{deadAddr, serveRegistry(t, follower)},
		ready:   func(addr string) { ready <- addr },
	}
	done := make(chan error, 1)
	go func() { done <- r.run(ctx) }()
	addr := <-ready
	deadline := time.Now().Add(10 * time.Second)
	for {
		leader.mu.Lock()
		n := len(leader.got)
		leader.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not register with the leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := leader.got[0]; got.Name != "m1" || got.Address != addr || got.Capacity.GetCpuMilli() != 1000 {
		t.Fatalf("registered %v, want m1 at %s", got, addr)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
