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

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
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
		t.Run(c.in, func(t *testing.T) {
			got, err := parseTime(c.in, now)
			if err != nil || !got.Equal(c.want) {
				t.Errorf("parseTime(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
		})
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
	// An "ago" too long for a duration is refused, not wrapped around into
	// 1829; one before the epoch or in the future is not a point of the log.
	for in, want := range map[string]string{
		"-99999999999d": "too long", "99999999999d ago": "too long", "106752d": "too long", "106751d1000h": "too long",
		"100000d": "before 1970", "1969-12-31": "before 1970",
		"+1h": "in the future", "tomorrow": "in the future", "2999-01-01T00:00:00Z": "in the future",
	} {
		if _, tm, err := parsePoint(in, now); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parsePoint(%q) = %v, %v; want an error saying %q", in, tm, err, want)
		}
	}
	if tm, err := parseTime("106751d", now); err != nil || tm.Year() > 1750 {
		t.Errorf("parseTime(106751d) = %v, %v; want a time about 292 years ago", tm, err)
	}
}

// `corral state --at` with a moment out of range is a usage error naming
// --at, before any master is asked.
func TestStateAtOutOfRange(t *testing.T) {
	env := map[string]string{"CORRAL_USER": "alice", "CORRAL_MASTER": "127.0.0.1:1", "CORRAL_DATA": t.TempDir()}
	for _, at := range []string{"-99999999999d", "+1h", "2999-01-01"} {
		code, out, stderr := runEnv(context.Background(), env, "state", "--at", at)
		if code != ExitUsage || !strings.Contains(stderr, "--at") || out != "" {
			t.Errorf("state --at %s: exit %d, stdout %q, stderr %q; want a usage error naming --at", at, code, out, stderr)
		}
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

// The client's retry policy is tested with the client (commands/client);
// the command's choices of it are in newClient.

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
		{"state", "diff"},
		{"state", "diff", "--from", "soon"},
		{"state", "diff", "--from", "1", "--to", "0"},
		{"state", "diff", "--from", "1", "--limit", "0"},
		{"state", "diff", "--from", "1", "extra"},
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
	// A share that is no number is refused as one out of range.
	for _, share := range []string{"NaN", "-1", "0", "1.5"} {
		if code, _, stderr := run(t, "sim", "--google-trace", t.TempDir(), "--share", share); code != ExitUsage || !strings.Contains(stderr, "--share") {
			t.Errorf("sim --share %s: exit %d, %q", share, code, stderr)
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
	testkit.Eventually(t, 10*time.Second, "the agent registers with the leader", func() (bool, string) {
		leader.mu.Lock()
		defer leader.mu.Unlock()
		return len(leader.got) > 0, "no registration yet"
	})
	if got := leader.got[0]; got.Name != "m1" || got.Address != addr || got.Capacity.GetCpuMilli() != 1000 {
		t.Fatalf("registered %v, want m1 at %s", got, addr)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// What a machine of `corral up` offers is refused, naming the flag, when it
// is no positive quantity, before anything is made on disk.
func TestUpRefusesBadMachineOffers(t *testing.T) {
	for _, c := range []struct{ flag, value string }{
		{"--machine-cpu", "0"}, {"--machine-cpu", "-2"}, {"--machine-cpu", "lots"}, {"--machine-cpu", "0.0001"},
		{"--machine-memory", "0"}, {"--machine-memory", "-1GiB"}, {"--machine-memory", "4m"}, {"--machine-memory", "2XB"},
	} {
		data := filepath.Join(t.TempDir(), "cell")
		code, _, stderr := run(t, "up", "--data", data, c.flag, c.value)
		if code != ExitUsage || !strings.Contains(stderr, c.flag) || strings.Contains(stderr, "unknown flag") {
			t.Errorf("up %s %s: exit %d, %q; want a usage error naming %s", c.flag, c.value, code, stderr, c.flag)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("up %s %s made %s (%v)", c.flag, c.value, data, err)
		}
	}
	o, err := machineOffer("40", "64GiB")
	if err != nil {
		t.Fatal(err)
	}
	got := o.fill(&events.Resources{CpuMilli: 666, MemoryBytes: 1 << 30, DiskBytes: 7})
	if got.CpuMilli != 40000 || got.MemoryBytes != 64<<30 || got.DiskBytes != 7 {
		t.Errorf("--machine-cpu 40 --machine-memory 64GiB offer %v; want 40 cores, 64 GiB and the share's disk", got)
	}
}

// A query's byte limit may not pass what a reply of the API may carry
// (auth.MaxReplyMsgSize), which the corral command receives: a bigger one
// is refused naming the flag and the bound, before anything is made.
func TestUpRefusesAQueryLimitPastTheReplyLimit(t *testing.T) {
	for _, v := range []string{"65MiB", "1GiB", "512", "lots"} {
		data := filepath.Join(t.TempDir(), "cell")
		code, _, stderr := run(t, "up", "--data", data, "--query-max-bytes", v)
		if code != ExitUsage || !strings.Contains(stderr, "--query-max-bytes") {
			t.Errorf("up --query-max-bytes %s: exit %d, %q; want a usage error naming the flag", v, code, stderr)
		}
		if strings.HasSuffix(v, "B") && !strings.Contains(stderr, "64MiB") {
			t.Errorf("up --query-max-bytes %s: %q does not name the bound", v, stderr)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("up --query-max-bytes %s made %s (%v)", v, data, err)
		}
	}
	l, err := (&infraFlags{memory: "2GiB", maxBytes: "64MiB", limits: infraLimits{threads: 2, maxRows: 10, queryTimeout: time.Second}}).resolve()
	if err != nil || l.maxResultBytes != auth.MaxReplyMsgSize {
		t.Errorf("--query-max-bytes 64MiB: %d, %v; want the reply limit itself accepted", l.maxResultBytes, err)
	}
}

// corral sim's --from and --to keep the rule of every moment of the log:
// the past only, refused naming the flag before the log is read.
func TestSimPointsAreInThePast(t *testing.T) {
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	for _, v := range []string{"2999-01-01T00:00:00Z", "1969-12-31T23:00:00Z"} {
		if _, err := logPoint(cmd, nil, "to", v, 0); err == nil || !strings.Contains(err.Error(), "--to") {
			t.Errorf("--to %s: %v, want an error naming --to", v, err)
		}
	}
	if n, err := logPoint(cmd, nil, "from", "12", 0); err != nil || n != 12 {
		t.Errorf("--from 12: %d, %v", n, err)
	}
}
