package agentsim

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Config describes one simulated machine.
type Config struct {
	Name       string // required
	Capacity   *events.Resources
	Attributes map[string]string
	Now        func() time.Time // default time.Now
	// RunFor is how long a started task runs before it exits 0; zero runs
	// it until stopped.
	RunFor time.Duration
	// CPUFraction and MemoryFraction shape synthetic usage: a task uses
	// this fraction of its CPU and memory limits. Defaults 0.5 and 0.6.
	CPUFraction, MemoryFraction float64
}

// Agent is one simulated machine. Safe for concurrent use.
type Agent struct {
	agentpb.UnimplementedAgentServer
	cfg         Config
	incarnation string

	mu          sync.Mutex
	tasks       map[string]*simTask
	events      []*agentpb.AgentEvent
	nextSeq     uint64
	epoch       int64
	partitioned bool
	nextPid     int64
	polls       int64
}

type simTask struct {
	status    *agentpb.TaskStatus
	spec      *agentpb.TaskSpec
	startedAt time.Time // of the current run
	cpuBase   float64
}

// New returns a simulated agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Name == "" {
		return nil, fmt.Errorf("Config.Name: required")
	}
	if cfg.Capacity == nil {
		cfg.Capacity = &events.Resources{CpuMilli: 32000, MemoryBytes: 128 << 30, DiskBytes: 1 << 40, Ports: 10000}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CPUFraction == 0 {
		cfg.CPUFraction = 0.5
	}
	if cfg.MemoryFraction == 0 {
		cfg.MemoryFraction = 0.6
	}
	attrs := map[string]string{"arch": "amd64", "os": "linux"}
	maps.Copy(attrs, cfg.Attributes)
	cfg.Attributes = attrs
	return &Agent{cfg: cfg, incarnation: fmt.Sprintf("sim-%s-%d", cfg.Name, cfg.Now().UnixNano()),
		tasks: map[string]*simTask{}, nextSeq: 1, nextPid: 100}, nil
}

// Name is the simulated machine's name.
func (a *Agent) Name() string { return a.cfg.Name }

// Polls counts the polls answered.
func (a *Agent) Polls() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.polls
}

// MachineInfo is what the simulated agent would register.
func (a *Agent) MachineInfo(address string) *agentpb.MachineInfo {
	return &agentpb.MachineInfo{
		Name: a.cfg.Name, Address: address, Capacity: proto.Clone(a.cfg.Capacity).(*events.Resources),
		Attributes: maps.Clone(a.cfg.Attributes), Incarnation: a.incarnation,
		CgroupMode: agentpb.CgroupMode_CGROUP_MODE_SAMPLING, CgroupNote: "simulated: no processes",
		PortFirst: 20000, PortLast: 29999,
	}
}

// Partition makes polls fail with UNAVAILABLE while on; tasks keep running.
func (a *Agent) Partition(on bool) {
	a.mu.Lock()
	a.partitioned = on
	a.mu.Unlock()
}

// Fail makes a running task exit with code: restarted in place (a new pid)
// when its restart policy allows, failed otherwise.
func (a *Agent) Fail(ref *events.TaskRef, code int32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.cfg.Now()
	t := a.tasks[agent.TaskKey(ref)]
	if t == nil || t.status.State != agentpb.TaskState_TASK_STATE_RUNNING {
		return fmt.Errorf("task %s is not running", agent.TaskKey(ref))
	}
	a.exit(t, now, code)
	return nil
}

// Poll is the Agent service's Poll.
func (a *Agent) Poll(ctx context.Context, req *agentpb.PollRequest) (*agentpb.AgentState, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.partitioned {
		return nil, status.Error(codes.Unavailable, "simulated partition")
	}
	if err := agent.AcceptPoll(a.cfg.Name, a.epoch, req); err != nil {
		return nil, err
	}
	a.epoch = req.Epoch
	a.polls++
	now := a.cfg.Now()
	a.advance(now)
	st := &agentpb.AgentState{
		Machine: a.cfg.Name, Incarnation: a.incarnation, TimeUs: now.UnixMicro(),
		Capacity: proto.Clone(a.cfg.Capacity).(*events.Resources), Attributes: maps.Clone(a.cfg.Attributes),
		CgroupMode: agentpb.CgroupMode_CGROUP_MODE_SAMPLING, CgroupNote: "simulated: no processes",
		Epoch: a.epoch, MachineUsage: &agentpb.MachineUsage{MemoryTotalBytes: a.cfg.Capacity.MemoryBytes},
	}
	for _, r := range req.Requests {
		res := &agentpb.RequestResult{Id: r.Id}
		if err := a.apply(r, now, res); err != nil {
			res.Error = err.Error()
		}
		st.Results = append(st.Results, res)
	}
	n := 0
	for n < len(a.events) && a.events[n].Seq <= req.EventsAcked {
		n++
	}
	a.events = slices.Delete(a.events, 0, n)

	keys := slices.Sorted(maps.Keys(a.tasks))
	for _, k := range keys {
		t := a.tasks[k]
		st.Tasks = append(st.Tasks, proto.Clone(t.status).(*agentpb.TaskStatus))
		u := a.usage(t, now)
		st.Usage = append(st.Usage, u)
		if t.status.State == agentpb.TaskState_TASK_STATE_RUNNING {
			st.MachineUsage.TasksMemoryBytes += u.MemoryBytes
		}
		st.MachineUsage.TasksCpuCoreSecondsTotal += u.CpuCoreSecondsTotal
	}
	st.MachineUsage.MemoryAvailableBytes = a.cfg.Capacity.MemoryBytes - st.MachineUsage.TasksMemoryBytes
	st.Events = slices.Clone(a.events) // events are never changed once emitted
	st.LastEventSeq = a.nextSeq - 1
	return st, nil
}

func (a *Agent) apply(r *agentpb.Request, now time.Time, res *agentpb.RequestResult) error {
	switch k := r.Kind.(type) {
	case *agentpb.Request_Start:
		res.Task = k.Start.GetTask()
		return a.start(k.Start.GetTask(), k.Start.GetSpecVersion(), k.Start.GetSubmission(), k.Start.GetSpec(), now)
	case *agentpb.Request_Update:
		res.Task = k.Update.GetTask()
		if err := agent.ValidateTaskRef(res.Task); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		t := a.tasks[agent.TaskKey(res.Task)]
		if t == nil || ended(t.status.State) {
			return fmt.Errorf("update %s: the task does not run here; start it", agent.TaskKey(res.Task))
		}
		return a.start(res.Task, k.Update.GetSpecVersion(), t.status.Submission, k.Update.GetSpec(), now)
	case *agentpb.Request_Stop:
		res.Task = k.Stop.GetTask()
		if err := agent.ValidateTaskRef(res.Task); err != nil {
			return fmt.Errorf("stop: %w", err)
		}
		t := a.tasks[agent.TaskKey(res.Task)]
		if t == nil || ended(t.status.State) {
			return nil
		}
		reason := k.Stop.Reason
		if reason == "" {
			reason = "stopped"
		}
		a.emit(agentpb.EventKind_EVENT_KIND_KILLED, t, now, func(e *agentpb.AgentEvent) { e.Reason = reason; e.Signal = "SIGTERM" })
		a.end(t, now, agentpb.TaskState_TASK_STATE_KILLED, reason)
		t.status.Signal = "SIGTERM"
		return nil
	case *agentpb.Request_Forget:
		res.Task = k.Forget.GetTask()
		if err := agent.ValidateTaskRef(res.Task); err != nil {
			return fmt.Errorf("forget: %w", err)
		}
		key := agent.TaskKey(res.Task)
		if t := a.tasks[key]; t != nil && !ended(t.status.State) {
			return fmt.Errorf("forget %s: the task is live; stop it first", key)
		}
		delete(a.tasks, key)
		return nil
	}
	return fmt.Errorf("request %q: no kind set", r.Id)
}

func (a *Agent) start(ref *events.TaskRef, version, submission int64, spec *agentpb.TaskSpec, now time.Time) error {
	if err := agent.ValidateTaskRef(ref); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	key := agent.TaskKey(ref)
	if err := agent.ValidateTaskSpec(spec); err != nil {
		return fmt.Errorf("start %s: %w", key, err)
	}
	t := a.tasks[key]
	if t != nil && !ended(t.status.State) {
		resent, err := agent.PlanStart(key, agent.KillNone, t.status.SpecVersion, t.status.Submission, t.spec,
			&agentpb.StartTask{SpecVersion: version, Submission: submission, Spec: spec})
		if err != nil || resent {
			return err
		}
		// An update: a simulated process restarts instantly.
		t.status.SpecVersion, t.spec = version, spec
		t.status.Resources = spec.GetResources()
		t.status.Priority = spec.Priority
		return nil
	}
	a.nextPid++
	t = &simTask{spec: spec, startedAt: now, status: &agentpb.TaskStatus{
		Task: proto.Clone(ref).(*events.TaskRef), SpecVersion: version, Submission: submission, State: agentpb.TaskState_TASK_STATE_RUNNING,
		Pid: a.nextPid, Ports: spec.Ports, StartedAtUs: now.UnixMicro(), Priority: spec.Priority,
		Appclass: spec.Appclass, Resources: spec.GetResources(), Sandbox: "/sim/" + key,
	}}
	a.tasks[key] = t
	a.emit(agentpb.EventKind_EVENT_KIND_STARTED, t, now, nil)
	return nil
}

// advance finishes the tasks whose RunFor has passed.
func (a *Agent) advance(now time.Time) {
	if a.cfg.RunFor <= 0 {
		return
	}
	for _, t := range a.tasks {
		if t.status.State == agentpb.TaskState_TASK_STATE_RUNNING && now.Sub(t.startedAt) >= a.cfg.RunFor {
			a.exit(t, t.startedAt.Add(a.cfg.RunFor), 0)
		}
	}
}

// exit ends the current run by the lifecycle's rule (agent.AfterExit);
// a simulated process restarts without waiting its backoff.
func (a *Agent) exit(t *simTask, at time.Time, code int32) {
	next := agent.AfterExit(t.spec.GetRestart(), agent.Counts{Restarts: t.status.Restarts, Failures: t.status.Failures},
		agent.Exit{Known: true, Code: code, RanFor: at.Sub(t.startedAt)})
	t.status.ExitCode = code
	t.status.Failures = next.Counts.Failures
	a.emit(next.Event, t, at, func(e *agentpb.AgentEvent) {
		e.ExitCode, e.WillRestart, e.Reason, e.Message = code, next.WillRestart, next.Reason, next.Message
	})
	if !next.WillRestart {
		a.end(t, at, next.State, next.Reason)
		return
	}
	t.cpuBase += a.cpu(t, at)
	a.nextPid++
	t.status.Restarts++
	t.status.Pid = a.nextPid
	t.startedAt = at
	t.status.StartedAtUs = at.UnixMicro()
	a.emit(agentpb.EventKind_EVENT_KIND_STARTED, t, at, nil)
}

func (a *Agent) end(t *simTask, now time.Time, state agentpb.TaskState, reason string) {
	t.cpuBase += a.cpu(t, now)
	t.status.State, t.status.Reason, t.status.Pid = state, reason, 0
	t.status.FinishedAtUs = now.UnixMicro()
}

func (a *Agent) cpu(t *simTask, now time.Time) float64 {
	if t.status.State != agentpb.TaskState_TASK_STATE_RUNNING {
		return 0
	}
	return now.Sub(t.startedAt).Seconds() * float64(t.spec.GetResources().GetCpuMilli()) / 1000 * a.cfg.CPUFraction
}

func (a *Agent) usage(t *simTask, now time.Time) *agentpb.TaskUsageSample {
	mem := int64(0)
	if t.status.State == agentpb.TaskState_TASK_STATE_RUNNING {
		mem = int64(float64(t.spec.GetResources().GetMemoryBytes()) * a.cfg.MemoryFraction)
	}
	total := t.cpuBase + a.cpu(t, now)
	ref := t.status.Task
	return &agentpb.TaskUsageSample{
		Task: ref, SampledAtUs: now.UnixMicro(), CpuCoreSecondsTotal: total,
		MemoryBytes: mem, MemoryPeakBytes: mem,
		Window: &events.TaskUsage{User: ref.User, Job: ref.Job, Index: ref.Index, CpuCoreSeconds: total, MemoryBytes: mem, MemoryMaxBytes: mem},
	}
}

func (a *Agent) emit(kind agentpb.EventKind, t *simTask, at time.Time, fill func(*agentpb.AgentEvent)) {
	ev := &agentpb.AgentEvent{Seq: a.nextSeq, TimeUs: at.UnixMicro(), Kind: kind, Task: t.status.Task,
		SpecVersion: t.status.SpecVersion, Submission: t.status.Submission, Pid: t.status.Pid, Restarts: t.status.Restarts}
	if fill != nil {
		fill(ev)
	}
	a.nextSeq++
	a.events = append(a.events, ev)
}

func ended(s agentpb.TaskState) bool {
	return s == agentpb.TaskState_TASK_STATE_FINISHED || s == agentpb.TaskState_TASK_STATE_FAILED ||
		s == agentpb.TaskState_TASK_STATE_KILLED || s == agentpb.TaskState_TASK_STATE_EVICTED
}

// ---- fleets -------------------------------------------------------------------

// Fleet is many simulated agents served over gRPC on loopback.
type Fleet struct {
	Agents  []*Agent
	Addrs   []string // Addrs[i] polls Agents[i]
	servers []*grpc.Server
}

// NewFleet makes n simulated agents; cfg(i) describes the i-th (nil: named
// "sim-<i>" with default settings).
func NewFleet(n int, cfg func(i int) Config) (*Fleet, error) {
	f := &Fleet{}
	for i := 0; i < n; i++ {
		c := Config{Name: fmt.Sprintf("sim-%d", i)}
		if cfg != nil {
			c = cfg(i)
		}
		a, err := New(c)
		if err != nil {
			return nil, fmt.Errorf("agent %d: %w", i, err)
		}
		f.Agents = append(f.Agents, a)
	}
	return f, nil
}

// ServeEach gives every agent a gRPC server on its own 127.0.0.1 port.
func (f *Fleet) ServeEach() error {
	for _, a := range f.Agents {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.Close()
			return fmt.Errorf("agent %s: %w", a.Name(), err)
		}
		srv := grpc.NewServer()
		agentpb.RegisterAgentServer(srv, a)
		go srv.Serve(lis)
		f.servers = append(f.servers, srv)
		f.Addrs = append(f.Addrs, lis.Addr().String())
	}
	return nil
}

// ServeShared serves every agent behind one 127.0.0.1 port. Polls must name
// their machine (PollRequest.machine).
func (f *Fleet) ServeShared() error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	byName := map[string]*Agent{}
	for _, a := range f.Agents {
		byName[a.Name()] = a
	}
	srv := grpc.NewServer()
	agentpb.RegisterAgentServer(srv, &router{byName: byName})
	go srv.Serve(lis)
	f.servers = append(f.servers, srv)
	f.Addrs = f.Addrs[:0]
	for range f.Agents {
		f.Addrs = append(f.Addrs, lis.Addr().String())
	}
	return nil
}

type router struct {
	agentpb.UnimplementedAgentServer
	byName map[string]*Agent
}

func (r *router) Poll(ctx context.Context, req *agentpb.PollRequest) (*agentpb.AgentState, error) {
	a := r.byName[req.Machine]
	if a == nil {
		return nil, status.Errorf(codes.NotFound, "no simulated machine %q behind this address (PollRequest.machine must be set)", req.Machine)
	}
	return a.Poll(ctx, req)
}

// Close stops every server.
func (f *Fleet) Close() {
	for _, s := range f.servers {
		s.Stop()
	}
	f.servers = nil
}
