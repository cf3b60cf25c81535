package master

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// LinkConfig tunes the link: the part of the leader that polls agents.
type LinkConfig struct {
	Cell string
	// Interval between polls of a machine (default 2 s, as Borg's "every few
	// seconds"). A machine whose placements changed is polled at once.
	Interval time.Duration
	// MissedPolls in a row mark a machine down and its tasks lost (default 3).
	MissedPolls int
	// Concurrency bounds the polls in flight (default 64).
	Concurrency int
	// UsageWindow is how often a machine's usage becomes an event
	// (default 5 minutes, the Google trace's task_usage window).
	UsageWindow time.Duration
	// StopGrace is the SIGTERM-to-SIGKILL grace given to stopped tasks.
	StopGrace time.Duration
	// Dial connects to an agent; default agent.Dial (plaintext).
	Dial func(addr string) (*agent.Client, error)
	// Stats, when set, receives poll timings (benchmarks, metrics).
	Stats *LinkStats
}

// LinkStats records what the link did.
type LinkStats struct {
	mu        sync.Mutex
	Intervals []time.Duration // between consecutive successful polls of a machine
	Polls     atomic.Int64
	Failures  atomic.Int64
}

func (s *LinkStats) interval(d time.Duration) {
	s.mu.Lock()
	s.Intervals = append(s.Intervals, d)
	s.mu.Unlock()
}

// Snapshot returns the intervals recorded so far.
func (s *LinkStats) Snapshot() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.Intervals...)
}

// link keeps what the master knows of each agent beyond the projection:
// its connection, its last report, missed polls, acknowledged events and the
// usage accumulated toward the next window.
type link struct {
	cfg LinkConfig
	m   *Master
	mu  sync.Mutex
	by  map[string]*machineLink
}

type machineLink struct {
	mu          sync.Mutex // one poll at a time
	name        string
	address     string
	client      *agent.Client
	version     int64 // the machine version last acted on
	last        *agentpb.AgentState
	lastOK      time.Time
	misses      int
	acked       uint64
	reqSeq      int64
	usage       map[projections.TaskKey]*usageAcc
	windowStart time.Time
}

type usageAcc struct {
	cpu, memByteSecs float64
	seconds          float64
	memMax, disk     int64
	startUS, endUS   int64
}

// Link returns the leader's agent link, for Config.OnLeading.
func Link(cfg LinkConfig) func(ctx context.Context, m *Master) {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.MissedPolls <= 0 {
		cfg.MissedPolls = 3
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.UsageWindow <= 0 {
		cfg.UsageWindow = 5 * time.Minute
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.Dial == nil {
		cfg.Dial = func(addr string) (*agent.Client, error) { return agent.Dial(addr) }
	}
	return func(ctx context.Context, m *Master) {
		l := &link{cfg: cfg, m: m, by: map[string]*machineLink{}}
		defer l.close()
		l.run(ctx)
	}
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ml := range l.by {
		if ml.client != nil {
			ml.client.Close()
		}
	}
}

type machineInfo struct {
	name, address string
	version       int64
	down          bool
}

func (l *link) run(ctx context.Context) {
	sem := make(chan struct{}, l.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(l.cfg.Interval / 4)
	defer tick.Stop()
	for {
		woken := l.m.applied.Wait()
		var machines []machineInfo
		l.m.View(func(s *projections.State) {
			for _, m := range s.Machines {
				machines = append(machines, machineInfo{m.Name, m.Address, m.Version, m.State == projections.MachineDown})
			}
		})
		now := time.Now()
		for _, mi := range machines {
			ml := l.machine(mi)
			ml.mu.Lock()
			due := now.Sub(ml.lastOK) >= l.cfg.Interval || (ml.version != mi.version && !mi.down)
			ml.mu.Unlock()
			if !due {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func(ml *machineLink, mi machineInfo) {
				defer wg.Done()
				defer func() { <-sem }()
				l.poll(ctx, ml, mi)
			}(ml, mi)
		}
		select {
		case <-ctx.Done():
			return
		case <-woken:
			// Placements arrived: poll their machines now, but let a burst
			// of events settle first.
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		case <-tick.C:
		}
	}
}

func (l *link) machine(mi machineInfo) *machineLink {
	l.mu.Lock()
	defer l.mu.Unlock()
	ml := l.by[mi.name]
	if ml == nil {
		ml = &machineLink{name: mi.name, usage: map[projections.TaskKey]*usageAcc{}, windowStart: time.Now()}
		l.by[mi.name] = ml
	}
	if ml.address != mi.address && ml.mu.TryLock() {
		if ml.client != nil {
			ml.client.Close()
			ml.client = nil
		}
		ml.address = mi.address
		ml.mu.Unlock()
	}
	return ml
}

// poll sends a machine its outstanding requests and records its report.
func (l *link) poll(ctx context.Context, ml *machineLink, mi machineInfo) {
	if !ml.mu.TryLock() {
		return // a poll of this machine is in flight
	}
	defer ml.mu.Unlock()
	if ml.client == nil {
		c, err := l.cfg.Dial(ml.address)
		if err != nil {
			l.m.log.Warn("dialing agent", "machine", ml.name, "err", err)
			return
		}
		ml.client = c
	}
	var reqs []*agentpb.Request
	if ml.last != nil {
		reqs = l.requests(ml, mi.name)
	}
	st, err := l.send(ctx, ml, reqs)
	if err == nil && ml.last == nil {
		// First contact: now that the agent's state is known, send what it
		// lacks right away.
		ml.last = st
		if reqs = l.requests(ml, mi.name); len(reqs) > 0 {
			st, err = l.send(ctx, ml, reqs)
		}
	}
	admin := commands.Meta{Actor: commands.Actor{User: "link", Admin: true}}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if l.cfg.Stats != nil {
			l.cfg.Stats.Failures.Add(1)
		}
		ml.misses++
		if ml.misses == l.cfg.MissedPolls && !mi.down {
			l.m.log.Warn("machine missed its polls", "machine", ml.name, "missed", ml.misses, "err", err)
			if _, derr := l.m.Do(ctx, commands.ReportAgentState{Meta: admin, Machine: ml.name, Unreachable: true, MissedPolls: int32(ml.misses)}); derr != nil && ctx.Err() == nil {
				l.m.log.Warn("marking machine down", "machine", ml.name, "err", derr)
			}
			ml.last = nil
		}
		if ml.misses >= l.cfg.MissedPolls {
			ml.lastOK = time.Now() // keep trying at the normal interval
		}
		return
	}
	now := time.Now()
	if l.cfg.Stats != nil {
		l.cfg.Stats.Polls.Add(1)
		if !ml.lastOK.IsZero() && ml.misses == 0 {
			l.cfg.Stats.interval(now.Sub(ml.lastOK))
		}
	}
	ml.misses, ml.lastOK, ml.last, ml.version = 0, now, st, mi.version
	report := commands.ReportAgentState{Meta: admin, Machine: ml.name}
	for _, t := range st.Tasks {
		report.Tasks = append(report.Tasks, commands.AgentTask{
			Task:        projections.TaskKey{User: t.Task.GetUser(), Job: t.Task.GetJob(), Index: t.Task.GetIndex()},
			SpecVersion: t.SpecVersion, State: commands.AgentTaskState(t.State), Pid: t.Pid, ExitCode: t.ExitCode,
			Signal: t.Signal, Restarts: t.Restarts, Reason: t.Reason, Message: t.Message,
		})
	}
	l.accumulate(ml, st)
	if now.Sub(ml.windowStart) >= l.cfg.UsageWindow {
		if w := l.window(ml); len(w.Tasks) > 0 {
			report.Usage = append(report.Usage, w)
		}
		ml.windowStart = now
	}
	if _, err := l.m.Do(ctx, report); err != nil {
		if ctx.Err() == nil {
			l.m.log.Warn("recording an agent's report", "machine", ml.name, "err", err)
		}
		return
	}
	ml.acked = st.LastEventSeq
}

func (l *link) send(ctx context.Context, ml *machineLink, reqs []*agentpb.Request) (*agentpb.AgentState, error) {
	pctx, cancel := context.WithTimeout(ctx, l.cfg.Interval)
	defer cancel()
	st, err := ml.client.Poll(pctx, &agentpb.PollRequest{MasterId: l.m.Name(), Epoch: l.m.Epoch(), Cell: l.cfg.Cell,
		Requests: reqs, EventsAcked: ml.acked, Machine: ml.name})
	if status.Code(err) == codes.FailedPrecondition {
		return nil, fmt.Errorf("agent %s refused the poll: %w", ml.name, err)
	}
	return st, err
}

// requests compares what the projection places on the machine with what the
// agent last reported, and returns the starts, updates and stops that make
// the agent match. A task placed elsewhere meanwhile (the machine was down)
// is stopped, so a task never runs twice.
func (l *link) requests(ml *machineLink, machine string) []*agentpb.Request {
	reported := map[projections.TaskKey]*agentpb.TaskStatus{}
	for _, t := range ml.last.GetTasks() {
		reported[projections.TaskKey{User: t.Task.GetUser(), Job: t.Task.GetJob(), Index: t.Task.GetIndex()}] = t
	}
	id := func() string { ml.reqSeq++; return ml.name + "-" + strconv.FormatInt(ml.reqSeq, 10) }
	var reqs []*agentpb.Request
	grace := l.cfg.StopGrace.Milliseconds()
	l.m.View(func(s *projections.State) {
		m := s.Machines[machine]
		if m == nil {
			return
		}
		wanted := map[projections.TaskKey]bool{}
		for _, t := range m.Tasks() {
			k := t.Key()
			wanted[k] = true
			ref := &events.TaskRef{User: k.User, Job: k.Job, Index: k.Index}
			rep := reported[k]
			switch {
			case rep == nil:
				if t.State == projections.TaskScheduled {
					reqs = append(reqs, agent.StartRequest(id(), ref, t.SpecVersion, TaskSpec(t)))
				}
			case rep.SpecVersion < t.SpecVersion && isLive(rep.State):
				reqs = append(reqs, agent.UpdateRequest(id(), ref, t.SpecVersion, TaskSpec(t)))
			}
		}
		for k, rep := range reported {
			if wanted[k] {
				continue
			}
			ref := &events.TaskRef{User: k.User, Job: k.Job, Index: k.Index}
			if isLive(rep.State) {
				reqs = append(reqs, agent.StopRequest(id(), ref, "not placed on "+machine+" by the master", grace))
			} else if rep.State != agentpb.TaskState_TASK_STATE_STOPPING {
				reqs = append(reqs, agent.ForgetRequest(id(), ref))
			}
		}
	})
	return reqs
}

func isLive(s agentpb.TaskState) bool {
	switch s {
	case agentpb.TaskState_TASK_STATE_STARTING, agentpb.TaskState_TASK_STATE_RUNNING, agentpb.TaskState_TASK_STATE_BACKOFF:
		return true
	}
	return false
}

// TaskSpec resolves what the agent needs to run one task: the job's spec of
// the task's version with the task's overrides, and its ports.
func TaskSpec(t *projections.Task) *agentpb.TaskSpec {
	sp := t.Spec()
	out := &agentpb.TaskSpec{Command: sp.GetCommand(), Args: sp.GetArgs(), Env: maps.Clone(sp.GetEnv()),
		Resources: t.Limit.Proto(), Restart: sp.GetRestart(), HealthCheck: sp.GetHealthCheck(),
		Appclass: sp.GetAppclass(), Priority: sp.GetPriority()}
	if out.Env == nil {
		out.Env = map[string]string{}
	}
	if ov := sp.GetOverrides()[t.Index]; ov != nil {
		if len(ov.Args) > 0 {
			out.Args = ov.Args
		}
		maps.Copy(out.Env, ov.Env)
	}
	names := sp.GetPortNames()
	for i, p := range t.Ports {
		name := ""
		if i < len(names) {
			name = names[i]
		}
		out.Ports = append(out.Ports, &agentpb.Port{Name: name, Number: p})
	}
	return out
}

// accumulate adds a poll's usage samples to the machine's open window.
func (l *link) accumulate(ml *machineLink, st *agentpb.AgentState) {
	for _, u := range st.Usage {
		ref := projections.TaskKey{User: u.Task.GetUser(), Job: u.Task.GetJob(), Index: u.Task.GetIndex()}
		acc := ml.usage[ref]
		if acc == nil {
			acc = &usageAcc{}
			ml.usage[ref] = acc
		}
		w := u.Window
		if w == nil || u.WindowEndUs <= u.WindowStartUs {
			continue
		}
		secs := float64(u.WindowEndUs-u.WindowStartUs) / 1e6
		if acc.startUS == 0 || u.WindowStartUs < acc.startUS {
			acc.startUS = u.WindowStartUs
		}
		if u.WindowEndUs > acc.endUS {
			acc.endUS = u.WindowEndUs
		}
		acc.cpu += w.CpuCoreSeconds
		acc.memByteSecs += float64(w.MemoryBytes) * secs
		acc.seconds += secs
		acc.memMax = max(acc.memMax, w.MemoryMaxBytes, u.MemoryPeakBytes)
		acc.disk = u.DiskBytes
	}
}

// window closes the machine's usage window into one UsageWindow.
func (l *link) window(ml *machineLink) commands.UsageWindow {
	var w commands.UsageWindow
	for ref, acc := range ml.usage {
		if acc.seconds <= 0 {
			continue
		}
		if w.StartUS == 0 || acc.startUS < w.StartUS {
			w.StartUS = acc.startUS
		}
		w.EndUS = max(w.EndUS, acc.endUS)
		w.Tasks = append(w.Tasks, &events.TaskUsage{User: ref.User, Job: ref.Job, Index: ref.Index,
			CpuCoreSeconds: acc.cpu, MemoryBytes: int64(acc.memByteSecs / acc.seconds), MemoryMaxBytes: acc.memMax, DiskBytes: acc.disk})
	}
	ml.usage = map[projections.TaskKey]*usageAcc{}
	return w
}

// AgentRegistry serves agentpb's Master service: agents register their
// machines with the leader.
type AgentRegistry struct {
	agentpb.UnimplementedMasterServer
	m            *Master
	cell         string
	pollInterval time.Duration
}

// NewAgentRegistry returns the registration service of m.
func NewAgentRegistry(m *Master, cell string, pollInterval time.Duration) *AgentRegistry {
	if pollInterval <= 0 {
		pollInterval = 2 * time.Second
	}
	return &AgentRegistry{m: m, cell: cell, pollInterval: pollInterval}
}

// Attach adds the service to a gRPC server.
func (r *AgentRegistry) Attach(g *grpc.Server) { agentpb.RegisterMasterServer(g, r) }

// Register records a machine (or its changes) in the log.
func (r *AgentRegistry) Register(ctx context.Context, info *agentpb.MachineInfo) (*agentpb.RegisterReply, error) {
	admin := commands.Meta{Actor: commands.Actor{User: "link", Admin: true}}
	caps := projections.ResourcesOf(info.Capacity)
	var known, same bool
	r.m.View(func(s *projections.State) {
		if m := s.Machines[info.Name]; m != nil {
			known = true
			same = m.Address == info.Address && m.Capacity == caps && maps.Equal(m.Attributes, info.Attributes) && m.PortBase == info.PortFirst
		}
	})
	var err error
	switch {
	case !known:
		_, err = r.m.Do(ctx, commands.RegisterMachine{Meta: admin, Machine: info.Name, Address: info.Address, Capacity: caps, Attributes: info.Attributes, PortBase: info.PortFirst})
	case !same:
		_, err = r.m.Do(ctx, commands.UpdateMachine{Meta: admin, Machine: info.Name, Address: info.Address, Capacity: caps, Attributes: info.Attributes, PortBase: info.PortFirst})
	}
	if err != nil {
		return nil, Status(ctx, err)
	}
	return &agentpb.RegisterReply{Cell: r.cell, MasterId: r.m.Name(), Epoch: r.m.Epoch(), PollIntervalMs: r.pollInterval.Milliseconds()}, nil
}
