package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/agent/internal/procfs"
	"github.com/corralhq/corral/events"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Agent supervises the tasks of one machine and serves the Agent service.
// Its methods are safe for concurrent use.
type Agent struct {
	agentpb.UnimplementedAgentServer

	cfg         Config
	log         *slog.Logger
	clock       Clock
	logReads    chan struct{} // bounds the log reads that hold a file's window in memory
	logStreams  chan struct{} // a slot per log stream served: Config.MaxLogStreams
	rt          runtime
	probe       prober
	incarnation string
	bootID      string
	cgroupNote  string
	lockFile    *os.File // flock on the data dir: one agent per data dir
	metrics     *metrics // for Prometheus (metrics.go)

	mu       sync.Mutex
	closed   bool
	tasks    map[string]*task
	epoch    int64
	cell     string
	events   []*agentpb.AgentEvent
	nextSeq  uint64
	dropped  uint64
	lastPoll time.Time
	machine  procfs.Meminfo
	sampler  Timer
	ticks    int
	dirty    bool
	saveSeq  uint64 // of the last state written; picks the slot file
	saveCh   chan struct{}
	closing  chan struct{} // closed by Close: process watchers stop
	wg       sync.WaitGroup

	taskUser *credential // Config.TaskUser resolved; nil when unset
	nextUID  uint32      // where assignUID looks next in Config.TaskUIDs
}

// New starts an agent on cfg.DataDir: it detects the machine, picks the
// cgroup implementation, restores the tasks a previous agent left (see the
// package doc) and starts supervising. It does not listen; Run does, or the
// caller registers the Agent on its own gRPC server.
func New(cfg Config) (*Agent, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	mgr, note, err := cgroup.Detect(cfg.Cgroups, cfg.CgroupParent)
	if err != nil {
		return nil, fmt.Errorf("Config.Cgroups: %w", err)
	}
	if mgr.KernelEnforced() {
		if _, err := os.Stat("/bin/sh"); err != nil {
			return nil, fmt.Errorf("cgroups need /bin/sh to move each task into its container: %w", err)
		}
	}
	return newAgent(cfg, newOSRuntime(mgr), note)
}

func newAgent(cfg Config, rt runtime, note string) (*Agent, error) {
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		rt.close()
		return nil, err
	}
	a := &Agent{
		logReads:    make(chan struct{}, maxLogReads),
		logStreams:  make(chan struct{}, cfg.MaxLogStreams),
		cfg:         cfg,
		log:         cfg.Logger,
		clock:       cfg.Clock,
		rt:          rt,
		probe:       httpProbe,
		incarnation: newIncarnation(),
		bootID:      procfs.BootID(),
		cgroupNote:  note,
		lockFile:    lock,
		metrics:     newMetrics(),
		tasks:       map[string]*task{},
		nextSeq:     1,
		saveCh:      make(chan struct{}, 1),
		closing:     make(chan struct{}),
	}
	if m, err := procfs.ReadMeminfo(); err == nil {
		a.machine = m
	}
	if cfg.TaskUIDs.Count == 0 && cfg.TaskUser != "" {
		if a.taskUser, err = lookupTaskUser(cfg.TaskUser); err != nil {
			rt.close()
			_ = lock.Close()
			return nil, err
		}
	}
	if os.Geteuid() == 0 && !cfg.isolating() {
		a.log.Warn("tasks run as root, as the agent does: set a task user (Config.TaskUIDs) to keep them from each other and from the machine")
	}
	if rt.enforced() {
		a.log.Info("agent starting", "cgroups", rt.mode(), "note", note, "data_dir", cfg.DataDir)
	} else {
		// Said loudly: the kernel does not stop a task over its limit here.
		a.log.Warn("agent starting without cgroups: memory limits enforced by sampling and killing, CPU not limited",
			"cgroups", rt.mode(), "note", note, "data_dir", cfg.DataDir)
	}
	a.mu.Lock()
	err = a.restore()
	a.mu.Unlock()
	if err != nil {
		rt.close()
		_ = lock.Close()
		return nil, err
	}
	a.wg.Add(1)
	go a.saver()
	a.mu.Lock()
	a.armSampler()
	a.mu.Unlock()
	return a, nil
}

func newIncarnation() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("Config.DataDir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("Config.DataDir %s: in use by another agent: %w", dir, err)
	}
	return f, nil
}

// Close stops supervising and saves the agent's state. Tasks keep running:
// the next agent on the same data dir adopts them.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	if a.sampler != nil {
		a.sampler.Stop()
	}
	for _, t := range a.tasks {
		t.stopTimers()
	}
	err := a.save()
	a.mu.Unlock()
	close(a.closing)
	close(a.saveCh)
	a.wg.Wait()
	if cerr := a.rt.close(); err == nil {
		err = cerr
	}
	if cerr := a.lockFile.Close(); err == nil {
		err = cerr
	}
	return err
}

// Poll applies the master's requests and returns the agent's full state.
func (a *Agent) Poll(ctx context.Context, req *agentpb.PollRequest) (*agentpb.AgentState, error) {
	defer a.metrics.timePoll(time.Now())
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, status.Error(codes.Unavailable, "agent is shutting down")
	}
	if err := AcceptPoll(a.cfg.Name, a.epoch, req); err != nil {
		return nil, err
	}
	if req.Epoch > a.epoch || (req.Cell != "" && req.Cell != a.cell) {
		a.epoch = req.Epoch
		if req.Cell != "" {
			a.cell = req.Cell
		}
		a.dirty = true
	}
	results := make([]*agentpb.RequestResult, 0, len(req.Requests))
	for _, r := range req.Requests {
		res := &agentpb.RequestResult{Id: r.Id, Task: requestTask(r)}
		if err := a.apply(r); err != nil {
			res.Error = err.Error()
		}
		results = append(results, res)
	}
	a.ack(req.EventsAcked)
	a.metrics.polled(a.clock.Now(), a.lastPoll)
	a.lastPoll = a.clock.Now()
	st := a.snapshot(true)
	st.Results = results
	if a.dirty {
		// Before replying: a master must never be told of a task a restarted
		// agent would not know.
		if err := a.save(); err != nil {
			a.log.Error("saving agent state", "err", err)
		}
	}
	return st, nil
}

// State returns the agent's full state without acknowledging anything.
func (a *Agent) State() *agentpb.AgentState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.snapshot(false)
}

// MachineInfo is what the agent registers with the master; address is
// where its Agent service listens.
func (a *Agent) MachineInfo(address string) *agentpb.MachineInfo {
	return &agentpb.MachineInfo{
		Name:        a.cfg.Name,
		Address:     address,
		Capacity:    proto.Clone(a.cfg.Capacity).(*events.Resources),
		Attributes:  cloneAttrs(a.cfg.Attributes),
		Incarnation: a.incarnation,
		CgroupMode:  cgroupMode(a.rt.mode()),
		CgroupNote:  a.cgroupNote,
		PortFirst:   a.cfg.PortFirst,
		PortLast:    a.cfg.PortLast,
	}
}

func cgroupMode(m cgroup.Mode) agentpb.CgroupMode { return agentpb.CgroupModeOf(string(m)) }

func requestTask(r *agentpb.Request) *events.TaskRef {
	switch k := r.Kind.(type) {
	case *agentpb.Request_Start:
		return k.Start.GetTask()
	case *agentpb.Request_Stop:
		return k.Stop.GetTask()
	case *agentpb.Request_Update:
		return k.Update.GetTask()
	case *agentpb.Request_Forget:
		return k.Forget.GetTask()
	}
	return nil
}

// apply carries out one request. a.mu held.
func (a *Agent) apply(r *agentpb.Request) error {
	switch k := r.Kind.(type) {
	case *agentpb.Request_Start:
		return a.startTask(k.Start)
	case *agentpb.Request_Stop:
		return a.stopTask(k.Stop)
	case *agentpb.Request_Update:
		return a.updateTask(k.Update.GetTask(), k.Update.GetSpecVersion(), k.Update.GetSpec())
	case *agentpb.Request_Forget:
		return a.forgetTask(k.Forget)
	}
	return fmt.Errorf("request %q: no kind set", r.Id)
}

// emit records an event for the master. a.mu held.
func (a *Agent) emit(kind agentpb.EventKind, t *task, fill func(*agentpb.AgentEvent)) {
	ev := &agentpb.AgentEvent{
		Seq:         a.nextSeq,
		TimeUs:      a.clock.Now().UnixMicro(),
		Kind:        kind,
		Task:        proto.Clone(t.ref).(*events.TaskRef),
		SpecVersion: t.version,
		Submission:  t.submission,
		Pid:         int64(t.pid),
		Restarts:    t.restarts,
	}
	if fill != nil {
		fill(ev)
	}
	a.metrics.event(ev, t.spec.GetPriority())
	a.logEvent(t, ev)
	a.nextSeq++
	a.events = append(a.events, ev)
	if over := len(a.events) - a.cfg.MaxEvents; over > 0 {
		a.events = slices.Delete(a.events, 0, over)
		a.dropped += uint64(over)
	}
	a.markDirty()
}

func (a *Agent) ack(seq uint64) {
	n := 0
	for n < len(a.events) && a.events[n].Seq <= seq {
		n++
	}
	if n > 0 {
		a.events = slices.Delete(a.events, 0, n)
		a.markDirty()
	}
}

// snapshot builds the full state; reset starts new usage windows. a.mu held.
func (a *Agent) snapshot(reset bool) *agentpb.AgentState {
	now := a.clock.Now()
	st := &agentpb.AgentState{
		Machine:       a.cfg.Name,
		Incarnation:   a.incarnation,
		TimeUs:        now.UnixMicro(),
		Capacity:      proto.Clone(a.cfg.Capacity).(*events.Resources),
		Attributes:    cloneAttrs(a.cfg.Attributes),
		CgroupMode:    cgroupMode(a.rt.mode()),
		CgroupNote:    a.cgroupNote,
		Epoch:         a.epoch,
		LastEventSeq:  a.nextSeq - 1,
		EventsDropped: a.dropped,
		MachineUsage: &agentpb.MachineUsage{
			MemoryTotalBytes:     a.machine.Total,
			MemoryAvailableBytes: a.machine.Available,
		},
	}
	keys := make([]string, 0, len(a.tasks))
	for k := range a.tasks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t := a.tasks[k]
		st.Tasks = append(st.Tasks, a.status(t))
		if u := t.u.report(t.ref, now, reset); u != nil {
			st.Usage = append(st.Usage, u)
			if t.proc != nil {
				st.MachineUsage.TasksMemoryBytes += u.MemoryBytes
			}
			st.MachineUsage.TasksCpuCoreSecondsTotal += u.CpuCoreSecondsTotal
		}
	}
	for _, ev := range a.events {
		st.Events = append(st.Events, proto.Clone(ev).(*agentpb.AgentEvent))
	}
	return st
}

func usOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromUs(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// status reports one task. a.mu held.
func (a *Agent) status(t *task) *agentpb.TaskStatus {
	return &agentpb.TaskStatus{
		Task:           proto.Clone(t.ref).(*events.TaskRef),
		SpecVersion:    t.version,
		Submission:     t.submission,
		State:          t.state,
		Pid:            int64(t.pid),
		ExitCode:       t.exitCode,
		Signal:         t.signal,
		Restarts:       t.restarts,
		Failures:       t.failures,
		OomKills:       t.oomKills,
		Health:         t.health,
		HealthFailures: t.healthFailures,
		HealthMessage:  t.healthMessage,
		Ports:          clonePorts(t.spec.Ports),
		StartedAtUs:    usOrZero(t.startedAt),
		FinishedAtUs:   usOrZero(t.finishedAt),
		NextStartAtUs:  usOrZero(t.nextStartAt),
		Reason:         t.reason,
		Message:        t.message,
		Priority:       t.spec.Priority,
		Appclass:       appclass(t.spec),
		Resources:      proto.Clone(orEmpty(t.spec.Resources)).(*events.Resources),
		Sandbox:        t.sandbox,
		Adopted:        t.adopted,
	}
}

func clonePorts(ps []*agentpb.Port) []*agentpb.Port {
	out := make([]*agentpb.Port, len(ps))
	for i, p := range ps {
		out[i] = proto.Clone(p).(*agentpb.Port)
	}
	return out
}

func (a *Agent) markDirty() {
	a.dirty = true
	if a.closed {
		return // saveCh is closed; Close saved already
	}
	select {
	case a.saveCh <- struct{}{}:
	default:
	}
}

// saver writes the state soon after changes that no poll will save, such as
// a restart after backoff.
func (a *Agent) saver() {
	defer a.wg.Done()
	for range a.saveCh {
		a.mu.Lock()
		if a.dirty && !a.closed {
			if err := a.save(); err != nil {
				a.log.Error("saving agent state", "err", err)
			}
		}
		a.mu.Unlock()
	}
}
