package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
)

// fakeClock moves only when told to. Advance fires due timers in order, in
// the caller's goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	when    time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, when: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.stopped && !t.when.After(target) && (next == nil || t.when.Before(next.when)) {
				next = t
			}
		}
		if next == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		next.stopped = true
		c.now = next.when
		c.mu.Unlock()
		next.f()
	}
}

// fakeRuntime runs no processes: tests end them and set their usage.
type fakeRuntime struct {
	mu       sync.Mutex
	enforce  bool
	nextPid  int
	procs    []*fakeProc
	startErr error
	alive    map[int]bool // pids adopt may find
	swept    []string
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{enforce: true, nextPid: 1000, alive: map[int]bool{}}
}

func (r *fakeRuntime) mode() cgroup.Mode {
	if r.enforce {
		return cgroup.ModeV1
	}
	return cgroup.ModeSampling
}
func (r *fakeRuntime) enforced() bool { return r.enforce }
func (r *fakeRuntime) close() error   { return nil }

func (r *fakeRuntime) start(ls launchSpec) (process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.startErr != nil {
		return nil, r.startErr
	}
	r.nextPid++
	p := &fakeProc{p: r.nextPid, ls: ls, doneCh: make(chan struct{}), limits: ls.limits}
	r.procs = append(r.procs, p)
	r.alive[p.p] = true
	return p, nil
}

func (r *fakeRuntime) adopt(container string, pid int, ticks uint64) (process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.alive[pid] {
		return nil, errors.New("gone")
	}
	p := &fakeProc{p: pid, ls: launchSpec{container: container}, doneCh: make(chan struct{}), adopted: true}
	r.procs = append(r.procs, p)
	return p, nil
}

func (r *fakeRuntime) sweep(keep map[string]bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.swept = append(r.swept, "sweep")
	return nil
}

func (r *fakeRuntime) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.procs)
}

func (r *fakeRuntime) last() *fakeProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[len(r.procs)-1]
}

type fakeProc struct {
	p       int
	ls      launchSpec
	adopted bool
	doneCh  chan struct{}

	mu       sync.Mutex
	status   exitStatus
	ended    bool
	signals  []syscall.Signal
	trapTerm bool
	st       cgroup.Stats
	limits   cgroup.Limits
}

func (p *fakeProc) pid() int              { return p.p }
func (p *fakeProc) startTicks() uint64    { return uint64(p.p) * 10 }
func (p *fakeProc) done() <-chan struct{} { return p.doneCh }
func (p *fakeProc) exit() exitStatus      { <-p.doneCh; return p.status }
func (p *fakeProc) release() error        { return nil }
func (p *fakeProc) update(l cgroup.Limits) error {
	p.mu.Lock()
	p.limits = l
	p.mu.Unlock()
	return nil
}

func (p *fakeProc) stats() (cgroup.Stats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st, nil
}

func (p *fakeProc) setStats(st cgroup.Stats) {
	p.mu.Lock()
	p.st = st
	p.mu.Unlock()
}

func (p *fakeProc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	p.signals = append(p.signals, sig)
	trap := p.trapTerm
	p.mu.Unlock()
	if sig == syscall.SIGKILL || (sig == syscall.SIGTERM && !trap) {
		p.finish(exitStatus{known: true, code: -1, signal: sig})
	}
	return nil
}

func (p *fakeProc) sigs() []syscall.Signal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.signals)
}

// finish ends the process with st, once.
func (p *fakeProc) finish(st exitStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	p.status = st
	close(p.doneCh)
}

func (p *fakeProc) exitCode(code int) { p.finish(exitStatus{known: true, code: code}) }

// harness is an agent on a fake clock and runtime.
type harness struct {
	t     *testing.T
	a     *Agent
	clock *fakeClock
	rt    *fakeRuntime
	cfg   Config
	seq   int
}

func newHarness(t *testing.T, mutate ...func(*Config)) *harness {
	t.Helper()
	cfg := Config{
		Name:           "m1",
		DataDir:        t.TempDir(),
		Capacity:       &events.Resources{CpuMilli: 4000, MemoryBytes: 1 << 30, DiskBytes: 1 << 30},
		SampleInterval: time.Second,
		DefaultGrace:   2 * time.Second,
		MemoryLowWater: -1,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h := &harness{t: t, clock: newFakeClock(), rt: newFakeRuntime()}
	if cfg.Clock == nil {
		cfg.Clock = h.clock
	}
	h.cfg = cfg
	h.open()
	return h
}

func (h *harness) open() {
	h.t.Helper()
	cfg, err := h.cfg.withDefaults()
	if err != nil {
		h.t.Fatal(err)
	}
	a, err := newAgent(cfg, h.rt, "")
	if err != nil {
		h.t.Fatal(err)
	}
	h.a = a
	h.t.Cleanup(func() { _ = a.Close() })
}

// poll sends requests and returns the reply; any request error fails the
// test unless allowErr.
func (h *harness) poll(reqs ...*agentpb.Request) *agentpb.AgentState {
	h.t.Helper()
	st, err := h.a.Poll(context.Background(), &agentpb.PollRequest{MasterId: "master", Epoch: 1, Cell: "cc", Requests: reqs})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range st.Results {
		if r.Error != "" {
			h.t.Fatalf("request %s: %s", r.Id, r.Error)
		}
	}
	return st
}

func (h *harness) id() string {
	h.seq++
	return "r" + strconv.Itoa(h.seq)
}

func (h *harness) task(ref *events.TaskRef) *agentpb.TaskStatus {
	for _, ts := range h.a.State().Tasks {
		if TaskKey(ts.Task) == TaskKey(ref) {
			return ts
		}
	}
	return nil
}

// waitState waits (in real time: exits are handled by a goroutine) until
// the task is in state.
func (h *harness) waitState(ref *events.TaskRef, state agentpb.TaskState) *agentpb.TaskStatus {
	h.t.Helper()
	return waitFor(h.t, 2*time.Second, func() *agentpb.TaskStatus {
		if ts := h.task(ref); ts != nil && ts.State == state {
			return ts
		}
		return nil
	}, func() string {
		return "task " + TaskKey(ref) + " never reached " + state.String() + "; now " + h.task(ref).String()
	})
}

func waitFor[T any](t *testing.T, d time.Duration, f func() *T, msg func() string) *T {
	t.Helper()
	var v *T
	if !testkit.Poll(d, func() bool { v = f(); return v != nil }) {
		t.Fatal(msg())
	}
	return v
}

func ref(job string, index int32) *events.TaskRef {
	return &events.TaskRef{User: "alice", Job: job, Index: index}
}

func spec(mutate ...func(*agentpb.TaskSpec)) *agentpb.TaskSpec {
	s := &agentpb.TaskSpec{
		Command:   "/bin/sh",
		Args:      []string{"-c", "sleep 30"},
		Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 20},
		Priority:  2,
		Restart:   &events.RestartPolicy{Mode: "on-failure", BackoffInitialMs: 100, BackoffMaxMs: 250},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}
