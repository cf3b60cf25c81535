package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
	"google.golang.org/grpc"
)

func msDuration(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }

var testParents atomic.Int64

// testCgroupParent returns a cgroup parent under the corral-test- prefix,
// and removes it (and every container left in it) when the test ends.
func testCgroupParent(t *testing.T) string {
	t.Helper()
	top := fmt.Sprintf("corral-test-%d-%d", os.Getpid(), testParents.Add(1))
	t.Cleanup(func() { testkit.RemoveCgroups(t, top) })
	return top + "/m1"
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// realAgent is an agent running real processes, in real cgroups where the
// machine has them.
type realAgent struct {
	t *testing.T
	*Agent
	seq int
}

func newRealAgent(t *testing.T, mutate ...func(*Config)) *realAgent {
	t.Helper()
	cfg := Config{
		Name:           "m1",
		DataDir:        t.TempDir(),
		CgroupParent:   testCgroupParent(t),
		Capacity:       &events.Resources{MemoryBytes: 8 << 30},
		SampleInterval: 50 * time.Millisecond,
		DefaultGrace:   2 * time.Second,
		MemoryLowWater: -1,
		Logger:         quietLogger(),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ra := &realAgent{t: t, Agent: a}
	t.Cleanup(ra.shutdown)
	return ra
}

// shutdown kills every task and closes the agent.
func (ra *realAgent) shutdown() {
	var reqs []*agentpb.Request
	for _, ts := range ra.State().Tasks {
		if !Ended(ts.State) {
			reqs = append(reqs, StopRequest(fmt.Sprint("cleanup-", ts.Task.Job), ts.Task, "test over", 1))
		}
	}
	_, _ = ra.Poll(context.Background(), &agentpb.PollRequest{Epoch: 1, Requests: reqs})
	testkit.Poll(5*time.Second, func() bool {
		for _, ts := range ra.State().Tasks {
			if !Ended(ts.State) {
				return false
			}
		}
		return true
	})
	_ = ra.Close()
}

func (ra *realAgent) poll(reqs ...*agentpb.Request) *agentpb.AgentState {
	ra.t.Helper()
	st, err := ra.Poll(context.Background(), &agentpb.PollRequest{MasterId: "test", Epoch: 1, Cell: "cc", Requests: reqs})
	if err != nil {
		ra.t.Fatal(err)
	}
	for _, r := range st.Results {
		if r.Error != "" {
			ra.t.Fatalf("request %s: %s", r.Id, r.Error)
		}
	}
	return st
}

func (ra *realAgent) start(r *events.TaskRef, s *agentpb.TaskSpec) *agentpb.TaskStatus {
	ra.t.Helper()
	ra.seq++
	ra.poll(StartRequest(fmt.Sprint("s", ra.seq), r, 1, 0, s))
	return ra.task(r)
}

func (ra *realAgent) task(r *events.TaskRef) *agentpb.TaskStatus {
	for _, ts := range ra.State().Tasks {
		if TaskKey(ts.Task) == TaskKey(r) {
			return ts
		}
	}
	return nil
}

func (ra *realAgent) wait(r *events.TaskRef, d time.Duration, ok func(*agentpb.TaskStatus) bool, what string) *agentpb.TaskStatus {
	ra.t.Helper()
	return waitFor(ra.t, d, func() *agentpb.TaskStatus {
		if ts := ra.task(r); ts != nil && ok(ts) {
			return ts
		}
		return nil
	}, func() string { return fmt.Sprintf("task %s never %s; now %v", TaskKey(r), what, ra.task(r)) })
}

func (ra *realAgent) waitState(r *events.TaskRef, state agentpb.TaskState, d time.Duration) *agentpb.TaskStatus {
	ra.t.Helper()
	return ra.wait(r, d, func(ts *agentpb.TaskStatus) bool { return ts.State == state }, "reached "+state.String())
}

func sh(script string, mutate ...func(*agentpb.TaskSpec)) *agentpb.TaskSpec {
	s := &agentpb.TaskSpec{
		Command:   "/bin/sh",
		Args:      []string{"-c", script},
		Resources: &events.Resources{CpuMilli: 500, MemoryBytes: 256 << 20},
		Priority:  2,
		Restart:   &events.RestartPolicy{Mode: "never"},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

// readLog is what the task wrote to a log file, across its runs: the file
// without the agent's run markers (runMarkers counts those).
func readLog(t *testing.T, ts *agentpb.TaskStatus, name string) string {
	t.Helper()
	out, _ := readLogRuns(t, ts, name)
	return out
}

func readLogRuns(t *testing.T, ts *agentpb.TaskStatus, name string) (output string, runs int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ts.Sandbox, "logs", name))
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if strings.HasPrefix(line, RunMarker) {
			runs++
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, ""), runs
}

func TestRealFailingTaskIsRestartedWithBackoff(t *testing.T) {
	ra := newRealAgent(t)
	r := ref("crash", 0)
	ra.start(r, sh("echo try; exit 1", func(s *agentpb.TaskSpec) {
		s.Restart = &events.RestartPolicy{Mode: "on-failure", MaxRestarts: 3, BackoffInitialMs: 100, BackoffMaxMs: 300}
	}))
	ts := ra.waitState(r, failed, 5*time.Second)
	if ts.Failures != 4 || ts.Restarts != 3 || ts.ExitCode != 1 {
		t.Errorf("final status %v", ts)
	}
	var starts []time.Time
	var failures int
	for _, e := range ra.State().Events {
		switch e.Kind {
		case agentpb.EventKind_EVENT_KIND_STARTED:
			starts = append(starts, time.UnixMicro(e.TimeUs))
		case agentpb.EventKind_EVENT_KIND_FAILED:
			failures++
			if e.ExitCode != 1 || e.WillRestart != (failures < 4) {
				t.Errorf("failure event %v", e)
			}
		}
	}
	if len(starts) != 4 || failures != 4 {
		t.Fatalf("%d starts and %d failures recorded", len(starts), failures)
	}
	for i, min := range []time.Duration{100, 200, 300} {
		if gap := starts[i+1].Sub(starts[i]); gap < min*time.Millisecond {
			t.Errorf("restart %d after %v, want at least %v", i+1, gap, min*time.Millisecond)
		}
	}
	out, runs := readLogRuns(t, ts, "stdout")
	if got := strings.Count(out, "try\n"); got != 4 || runs != 4 {
		t.Errorf("stdout has %d runs' output and %d run markers, want 4 of each", got, runs)
	}
	// The previous run is one run, the current one another (task logs --previous).
	b, _ := os.ReadFile(filepath.Join(ts.Sandbox, "logs", "stdout"))
	if prev, cur := string(SelectRun(b, true)), string(SelectRun(b, false)); !strings.HasPrefix(prev, RunMarker+"3 ") || !strings.HasPrefix(cur, RunMarker+"4 ") ||
		!strings.HasSuffix(prev, "try\n") {
		t.Errorf("previous run %q, current %q", prev, cur)
	}
}

func TestRealMemoryLimitIsAnOOMEviction(t *testing.T) {
	hog := `exec python3 -c "s = 'x' * (128 << 20); import time; time.sleep(30)"`
	for _, mode := range []string{"auto", "sampling"} {
		t.Run(mode, func(t *testing.T) {
			ra := newRealAgent(t, func(c *Config) { c.Cgroups = mode })
			if mode == "auto" && !ra.rt.enforced() {
				if os.Getenv("CI") == "true" {
					t.Fatal("no cgroups enforced on this machine; CI's machines have them")
				}
				t.Skip("no cgroups on this machine")
			}
			r := ref("hog", 0)
			ra.start(r, sh(hog, func(s *agentpb.TaskSpec) {
				s.Resources.MemoryBytes = 32 << 20
				s.Restart = &events.RestartPolicy{Mode: "always", BackoffInitialMs: 100}
			}))
			ts := ra.waitState(r, evicted, 10*time.Second)
			if ts.Reason != ReasonOOM || ts.OomKills != 1 || ts.Signal != "SIGKILL" || ts.Restarts != 0 {
				t.Errorf("status %v", ts)
			}
			evs := ra.State().Events
			if last := evs[len(evs)-1]; last.Kind != agentpb.EventKind_EVENT_KIND_EVICTED || last.Reason != ReasonOOM {
				t.Errorf("last event %v", last)
			}
		})
	}
}

func TestRealStopIsSIGTERMThenSIGKILL(t *testing.T) {
	ra := newRealAgent(t)
	stubborn, polite := ref("stubborn", 0), ref("polite", 0)
	// The loop survives SIGTERM (its sleep child does not, being in the same
	// process group, which is the point).
	ra.start(stubborn, sh(`trap 'echo got TERM' TERM; echo ready; while :; do sleep 0.05; done`))
	ra.start(polite, sh(`exec sleep 30`))
	ra.wait(stubborn, 5*time.Second, func(ts *agentpb.TaskStatus) bool {
		b, _ := os.ReadFile(filepath.Join(ts.Sandbox, "logs", "stdout"))
		return strings.Contains(string(b), "ready")
	}, "got ready")
	begin := time.Now()
	ra.poll(StopRequest("stop1", stubborn, "drain", 400), StopRequest("stop2", polite, "drain", 5000))
	ts := ra.waitState(polite, killed, 3*time.Second)
	if ts.Signal != "SIGTERM" || time.Since(begin) > 2*time.Second {
		t.Errorf("polite task: %v after %v", ts, time.Since(begin))
	}
	ts = ra.waitState(stubborn, killed, 3*time.Second)
	took := time.Since(begin)
	if ts.Signal != "SIGKILL" || ts.Reason != "drain" || took < 400*time.Millisecond {
		t.Errorf("stubborn task: %v after %v", ts, took)
	}
	if out := readLog(t, ts, "stdout"); !strings.Contains(out, "got TERM") {
		t.Errorf("the task never saw SIGTERM: %q", out)
	}
}

func TestRealEnvironmentIsTheTasksOnly(t *testing.T) {
	t.Setenv("CORRAL_AGENT_SECRET", "must-not-leak")
	ra := newRealAgent(t)
	a, b := ref("a", 3), ref("b", 0)
	ra.start(a, &agentpb.TaskSpec{
		Command: "env",
		Env:     map[string]string{"FOO": "bar"},
		Ports:   []*agentpb.Port{{Name: "http", Number: 20001}, {Number: 20002}, {Name: "admin-ui", Number: 20003}},
		Restart: &events.RestartPolicy{Mode: "never"},
	})
	ra.start(b, &agentpb.TaskSpec{Command: "env", Env: map[string]string{"BAR": "baz"}, Restart: &events.RestartPolicy{Mode: "never"}})
	tsA := ra.waitState(a, finished, 5*time.Second)
	tsB := ra.waitState(b, finished, 5*time.Second)
	parse := func(out string) map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(l, "=")
			m[k] = v
		}
		return m
	}
	envA := parse(readLog(t, tsA, "stdout"))
	want := map[string]string{
		"PATH":              defaultPath,
		"HOME":              filepath.Join(tsA.Sandbox, "work"),
		"PWD":               filepath.Join(tsA.Sandbox, "work"),
		"TMPDIR":            filepath.Join(tsA.Sandbox, "tmp"),
		"FOO":               "bar",
		"CORRAL_TASK_INDEX": "3",
		"CORRAL_JOB":        "a",
		"CORRAL_USER":       "alice",
		"CORRAL_CELL":       "cc",
		"CORRAL_NAME":       "3.a.alice.cc.corral",
		"CORRAL_SANDBOX":    tsA.Sandbox,
		"PORT":              "20001",
		"PORT_HTTP":         "20001",
		"PORT_1":            "20002",
		"PORT_ADMIN_UI":     "20003",
	}
	if fmt.Sprint(envA) != fmt.Sprint(want) {
		t.Errorf("task env\n got %v\nwant %v", envA, want)
	}
	envB := parse(readLog(t, tsB, "stdout"))
	if envB["BAR"] != "baz" || envB["FOO"] != "" || envB["CORRAL_AGENT_SECRET"] != "" || envB["PORT"] != "" {
		t.Errorf("task b env %v", envB)
	}
	if wd, _ := os.Stat(filepath.Join(tsA.Sandbox, "work")); wd == nil || !wd.IsDir() {
		t.Errorf("no sandbox work dir")
	}
}

func TestRealLogsRotateAndOutliveTheTask(t *testing.T) {
	ra := newRealAgent(t, func(c *Config) {
		c.LogMaxBytes = 4096
		c.LogKeep = 2
		c.RetainEnded = 300 * time.Millisecond
	})
	r := ref("chatty", 0)
	ra.start(r, sh(`i=0; while [ $i -lt 150 ]; do echo "line $i 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"; echo "err $i" >&2; i=$((i+1)); sleep 0.003; done`))
	ts := ra.waitState(r, finished, 10*time.Second)
	logs := filepath.Join(ts.Sandbox, "logs")
	for _, f := range []string{"stdout.1", "stdout.2"} {
		fi, err := os.Stat(filepath.Join(logs, f))
		if err != nil {
			t.Fatalf("no rotated %s: %v", f, err)
		}
		// Checked every 50 ms: a file grows past the limit by at most what
		// the task writes in that time.
		if fi.Size() < 4096 || fi.Size() > 16<<10 {
			t.Errorf("%s is %d bytes", f, fi.Size())
		}
	}
	if _, err := os.Stat(filepath.Join(logs, "stdout.3")); !os.IsNotExist(err) {
		t.Errorf("more rotated files kept than LogKeep: %v", err)
	}
	// The task has ended; its logs stay until the retention has passed and
	// the master has forgotten it.
	ra.poll(ForgetRequest("f", r))
	if _, err := os.Stat(filepath.Join(logs, "stdout")); err != nil {
		t.Fatalf("logs gone right after the task ended: %v", err)
	}
	testkit.Eventually(t, 5*time.Second, "the sandbox removed past its retention", func() (bool, string) {
		ra.removeOldSandboxes()
		_, err := os.Stat(ts.Sandbox)
		return os.IsNotExist(err), fmt.Sprint(err)
	})
}

func TestRotate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stdout")
	write := func(s string) {
		f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		f.WriteString(s)
		f.Close()
	}
	write(strings.Repeat("a", 100))
	if rotated, _ := rotate(p, 100, 2); !rotated {
		t.Fatal("not rotated at the limit")
	}
	write(strings.Repeat("b", 150))
	rotate(p, 100, 2)
	write(strings.Repeat("c", 120))
	rotate(p, 100, 2)
	write("d")
	if rotated, _ := rotate(p, 100, 2); rotated {
		t.Fatal("rotated below the limit")
	}
	for f, want := range map[string]string{"": "d", ".1": strings.Repeat("c", 120), ".2": strings.Repeat("b", 150)} {
		b, _ := os.ReadFile(p + f)
		if string(b) != want {
			t.Errorf("stdout%s = %.10q... (%d bytes)", f, b, len(b))
		}
	}
	if _, err := os.Stat(p + ".3"); !os.IsNotExist(err) {
		t.Errorf("stdout.3 exists")
	}
}

// freePort is the port of testkit.FreeAddr.
func freePort(t *testing.T) int32 {
	t.Helper()
	_, port, _ := net.SplitHostPort(testkit.FreeAddr(t))
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

func TestRealHealthCheck(t *testing.T) {
	ra := newRealAgent(t, func(c *Config) { c.DefaultGrace = 500 * time.Millisecond })
	good, bad := ref("good", 0), ref("bad", 0)
	ra.start(good, sh(`exec python3 -m http.server --bind 127.0.0.1 "$PORT_HTTP"`, func(s *agentpb.TaskSpec) {
		s.Ports = []*agentpb.Port{{Name: "http", Number: freePort(t)}}
		s.HealthCheck = &events.HealthCheck{Path: "/", PortName: "http", PeriodMs: 200, FailuresAllowed: 10, TimeoutMs: 1000}
		s.Restart = &events.RestartPolicy{Mode: "on-failure", BackoffInitialMs: 100}
	}))
	// Listens on nothing: every check fails.
	ra.start(bad, sh(`exec sleep 30`, func(s *agentpb.TaskSpec) {
		s.Ports = []*agentpb.Port{{Name: "http", Number: freePort(t)}}
		s.HealthCheck = &events.HealthCheck{Path: "/healthz", PortName: "http", PeriodMs: 100, FailuresAllowed: 2, TimeoutMs: 500}
		s.Restart = &events.RestartPolicy{Mode: "on-failure", BackoffInitialMs: 100}
	}))
	firstPid := ra.task(bad).Pid
	ts := ra.wait(bad, 5*time.Second, func(ts *agentpb.TaskStatus) bool {
		return ts.Restarts >= 1 && ts.State == running
	}, "restarted")
	if ts.Failures < 1 || ts.Pid == firstPid {
		t.Errorf("bad task %v", ts)
	}
	var healthFailure bool
	for _, e := range ra.State().Events {
		if e.Kind == agentpb.EventKind_EVENT_KIND_FAILED && e.Reason == ReasonHealth && e.WillRestart && TaskKey(e.Task) == TaskKey(bad) {
			healthFailure = true
		}
	}
	if !healthFailure {
		t.Errorf("no health failure event")
	}
	ts = ra.wait(good, 5*time.Second, func(ts *agentpb.TaskStatus) bool {
		return ts.Health == agentpb.Health_HEALTH_HEALTHY
	}, "became healthy")
	if ts.Restarts != 0 || ts.State != running {
		t.Errorf("good task %v", ts)
	}
}

func TestRealMemoryPressureEvictsLowestPriorityFirst(t *testing.T) {
	ra := newRealAgent(t, func(c *Config) { c.Capacity.MemoryBytes = 150 << 20 })
	hog := `exec python3 -c "s = 'x' * (50 << 20); import time; time.sleep(30)"`
	for job, prio := range map[string]int32{"besteffort": 0, "batch": 2, "prod": 9} {
		ra.start(ref(job, 0), sh(hog, func(s *agentpb.TaskSpec) {
			s.Priority = prio
			s.Resources.MemoryBytes = 100 << 20
		}))
	}
	ts := ra.waitState(ref("besteffort", 0), evicted, 10*time.Second)
	if ts.Reason != ReasonOvercommitted || !strings.Contains(ts.Message, "memory pressure") {
		t.Errorf("evicted task %v", ts)
	}
	// The rest fit: nothing else goes, watched for a while.
	var gone *agentpb.TaskStatus
	testkit.Poll(300*time.Millisecond, func() bool {
		for _, job := range []string{"batch", "prod"} {
			if ts := ra.task(ref(job, 0)); ts.State != running {
				gone = ts
				return true
			}
		}
		return false
	})
	if gone != nil {
		t.Errorf("%s task %v", gone.Task.GetJob(), gone)
	}
	st := ra.State()
	if mu := st.MachineUsage; mu.TasksMemoryBytes < 100<<20 || mu.TasksMemoryBytes > 150<<20 {
		t.Errorf("machine usage %v", mu)
	}
	for _, u := range st.Usage {
		if u.Task.Job == "prod" && (u.MemoryBytes < 50<<20 || u.CpuCoreSecondsTotal <= 0) {
			t.Errorf("prod usage %v", u)
		}
	}
}

// fakeMaster records registrations.
type fakeMaster struct {
	agentpb.UnimplementedMasterServer
	got chan *agentpb.MachineInfo
}

func (m *fakeMaster) Register(ctx context.Context, info *agentpb.MachineInfo) (*agentpb.RegisterReply, error) {
	m.got <- info
	return &agentpb.RegisterReply{Cell: "cc", MasterId: "fake", Epoch: 3, PollIntervalMs: 2000}, nil
}

// Run registers with the master once it is reachable, serves Poll over
// gRPC, and its tasks run whether or not anyone polls.
func TestRealRunRegistersAndServesPoll(t *testing.T) {
	// The master is down when the agent starts.
	masterAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	ran := make(chan error, 1)
	dataDir := t.TempDir()
	parent := testCgroupParent(t)
	go func() {
		ran <- Run(ctx, Config{
			Name: "m7", Masters: []string{masterAddr}, ListenAddr: "127.0.0.1:0", DataDir: dataDir,
			CgroupParent: parent, Attributes: map[string]string{"rack": "r1"},
			Capacity: &events.Resources{CpuMilli: 2000}, SampleInterval: 50 * time.Millisecond,
			MemoryLowWater: -1, Logger: quietLogger(), OnListen: func(a string) { listening <- a },
		})
	}()
	addr := <-listening
	c, err := Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := ref("svc", 0)
	st, err := c.Poll(ctx, &agentpb.PollRequest{MasterId: "m", Epoch: 3, Requests: []*agentpb.Request{
		StartRequest("1", r, 1, 0, sh("exec sleep 30")),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Tasks) != 1 || st.Tasks[0].State != running || st.Tasks[0].Pid == 0 || st.Machine != "m7" {
		t.Fatalf("poll reply %v", st)
	}
	pid := st.Tasks[0].Pid

	// Now the master comes up and the agent registers.
	info := registrationAt(t, masterAddr)
	if info.Name != "m7" || info.Address != addr || info.Capacity.CpuMilli != 2000 || info.Capacity.MemoryBytes == 0 ||
		info.Attributes["rack"] != "r1" || info.Attributes["os"] != "linux" || info.CgroupMode == agentpb.CgroupMode_CGROUP_MODE_UNSPECIFIED {
		t.Errorf("registration %v", info)
	}

	// Unpolled for a while, the task runs on. The sleep is the subject: a
	// quiet spell without polls, in which nothing may happen to the task.
	time.Sleep(300 * time.Millisecond)
	st, err = c.Poll(ctx, &agentpb.PollRequest{Epoch: 3, EventsAcked: st.LastEventSeq})
	if err != nil {
		t.Fatal(err)
	}
	if ts := st.Tasks[0]; ts.State != running || ts.Pid != pid || len(st.Events) != 0 {
		t.Errorf("after a quiet spell: %v, events %v", ts, st.Events)
	}
	if len(st.Usage) != 1 || st.Usage[0].SampledAtUs == 0 {
		t.Errorf("no usage sample: %v", st.Usage)
	}
	if _, err := c.Poll(ctx, &agentpb.PollRequest{Epoch: 3, Requests: []*agentpb.Request{StopRequest("2", r, "bye", 1)}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, func() *bool {
		st, err := c.Poll(ctx, &agentpb.PollRequest{Epoch: 3})
		if err == nil && st.Tasks[0].State == killed {
			return new(bool)
		}
		return nil
	}, func() string { return "task never killed" })
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run returned %v", err)
	}
}

// registrationAt serves a fake master at addr and returns the first
// registration it gets.
func registrationAt(t *testing.T, addr string) *agentpb.MachineInfo {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fm := &fakeMaster{got: make(chan *agentpb.MachineInfo, 10)}
	agentpb.RegisterMasterServer(srv, fm)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	select {
	case info := <-fm.got:
		return info
	case <-time.After(5 * time.Second):
		t.Fatal("the agent never registered")
		return nil
	}
}

// agentProcess is a real agent in a process of its own.
type agentProcess struct {
	cmd  *exec.Cmd
	addr string
	c    *Client
}

func startAgentProcess(t *testing.T, pc agentProcessConfig) *agentProcess {
	t.Helper()
	raw, _ := json.Marshal(pc)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), agentProcessEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ap := &agentProcess{cmd: cmd}
	t.Cleanup(func() { ap.kill() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("agent process: %v", err)
	}
	ap.addr = strings.TrimSpace(strings.TrimPrefix(line, "LISTEN "))
	if ap.c, err = Dial(ap.addr); err != nil {
		t.Fatal(err)
	}
	return ap
}

func (ap *agentProcess) kill() {
	if ap.cmd.ProcessState == nil {
		_ = ap.cmd.Process.Kill()
		_ = ap.cmd.Wait()
	}
	if ap.c != nil {
		ap.c.Close()
	}
}

func (ap *agentProcess) poll(t *testing.T, reqs ...*agentpb.Request) *agentpb.AgentState {
	t.Helper()
	st, err := ap.c.Poll(context.Background(), &agentpb.PollRequest{Epoch: 1, Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Results {
		if r.Error != "" {
			t.Fatalf("request %s: %s", r.Id, r.Error)
		}
	}
	return st
}

func taskIn(st *agentpb.AgentState, job string) *agentpb.TaskStatus {
	for _, ts := range st.Tasks {
		if ts.Task.Job == job {
			return ts
		}
	}
	return nil
}

func alive(pid int64) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

// kill -9 of the agent: its tasks run on; the next agent adopts the ones
// still running (same pid), restarts by policy the one that died meanwhile,
// and kills what runs in containers no task owns.
func TestRealAgentRestartAdoptsItsTasks(t *testing.T) {
	pc := agentProcessConfig{Name: "m1", DataDir: t.TempDir(), CgroupParent: testCgroupParent(t), SampleMs: 50}
	first := startAgentProcess(t, pc)
	restart := &events.RestartPolicy{Mode: "on-failure", BackoffInitialMs: 100}
	st := first.poll(t,
		StartRequest("1", ref("keep", 0), 1, 0, sh("echo started; exec sleep 30", func(s *agentpb.TaskSpec) { s.Restart = restart })),
		StartRequest("2", ref("dies", 0), 1, 0, sh("exec sleep 30", func(s *agentpb.TaskSpec) { s.Restart = restart })))
	keepPid, diesPid := taskIn(st, "keep").Pid, taskIn(st, "dies").Pid
	t.Cleanup(func() {
		for _, p := range []int64{keepPid, diesPid} {
			_ = syscall.Kill(-int(p), syscall.SIGKILL)
		}
	})

	first.kill()
	if !alive(keepPid) || !alive(diesPid) {
		t.Fatalf("tasks died with their agent")
	}
	_ = syscall.Kill(-int(diesPid), syscall.SIGKILL)
	waitFor(t, 2*time.Second, func() *bool {
		if !alive(diesPid) {
			return new(bool)
		}
		return nil
	}, func() string { return "task process would not die" })

	stray := startStray(t, pc.CgroupParent)

	second := startAgentProcess(t, pc)
	st = second.poll(t)
	keep := taskIn(st, "keep")
	if keep.State != running || !keep.Adopted || keep.Pid != keepPid {
		t.Errorf("kept task after restart: %v", keep)
	}
	var adopted, lost bool
	for _, e := range st.Events {
		adopted = adopted || (e.Kind == agentpb.EventKind_EVENT_KIND_ADOPTED && e.Task.Job == "keep")
		lost = lost || (e.Kind == agentpb.EventKind_EVENT_KIND_FAILED && e.Task.Job == "dies" && e.Reason == ReasonLost && e.WillRestart)
	}
	if !adopted || !lost {
		t.Errorf("events after restart: adopted %v, lost %v: %v", adopted, lost, st.Events)
	}
	var dies *agentpb.TaskStatus
	waitFor(t, 3*time.Second, func() *bool {
		dies = taskIn(second.poll(t), "dies")
		if dies.State == running {
			return new(bool)
		}
		return nil
	}, func() string { return fmt.Sprintf("the lost task never restarted: %v", dies) })
	if dies.Pid == diesPid || dies.Restarts != 1 || dies.Failures != 1 {
		t.Errorf("lost task after restart %v", dies)
	}
	if stray != nil {
		done := make(chan error, 1)
		go func() { done <- stray.Wait() }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Errorf("the stray process survived the agent's start")
		}
	}

	// The adopted task is still under control: it can be stopped.
	second.poll(t, StopRequest("3", ref("keep", 0), "done", 1), StopRequest("4", ref("dies", 0), "done", 1))
	waitFor(t, 3*time.Second, func() *bool {
		st := second.poll(t)
		if taskIn(st, "keep").State == killed && taskIn(st, "dies").State == killed {
			return new(bool)
		}
		return nil
	}, func() string { return "tasks never stopped" })
	if alive(keepPid) {
		t.Errorf("adopted process %d still alive after stop", keepPid)
	}
	if !strings.Contains(readLog(t, keep, "stdout"), "started") {
		t.Errorf("the adopted task's log is gone")
	}
}

// startStray starts a process in a container no task owns, as a crash
// between starting a process and saving the state would leave; nil where
// containers are not enforced by the kernel.
func startStray(t *testing.T, parent string) *exec.Cmd {
	t.Helper()
	mgr, _, err := cgroup.Detect("auto", parent)
	if err != nil {
		t.Fatal(err)
	}
	if !mgr.KernelEnforced() {
		return nil
	}
	c, err := mgr.Create("alice.stray.0.1", cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-c", joinScript, "x", fmt.Sprint(len(c.JoinFiles()))}, c.JoinFiles()...)
	stray := exec.Command("/bin/sh", append(args, "/bin/sleep", "30")...)
	stray.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stray.Process.Kill() })
	waitFor(t, 2*time.Second, func() *bool {
		if pids, _ := c.Pids(); len(pids) > 0 {
			return new(bool)
		}
		return nil
	}, func() string { return "stray process never joined its container" })
	return stray
}

// Batch tasks get a tenth of the CPU shares of latency-sensitive ones of
// the same size; both are capped by a quota at their limit.
func TestRealCPUSharesAndQuota(t *testing.T) {
	ra := newRealAgent(t)
	if ra.rt.mode() != cgroup.ModeV1 {
		t.Skipf("checks cgroup v1 files; this machine uses %s", ra.rt.mode())
	}
	ls, batch := ref("ls", 0), ref("batch", 0)
	ra.start(ls, sh("exec sleep 30", func(s *agentpb.TaskSpec) { s.Appclass = "latency-sensitive"; s.Resources.CpuMilli = 2000 }))
	ra.start(batch, sh("exec sleep 30", func(s *agentpb.TaskSpec) { s.Appclass = "batch"; s.Resources.CpuMilli = 2000 }))
	ms, _ := cgroup.Mounts()
	var cpuRoot string
	for _, m := range ms {
		if slices.Contains(m.Controllers, "cpu") {
			cpuRoot = m.Path
		}
	}
	read := func(r *events.TaskRef, file string) string {
		b, err := os.ReadFile(filepath.Join(cpuRoot, ra.cfg.CgroupParent, containerName(r, 1), file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read(ls, "cpu.shares"); got != "2048" {
		t.Errorf("latency-sensitive shares %s, want 2048", got)
	}
	if got := read(batch, "cpu.shares"); got != "204" {
		t.Errorf("batch shares %s, want 204", got)
	}
	if got := read(batch, "cpu.cfs_quota_us"); got != "200000" {
		t.Errorf("quota %s, want 200000 (2 cores)", got)
	}
}

func TestLimitsFor(t *testing.T) {
	for i, tc := range []struct {
		appclass string
		priority int32
		milli    int64
		want     cgroup.Limits
	}{
		{"latency-sensitive", 0, 1000, cgroup.Limits{CPUShares: 1024, CPUQuotaMilli: 1000, MemoryBytes: 1 << 20}},
		{"batch", 0, 1000, cgroup.Limits{CPUShares: 102, CPUQuotaMilli: 1000, MemoryBytes: 1 << 20}},
		{"", 9, 500, cgroup.Limits{CPUShares: 512, CPUQuotaMilli: 500, MemoryBytes: 1 << 20}},
		{"", 2, 500, cgroup.Limits{CPUShares: 51, CPUQuotaMilli: 500, MemoryBytes: 1 << 20}},
		{"batch", 0, 0, cgroup.Limits{CPUShares: 2, MemoryBytes: 1 << 20}},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			got := limitsFor(&agentpb.TaskSpec{Appclass: tc.appclass, Priority: tc.priority,
				Resources: &events.Resources{CpuMilli: tc.milli, MemoryBytes: 1 << 20}})
			if got != tc.want {
				t.Errorf("%q priority %d %d milli: %+v, want %+v", tc.appclass, tc.priority, tc.milli, got, tc.want)
			}
		})
	}
}

// Without cgroups the agent says so at start, and in every report.
func TestSamplingModeIsAnnounced(t *testing.T) {
	var log testkit.SyncBuffer
	a, err := New(Config{Name: "m1", DataDir: t.TempDir(), Cgroups: "sampling", MemoryLowWater: -1,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "without cgroups") {
		t.Errorf("start log %q", log.String())
	}
	st := a.State()
	if st.CgroupMode != agentpb.CgroupMode_CGROUP_MODE_SAMPLING || !strings.Contains(st.CgroupNote, "sampling") {
		t.Errorf("report: %v %q", st.CgroupMode, st.CgroupNote)
	}
}
