package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/events"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	running  = agentpb.TaskState_TASK_STATE_RUNNING
	backoff  = agentpb.TaskState_TASK_STATE_BACKOFF
	stopping = agentpb.TaskState_TASK_STATE_STOPPING
	finished = agentpb.TaskState_TASK_STATE_FINISHED
	failed   = agentpb.TaskState_TASK_STATE_FAILED
	killed   = agentpb.TaskState_TASK_STATE_KILLED
	evicted  = agentpb.TaskState_TASK_STATE_EVICTED
)

func kinds(evs []*agentpb.AgentEvent) []string {
	var out []string
	for _, e := range evs {
		k := strings.TrimPrefix(e.Kind.String(), "EVENT_KIND_")
		if e.WillRestart {
			k += "+restart"
		}
		out = append(out, k)
	}
	return out
}

// Backoff doubles from the initial delay up to the max, and the task fails
// for good once max_restarts restarts are used up.
func TestBackoffDoublesCapsAndStopsAtMaxRestarts(t *testing.T) {
	h := newHarness(t)
	r := ref("crash", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec(func(s *agentpb.TaskSpec) { s.Restart.MaxRestarts = 3 })))
	var delays []time.Duration
	for i := 0; i < 4; i++ {
		h.rt.last().exitCode(1)
		if i == 3 {
			break
		}
		ts := h.waitState(r, backoff)
		delay := time.UnixMicro(ts.NextStartAtUs).Sub(h.clock.Now())
		delays = append(delays, delay)
		h.clock.Advance(delay - time.Millisecond)
		if n := h.rt.count(); n != i+1 {
			t.Fatalf("restarted before its backoff: %d processes", n)
		}
		h.clock.Advance(time.Millisecond)
		h.waitState(r, running)
	}
	if want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond}; !slices.Equal(delays, want) {
		t.Errorf("backoff delays %v, want %v", delays, want)
	}
	ts := h.waitState(r, failed)
	if ts.Failures != 4 || ts.Restarts != 3 || ts.ExitCode != 1 || ts.Reason != ReasonExited {
		t.Errorf("final status %v", ts)
	}
	want := []string{"STARTED", "FAILED+restart", "STARTED", "FAILED+restart", "STARTED", "FAILED+restart", "STARTED", "FAILED"}
	if got := kinds(h.a.State().Events); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

func TestRestartPolicies(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		code  int
		state agentpb.TaskState
	}{
		{"always", 0, backoff},
		{"always", 3, backoff},
		{"on-failure", 0, finished},
		{"", 0, finished},
		{"on-failure", 3, backoff},
		{"", 3, backoff},
		{"never", 3, failed},
		{"never", 0, finished},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.mode, tc.code), func(t *testing.T) {
			h := newHarness(t)
			r := ref("j", 0)
			h.poll(StartRequest(h.id(), r, 1, 0, spec(func(s *agentpb.TaskSpec) { s.Restart.Mode = tc.mode })))
			h.rt.last().exitCode(tc.code)
			ts := h.waitState(r, tc.state)
			if ts.ExitCode != int32(tc.code) {
				t.Errorf("exit code %d, want %d", ts.ExitCode, tc.code)
			}
		})
	}
}

// A process that ran for a long time before failing starts the backoff
// sequence over.
func TestBackoffResetsAfterALongRun(t *testing.T) {
	h := newHarness(t)
	r := ref("j", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec()))
	for i := 0; i < 3; i++ {
		h.rt.last().exitCode(1)
		ts := h.waitState(r, backoff)
		h.clock.Advance(time.UnixMicro(ts.NextStartAtUs).Sub(h.clock.Now()))
		h.waitState(r, running)
	}
	h.clock.Advance(time.Second) // 4x the 250 ms max
	h.rt.last().exitCode(1)
	ts := h.waitState(r, backoff)
	if d := time.UnixMicro(ts.NextStartAtUs).Sub(h.clock.Now()); d != 100*time.Millisecond {
		t.Errorf("backoff after a long run %v, want the initial 100ms", d)
	}
}

// Stop sends SIGTERM, then SIGKILL when the grace period ends.
func TestStopEscalatesToSIGKILLAfterGrace(t *testing.T) {
	h := newHarness(t)
	r := ref("j", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec()))
	p := h.rt.last()
	p.mu.Lock()
	p.trapTerm = true
	p.mu.Unlock()
	h.poll(StopRequest(h.id(), r, "scaled down", 5000))
	if ts := h.task(r); ts.State != stopping {
		t.Fatalf("state after stop %v", ts.State)
	}
	h.clock.Advance(4999 * time.Millisecond)
	if got := p.sigs(); !slices.Equal(got, []syscall.Signal{syscall.SIGTERM}) {
		t.Fatalf("signals before the grace period ends %v", got)
	}
	h.clock.Advance(time.Millisecond)
	ts := h.waitState(r, killed)
	if got := p.sigs(); !slices.Equal(got, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}) {
		t.Errorf("signals %v", got)
	}
	if ts.Reason != "scaled down" || ts.Signal != "SIGKILL" {
		t.Errorf("status %v", ts)
	}
	// A resent stop, or a stop of an unknown task, changes nothing.
	h.poll(StopRequest(h.id(), r, "again", 0), StopRequest(h.id(), ref("nope", 1), "", 0))
	if ts := h.task(r); ts.State != killed || ts.Reason != "scaled down" {
		t.Errorf("status after a second stop %v", ts)
	}
}

// The job's kill_timeout is the grace period, whatever the stop asks; a
// stop of a task without one gets the stop's.
func TestStopGivesTheSpecsKillTimeout(t *testing.T) {
	h := newHarness(t)
	r := ref("j", 0)
	sp := spec()
	sp.KillTimeoutMs = 3000
	h.poll(StartRequest(h.id(), r, 1, 0, sp))
	p := h.rt.last()
	p.mu.Lock()
	p.trapTerm = true
	p.mu.Unlock()
	h.poll(StopRequest(h.id(), r, "job killed", 10000))
	h.clock.Advance(2999 * time.Millisecond)
	if got := p.sigs(); !slices.Equal(got, []syscall.Signal{syscall.SIGTERM}) {
		t.Fatalf("signals before kill_timeout ends %v", got)
	}
	h.clock.Advance(time.Millisecond)
	h.waitState(r, killed)
	if got := p.sigs(); !slices.Equal(got, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}) {
		t.Errorf("signals at kill_timeout %v", got)
	}
}

func TestStopDuringBackoffKillsWithoutAProcess(t *testing.T) {
	h := newHarness(t)
	r := ref("j", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec()))
	h.rt.last().exitCode(1)
	h.waitState(r, backoff)
	h.poll(StopRequest(h.id(), r, "job killed", 0))
	h.clock.Advance(time.Second)
	if ts := h.task(r); ts.State != killed || h.rt.count() != 1 {
		t.Errorf("status %v after %d processes", ts, h.rt.count())
	}
}

// A task failing its health check more often than allowed is restarted.
func TestHealthCheckFailuresRestartTheTask(t *testing.T) {
	h := newHarness(t)
	var healthy = map[int]bool{}
	h.a.mu.Lock()
	h.a.probe = func(ctx context.Context, url string) error {
		if !strings.HasPrefix(url, "http://127.0.0.1:8080/healthz") {
			return fmt.Errorf("unexpected url %s", url)
		}
		if healthy[len(healthy)] {
			return nil
		}
		return errors.New("connection refused")
	}
	h.a.mu.Unlock()
	r := ref("web", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec(func(s *agentpb.TaskSpec) {
		s.Ports = []*agentpb.Port{{Name: "http", Number: 8080}}
		s.HealthCheck = &events.HealthCheck{Path: "/healthz", PortName: "http", PeriodMs: 1000, FailuresAllowed: 2}
	})))
	if ts := h.task(r); ts.Health != agentpb.Health_HEALTH_UNKNOWN {
		t.Fatalf("health before the first check %v", ts.Health)
	}
	p := h.rt.last()
	h.clock.Advance(time.Second)
	h.clock.Advance(time.Second)
	if ts := h.task(r); ts.State != running || ts.Health != agentpb.Health_HEALTH_UNHEALTHY || ts.HealthFailures != 2 {
		t.Fatalf("after two failures, allowed: %v", ts)
	}
	h.clock.Advance(time.Second)
	if got := p.sigs(); !slices.Equal(got, []syscall.Signal{syscall.SIGTERM}) {
		t.Fatalf("signals after the third failure %v", got)
	}
	ts := h.waitState(r, backoff)
	if ts.Reason != ReasonHealth || ts.Failures != 1 || !strings.Contains(ts.Message, "failed 3 times") {
		t.Errorf("status %v", ts)
	}
	h.clock.Advance(100 * time.Millisecond)
	ts = h.waitState(r, running)
	if ts.Restarts != 1 || ts.HealthFailures != 0 {
		t.Errorf("after restart %v", ts)
	}
}

// A healthy task replaced by a new release is not healthy until the new
// process passes its own check: the old process's health must not carry
// over, or a release that never serves would look healthy and its rolling
// update commit.
func TestReplacedProcessStartsUnchecked(t *testing.T) {
	h := newHarness(t)
	serving := true
	h.a.mu.Lock()
	h.a.probe = func(context.Context, string) error {
		if serving {
			return nil
		}
		return errors.New("connection refused")
	}
	h.a.mu.Unlock()
	r := ref("web", 0)
	withCheck := func(args ...string) *agentpb.TaskSpec {
		return spec(func(s *agentpb.TaskSpec) {
			s.Ports = []*agentpb.Port{{Name: "http", Number: 8080}}
			s.HealthCheck = &events.HealthCheck{Path: "/", PortName: "http", PeriodMs: 1000, FailuresAllowed: 2}
			if len(args) > 0 {
				s.Args = args
			}
		})
	}
	h.poll(StartRequest(h.id(), r, 1, 0, withCheck()))
	h.clock.Advance(time.Second)
	if ts := h.task(r); ts.Health != agentpb.Health_HEALTH_HEALTHY {
		t.Fatalf("version 1 after its first check: %v", ts.Health)
	}
	serving = false
	h.poll(StartRequest(h.id(), r, 2, 0, withCheck("-c", "exec sleep 3600")))
	ts := h.waitState(r, running)
	if ts.SpecVersion != 2 || h.rt.count() != 2 {
		t.Fatalf("the release did not replace the process: %v, %d processes", ts, h.rt.count())
	}
	if ts.Health != agentpb.Health_HEALTH_UNKNOWN {
		t.Errorf("the new process reports %v before any check of its own", ts.Health)
	}
	h.clock.Advance(time.Second)
	if ts := h.task(r); ts.Health != agentpb.Health_HEALTH_UNHEALTHY {
		t.Errorf("after its first failed check: %v", ts.Health)
	}
}

func TestHealthyTaskStaysUp(t *testing.T) {
	h := newHarness(t)
	h.a.mu.Lock()
	h.a.probe = func(context.Context, string) error { return nil }
	h.a.mu.Unlock()
	r := ref("web", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec(func(s *agentpb.TaskSpec) {
		s.Ports = []*agentpb.Port{{Number: 8080}}
		s.HealthCheck = &events.HealthCheck{Path: "/", PeriodMs: 500}
	})))
	for i := 0; i < 10; i++ {
		h.clock.Advance(500 * time.Millisecond)
	}
	if ts := h.task(r); ts.State != running || ts.Health != agentpb.Health_HEALTH_HEALTHY || h.rt.count() != 1 {
		t.Errorf("status %v", ts)
	}
}

// Where the kernel does not enforce memory, the agent kills a task over its
// limit and reports an OOM eviction.
func TestSamplingModeEvictsOverLimit(t *testing.T) {
	h := newHarness(t)
	h.rt.enforce = false
	r := ref("hog", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec()))
	h.rt.last().setStats(cgroup.Stats{MemoryBytes: 65 << 20})
	h.clock.Advance(time.Second)
	ts := h.waitState(r, evicted)
	if ts.Reason != ReasonOOM || ts.OomKills != 1 || !strings.Contains(ts.Message, "over its memory limit") {
		t.Errorf("status %v", ts)
	}
	evs := h.a.State().Events
	if last := evs[len(evs)-1]; last.Kind != agentpb.EventKind_EVENT_KIND_EVICTED || last.Reason != ReasonOOM {
		t.Errorf("last event %v", last)
	}
}

// A SIGKILL by the kernel's OOM killer, seen in the container's counters,
// is an OOM eviction, not a failure.
func TestKernelOOMKillIsAnEviction(t *testing.T) {
	h := newHarness(t)
	r := ref("hog", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec(func(s *agentpb.TaskSpec) { s.Restart.Mode = "always" })))
	p := h.rt.last()
	p.setStats(cgroup.Stats{OOMKills: 1, MemoryPeakBytes: 64 << 20})
	p.finish(exitStatus{known: true, code: -1, signal: syscall.SIGKILL})
	ts := h.waitState(r, evicted)
	if ts.Reason != ReasonOOM || ts.OomKills != 1 || ts.Signal != "SIGKILL" {
		t.Errorf("status %v", ts)
	}
}

func TestMemoryPressureEvictsLowestPriorityFirst(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Capacity.MemoryBytes = 100 << 20 })
	mem := map[string]int64{"best-effort": 40 << 20, "batch": 40 << 20, "batch-big": 10 << 20, "prod": 40 << 20}
	prio := map[string]int32{"best-effort": 0, "batch": 2, "batch-big": 2, "prod": 9}
	procs := map[string]*fakeProc{}
	for _, job := range []string{"best-effort", "batch", "batch-big", "prod"} {
		h.poll(StartRequest(h.id(), ref(job, 0), 1, 0, spec(func(s *agentpb.TaskSpec) {
			s.Priority = prio[job]
			s.Resources.MemoryBytes = 1 << 30
		})))
		procs[job] = h.rt.last()
		procs[job].setStats(cgroup.Stats{MemoryBytes: mem[job]})
	}
	h.clock.Advance(time.Second) // 130 MiB used of 100
	ts := h.waitState(ref("best-effort", 0), evicted)
	if ts.Reason != ReasonOvercommitted {
		t.Errorf("status %v", ts)
	}
	for _, job := range []string{"batch", "batch-big", "prod"} {
		if ts := h.task(ref(job, 0)); ts.State != running {
			t.Errorf("%s: %v", job, ts.State)
		}
	}
	// Prod grows: the batch tasks go, largest first, but prod never does.
	procs["prod"].setStats(cgroup.Stats{MemoryBytes: 95 << 20})
	h.clock.Advance(time.Second)
	h.waitState(ref("batch", 0), evicted)
	h.clock.Advance(time.Second)
	h.waitState(ref("batch-big", 0), evicted)
	procs["prod"].setStats(cgroup.Stats{MemoryBytes: 200 << 20})
	h.clock.Advance(time.Second)
	if ts := h.task(ref("prod", 0)); ts.State != running {
		t.Errorf("prod task %v", ts.State)
	}
}

func TestPressureVictims(t *testing.T) {
	const gib = 1 << 30
	mem := func(key string, prio int32, used int64) pressureCandidate {
		return pressureCandidate{key: key, priority: prio, memory: used}
	}
	for _, tc := range []struct {
		name  string
		cands []pressureCandidate
		need  pressureNeed
		want  []string
	}{
		{"nothing short", []pressureCandidate{mem("a", 2, 10)}, pressureNeed{}, nil},
		{"lowest priority, then the largest", []pressureCandidate{mem("a", 2, 10), mem("b", 0, 5), mem("c", 0, 20), mem("d", 5, 100), mem("e", 2, 30)},
			pressureNeed{memory: 1}, []string{"c"}},
		{"until relieved", []pressureCandidate{mem("a", 2, 10), mem("b", 0, 5), mem("c", 0, 20), mem("d", 5, 100), mem("e", 2, 30)},
			pressureNeed{memory: 21}, []string{"c", "b"}},
		{"everything it can", []pressureCandidate{mem("a", 2, 10), mem("b", 0, 5), mem("c", 0, 20), mem("d", 5, 100), mem("e", 2, 30)},
			pressureNeed{memory: 1000}, []string{"c", "b", "e", "a", "d"}},
		{"over its own limit first", []pressureCandidate{mem("b1", 1, 4*gib), {key: "greedy", priority: 6, memory: 6 * gib, overLimit: true}},
			pressureNeed{memory: 4 * gib}, []string{"greedy"}},
		{"what is short, not the largest", []pressureCandidate{mem("big", 2, 8*gib), {key: "writer", priority: 2, memory: gib, disk: 50 * gib}},
			pressureNeed{disk: 10 * gib}, []string{"writer"}},
		{"a task that frees nothing short stays", []pressureCandidate{mem("m", 0, 8*gib)}, pressureNeed{disk: gib}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pressureVictims(tc.cands, tc.need); !slices.Equal(got, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

func TestUsageTotalsAndWindows(t *testing.T) {
	h := newHarness(t)
	r := ref("j", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec(func(s *agentpb.TaskSpec) { s.Restart.Mode = "always" })))
	p := h.rt.last()
	p.setStats(cgroup.Stats{CPUNanos: 1e9, MemoryBytes: 100})
	h.clock.Advance(time.Second)
	p.setStats(cgroup.Stats{CPUNanos: 3e9, MemoryBytes: 300})
	h.clock.Advance(time.Second)
	st := h.poll()
	u := st.Usage[0]
	// Memory 0 -> 100 -> 300 over two seconds: 50 + 200 byte-seconds.
	if u.CpuCoreSecondsTotal != 3 || u.MemoryByteSecondsTotal != 250 || u.MemoryBytes != 300 {
		t.Errorf("sample %v", u)
	}
	if u.Window.CpuCoreSeconds != 3 || u.Window.MemoryBytes != 125 || u.Window.MemoryMaxBytes != 300 {
		t.Errorf("first window %v", u.Window)
	}
	// The process exits and is restarted: totals carry on.
	p.finish(exitStatus{known: true, code: 0})
	h.waitState(r, backoff)
	h.clock.Advance(100 * time.Millisecond)
	h.waitState(r, running)
	h.rt.last().setStats(cgroup.Stats{CPUNanos: 1e9, MemoryBytes: 100})
	h.clock.Advance(time.Second)
	u = h.poll().Usage[0]
	if u.CpuCoreSecondsTotal != 4 || u.Window.CpuCoreSeconds != 1 {
		t.Errorf("after a restart: total %v, window %v", u.CpuCoreSecondsTotal, u.Window)
	}
}

func TestUpdateInPlaceOrByRestart(t *testing.T) {
	h := newHarness(t)
	r := ref("j", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec()))
	p := h.rt.last()
	// New limits: changed in place.
	h.poll(UpdateRequest(h.id(), r, 2, spec(func(s *agentpb.TaskSpec) { s.Resources.MemoryBytes = 128 << 20 })))
	if ts := h.task(r); ts.State != running || ts.SpecVersion != 2 || h.rt.count() != 1 {
		t.Fatalf("in-place update: %v, %d processes", ts, h.rt.count())
	}
	p.mu.Lock()
	if p.limits.MemoryBytes != 128<<20 {
		t.Errorf("limits not updated: %+v", p.limits)
	}
	p.mu.Unlock()
	// A resent start at the same version does nothing.
	h.poll(StartRequest(h.id(), r, 2, 0, spec(func(s *agentpb.TaskSpec) { s.Resources.MemoryBytes = 128 << 20 })))
	if h.rt.count() != 1 {
		t.Fatalf("resent start started a process")
	}
	// New args: the process is replaced.
	h.poll(StartRequest(h.id(), r, 3, 0, spec(func(s *agentpb.TaskSpec) { s.Args = []string{"-c", "sleep 31"} })))
	ts := h.waitState(r, running)
	if h.rt.count() != 2 || ts.SpecVersion != 3 || ts.Failures != 0 {
		t.Errorf("restart update: %v, %d processes", ts, h.rt.count())
	}
	if got := h.rt.last().ls.args; !slices.Equal(got, []string{"-c", "sleep 31"}) {
		t.Errorf("new process args %v", got)
	}
}

func TestBadRequestsAreRefusedWithTheField(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		req  *agentpb.Request
		want string
	}{
		{StartRequest("1", &events.TaskRef{User: "", Job: "j"}, 1, 0, spec()), "task.user"},
		{StartRequest("2", &events.TaskRef{User: "a", Job: "../x"}, 1, 0, spec()), "task.job"},
		{StartRequest("3", &events.TaskRef{User: "a", Job: "j", Index: -1}, 1, 0, spec()), "task.index"},
		{StartRequest("4", ref("j", 0), 1, 0, nil), "spec: required"},
		{StartRequest("5", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) { s.Command = "" })), "spec.command: required"},
		{StartRequest("6", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) { s.Env = map[string]string{"CORRAL_JOB": "x"} })), "spec.env[CORRAL_JOB]: reserved"},
		{StartRequest("7", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) { s.Env = map[string]string{"A=B": "x"} })), "not a valid variable name"},
		{StartRequest("8", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) { s.Resources.MemoryBytes = -1 })), "spec.resources"},
		{StartRequest("9", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) { s.Resources.MemoryBytes = 1 << 20 })), "4 MiB minimum"},
		{StartRequest("10", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) { s.Restart.Mode = "sometimes" })), "spec.restart.mode"},
		{StartRequest("11", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) { s.Ports = []*agentpb.Port{{Number: 70000}} })), "spec.ports[0].number"},
		{StartRequest("12", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) {
			s.HealthCheck = &events.HealthCheck{Path: "/", PortName: "http"}
		})), `spec.health_check.port_name "http"`},
		{StartRequest("13", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) { s.Appclass = "fast" })), "spec.appclass"},
		{StartRequest("14", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) { s.Priority = 12 })), "spec.priority"},
		{StartRequest("14a", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) { s.KillTimeoutMs = -1 })), "spec.kill_timeout_ms -1"},
		{StartRequest("14b", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) { s.KillTimeoutMs = events.MaxKillTimeout.Milliseconds() + 1 })), "spec.kill_timeout_ms"},
		{StopRequest("15", ref("j", 0), "", -1), "grace_period_ms"},
		{UpdateRequest("16", ref("nope", 0), 2, spec()), "does not run here"},
		{&agentpb.Request{Id: "17"}, "no kind"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			st, err := h.a.Poll(context.Background(), &agentpb.PollRequest{Requests: []*agentpb.Request{tc.req}})
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Results[0].Error; !strings.Contains(got, tc.want) {
				t.Errorf("request %s: error %q, want it to name %q", tc.req.Id, got, tc.want)
			}
			if len(st.Tasks) != 0 {
				t.Fatalf("request %s created a task", tc.req.Id)
			}
		})
	}
	// A command that cannot be found fails the start, by the restart policy.
	h.poll(StartRequest("18", ref("j", 0), 1, 0, spec(func(s *agentpb.TaskSpec) {
		s.Command = "no-such-command"
		s.Restart.Mode = "never"
	})))
	ts := h.waitState(ref("j", 0), failed)
	if ts.Reason != ReasonStartFailed || !strings.Contains(ts.Message, `"no-such-command": not found in PATH`) {
		t.Errorf("status %v", ts)
	}
	// Forgetting a live task is refused; an ended one disappears.
	h.poll(StartRequest("19", ref("live", 0), 1, 0, spec()))
	st, _ := h.a.Poll(context.Background(), &agentpb.PollRequest{Epoch: 1, Requests: []*agentpb.Request{ForgetRequest("20", ref("live", 0))}})
	if !strings.Contains(st.Results[0].Error, "stop it first") {
		t.Errorf("forget of a live task: %q", st.Results[0].Error)
	}
	h.poll(ForgetRequest("21", ref("j", 0)))
	if h.task(ref("j", 0)) != nil {
		t.Errorf("forgotten task still reported")
	}
}

func TestOlderEpochIsRefused(t *testing.T) {
	h := newHarness(t)
	if _, err := h.a.Poll(context.Background(), &agentpb.PollRequest{Epoch: 5}); err != nil {
		t.Fatal(err)
	}
	_, err := h.a.Poll(context.Background(), &agentpb.PollRequest{Epoch: 4, Requests: []*agentpb.Request{StartRequest("x", ref("j", 0), 1, 0, spec())}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("poll with an older epoch: %v", err)
	}
	if st := h.a.State(); len(st.Tasks) != 0 || st.Epoch != 5 {
		t.Errorf("a deposed master changed state: %v", st)
	}
}

func TestEventsStayUntilAcknowledged(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxEvents = 3 })
	r := ref("j", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec()))
	h.rt.last().exitCode(1)
	h.waitState(r, backoff)
	st := h.poll()
	if got := kinds(st.Events); !slices.Equal(got, []string{"STARTED", "FAILED+restart"}) || st.LastEventSeq != 2 {
		t.Fatalf("events %v, last %d", got, st.LastEventSeq)
	}
	st, _ = h.a.Poll(context.Background(), &agentpb.PollRequest{Epoch: 1, EventsAcked: 1})
	if len(st.Events) != 1 || st.Events[0].Seq != 2 {
		t.Fatalf("after ack 1: %v", st.Events)
	}
	for i := 0; i < 2; i++ {
		h.clock.Advance(time.Second)
		h.waitState(r, running)
		h.rt.last().exitCode(1)
		h.waitState(r, backoff)
	}
	st = h.poll()
	if len(st.Events) != 3 || st.EventsDropped != 2 || st.Events[2].Seq != 6 {
		t.Errorf("overflow: %d events, %d dropped, last %v", len(st.Events), st.EventsDropped, st.Events[len(st.Events)-1])
	}
}

// A restarted agent adopts the processes that still run and reports the
// ones that ended while it was away; its event sequence carries on.
func TestRestartAdoptsLiveProcessesAndReportsLostOnes(t *testing.T) {
	h := newHarness(t)
	alive, dead, waiting := ref("alive", 0), ref("dead", 0), ref("waiting", 0)
	h.poll(StartRequest(h.id(), alive, 1, 0, spec()), StartRequest(h.id(), dead, 1, 0, spec()), StartRequest(h.id(), waiting, 1, 0, spec()))
	h.rt.mu.Lock()
	alivePid, deadPid, waitingProc := h.rt.procs[0].p, h.rt.procs[1].p, h.rt.procs[2]
	h.rt.mu.Unlock()
	waitingProc.exitCode(2)
	h.waitState(waiting, backoff)
	last := h.poll().LastEventSeq
	if err := h.a.Close(); err != nil {
		t.Fatal(err)
	}
	h.rt.mu.Lock()
	delete(h.rt.alive, deadPid)
	h.rt.mu.Unlock()

	h.open()
	st := h.a.State()
	byJob := map[string]*agentpb.TaskStatus{}
	for _, ts := range st.Tasks {
		byJob[ts.Task.Job] = ts
	}
	if ts := byJob["alive"]; ts.State != running || !ts.Adopted || ts.Pid != int64(alivePid) {
		t.Errorf("alive task %v", ts)
	}
	if ts := byJob["dead"]; ts.State != backoff || ts.Reason != ReasonLost || ts.Failures != 1 {
		t.Errorf("dead task %v", ts)
	}
	if ts := byJob["waiting"]; ts.State != backoff {
		t.Errorf("waiting task %v", ts)
	}
	var newKinds []string
	for _, e := range st.Events {
		if e.Seq > last {
			newKinds = append(newKinds, strings.TrimPrefix(e.Kind.String(), "EVENT_KIND_")+" "+e.Task.Job)
		}
	}
	if want := []string{"ADOPTED alive", "FAILED dead"}; !slices.Equal(newKinds, want) {
		t.Errorf("events after restart %v, want %v", newKinds, want)
	}
	h.clock.Advance(time.Second)
	h.waitState(dead, running)
	h.waitState(waiting, running)
	// The adopted process is supervised like any other.
	h.poll(StopRequest(h.id(), alive, "done", 0))
	h.waitState(alive, killed)
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{DataDir: t.TempDir()}, "Config.Name"},
		{Config{Name: "m/1", DataDir: t.TempDir()}, "Config.Name"},
		{Config{Name: "m1"}, "Config.DataDir: required"},
		{Config{Name: "m1", DataDir: t.TempDir(), PortFirst: 10, PortLast: 5}, "Config.PortFirst-PortLast"},
		{Config{Name: "m1", DataDir: t.TempDir(), Attributes: map[string]string{"arch": "x"}}, "Config.Attributes[arch]: detected"},
		{Config{Name: "m1", DataDir: t.TempDir(), Capacity: &events.Resources{CpuMilli: -1}}, "Config.Capacity"},
		{Config{Name: "m1", DataDir: t.TempDir(), Cgroups: "v9"}, "Config.Cgroups"},
		{Config{Name: "m1", DataDir: t.TempDir(), SampleInterval: -1}, "Config.SampleInterval"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
			}
		})
	}
}

func TestDetectedCapacityAndAttributes(t *testing.T) {
	cfg, err := Config{Name: "m1", DataDir: t.TempDir(), Attributes: map[string]string{"rack": "r1"},
		Capacity: &events.Resources{CpuMilli: 1500}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Capacity
	if c.CpuMilli != 1500 || c.MemoryBytes <= 0 || c.DiskBytes <= 0 || c.Ports != 10000 {
		t.Errorf("capacity %v", c)
	}
	if cfg.Attributes["rack"] != "r1" || cfg.Attributes["os"] != "linux" || cfg.Attributes["arch"] == "" {
		t.Errorf("attributes %v", cfg.Attributes)
	}
}

func TestDataDirIsExclusive(t *testing.T) {
	h := newHarness(t)
	cfg := h.cfg
	cfg.Cgroups = "sampling"
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "in use by another agent") {
		t.Fatalf("second agent on a data dir: %v", err)
	}
}

func TestResolveSpec(t *testing.T) {
	job := &events.JobSpec{
		Name: "web", User: "alice", Priority: 9, TaskCount: 3, Command: "/srv/web", Args: []string{"--a"},
		Env:       map[string]string{"MODE": "prod", "X": "1"},
		Resources: &events.Resources{CpuMilli: 500, MemoryBytes: 64 << 20, Ports: 2},
		Overrides: map[int32]*events.TaskOverride{
			1: {Args: []string{"--b"}, Env: map[string]string{"X": "2"}, Resources: &events.Resources{CpuMilli: 900, MemoryBytes: 128 << 20, Ports: 2}},
		},
		PortNames: []string{"http"},
		Appclass:  "latency-sensitive",
		Restart:   &events.RestartPolicy{Mode: "always"},
	}
	s, err := ResolveSpec(job, 1, []int32{20001, 20002})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Args, []string{"--b"}) || s.Env["X"] != "2" || s.Env["MODE"] != "prod" || s.Resources.CpuMilli != 900 {
		t.Errorf("override not applied: %v", s)
	}
	if len(s.Ports) != 2 || s.Ports[0].Name != "http" || s.Ports[0].Number != 20001 || s.Ports[1].Name != "" {
		t.Errorf("ports %v", s.Ports)
	}
	if job.Env["X"] != "1" {
		t.Errorf("ResolveSpec changed the job's env")
	}
	if _, err := ResolveSpec(job, 3, []int32{1, 2}); err == nil || !strings.Contains(err.Error(), "index 3") {
		t.Errorf("index out of range: %v", err)
	}
	if _, err := ResolveSpec(job, 0, []int32{1}); err == nil || !strings.Contains(err.Error(), "ports") {
		t.Errorf("missing port: %v", err)
	}
}

// A write torn by a crash spoils only the slot being written: the agent
// restarts from the other one. With both spoiled it refuses to start rather
// than forget its tasks.
func TestStateSurvivesATornWrite(t *testing.T) {
	h := newHarness(t)
	r := ref("j", 0)
	h.poll(StartRequest(h.id(), r, 1, 0, spec()))
	if err := h.a.Close(); err != nil {
		t.Fatal(err)
	}
	newest := filepath.Join(h.cfg.DataDir, stateFiles[h.a.saveSeq%2])
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newest, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	h.open()
	if ts := h.task(r); ts == nil || ts.State != running || !ts.Adopted {
		t.Fatalf("task after restoring the older slot: %v", ts)
	}
	if err := h.a.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range stateFiles {
		if err := os.WriteFile(filepath.Join(h.cfg.DataDir, name), []byte("corral-agent-state 9 0 1\nxx"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, _ := h.cfg.withDefaults()
	if _, err := newAgent(cfg, h.rt, ""); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("start with both slots damaged: %v", err)
	}
}

func TestPollForAnotherMachineIsRefused(t *testing.T) {
	h := newHarness(t)
	_, err := h.a.Poll(context.Background(), &agentpb.PollRequest{Machine: "m2", Requests: []*agentpb.Request{StartRequest("x", ref("j", 0), 1, 0, spec())}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `runs machine "m1", not "m2"`) {
		t.Fatalf("poll meant for m2: %v", err)
	}
	if _, err := h.a.Poll(context.Background(), &agentpb.PollRequest{Machine: "m1"}); err != nil {
		t.Fatal(err)
	}
}

func TestPortCountSizesThePortRange(t *testing.T) {
	cfg, err := Config{Name: "m1", DataDir: t.TempDir(), Capacity: &events.Resources{Ports: 100}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PortFirst != 20000 || cfg.PortLast != 20099 || cfg.Capacity.Ports != 100 {
		t.Errorf("ports %d-%d, capacity %d", cfg.PortFirst, cfg.PortLast, cfg.Capacity.Ports)
	}
	_, err = Config{Name: "m1", DataDir: t.TempDir(), PortFirst: 30000, PortLast: 30009, Capacity: &events.Resources{Ports: 11}}.withDefaults()
	if err == nil || !strings.Contains(err.Error(), "Config.Capacity.Ports 11") {
		t.Errorf("more ports than the range: %v", err)
	}
}

// A run says which submission of its task it serves, in its status and
// events and across an agent restart; a start for another submission while
// the run is live is refused (the master stops the old run first).
func TestRunKeepsItsSubmission(t *testing.T) {
	h := newHarness(t)
	web := ref("web", 0)
	h.poll(StartRequest(h.id(), web, 1, 41, spec()))
	if ts := h.waitState(web, running); ts.Submission != 41 {
		t.Fatalf("status submission %d, want 41", ts.Submission)
	}
	evs := h.poll().Events
	if len(evs) == 0 {
		t.Fatal("no event of the run")
	}
	for _, e := range evs {
		if e.Submission != 41 {
			t.Fatalf("event %v without the run's submission", e)
		}
	}
	other := StartRequest(h.id(), web, 1, 57, spec())
	res, err := h.a.Poll(context.Background(), &agentpb.PollRequest{MasterId: "master", Epoch: 1, Cell: "cc", Requests: []*agentpb.Request{other}})
	if err != nil || len(res.Results) != 1 || !strings.Contains(res.Results[0].Error, "submission 41") {
		t.Fatalf("a start for another submission while the run is live: %v %v", res.GetResults(), err)
	}
	if err := h.a.Close(); err != nil {
		t.Fatal(err)
	}
	h.open()
	if ts := h.task(web); ts == nil || ts.Submission != 41 || !ts.Adopted {
		t.Fatalf("after a restart: %v", ts)
	}
}
