package cellsim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands/agentlink"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// The simulated Borglet follows agent/'s protocol and task lifecycle: a
// poll carries the master's requests and returns the full state and the
// events not yet acknowledged; tasks restart in place by their policy with
// a backoff; a stop goes through STOPPING; the state is saved before each
// poll's reply; a restarted agent adopts the processes still running with
// the pids it saved, reports the others lost, and kills whatever else runs
// on the machine. Processes are the world's, not the agent's: they outlive
// its crashes, and only a reboot of the machine ends them all.

// proc is one process on a machine: the ground truth the duplicate check
// reads.
type proc struct {
	pid     int64
	machine string
	task    string // agent.TaskKey
	boot    int
	alive   bool
	// Usage shape, drawn at launch.
	cpuFrac, memFrac float64
	// Its health check (when its spec has one) passes from healthyAfter
	// on, or never when sick (a bad version: the agent kills it).
	healthyAfter time.Duration
	sick         bool
}

type atask struct {
	ref            *events.TaskRef
	key            string
	version        int64
	submission     int64
	spec           *agentpb.TaskSpec
	state          agentpb.TaskState
	pid            int64
	restarts       int32
	failures       int32
	consecutive    int32
	exitCode       int32
	reason, msg    string
	adopted        bool
	startedAt      time.Time
	finishedAt     time.Time
	nextStartAt    time.Time
	killing        agent.KillKind
	stopReason     string
	pendingSpec    *agentpb.TaskSpec
	pendingVersion int64
	gen            int64 // moves at each launch and end: a stale restart timer finds another gen
}

// health is what the process's check says after it ran for ranFor.
func (p *proc) health(h *events.HealthCheck, ranFor time.Duration) (agentpb.Health, string) {
	switch {
	case h.GetPath() == "":
		return agentpb.Health_HEALTH_UNSPECIFIED, ""
	case p.sick && ranFor >= events.HealthCheckPeriod(h):
		return agentpb.Health_HEALTH_UNHEALTHY, "GET " + h.GetPath() + ": connection refused"
	case !p.sick && ranFor >= p.healthyAfter:
		return agentpb.Health_HEALTH_HEALTHY, ""
	}
	return agentpb.Health_HEALTH_UNKNOWN, ""
}

func (t *atask) clone() *atask {
	c := *t
	return &c
}

// saved is what the agent writes before each poll's reply: what its next
// incarnation starts from.
type saved struct {
	boot    int
	epoch   int64
	nextSeq uint64
	dropped uint64
	events  []*agentpb.AgentEvent
	tasks   []*atask
}

// Agent is one simulated machine and its agent.
type Agent struct {
	w        *World
	node     *node
	name     string
	capacity *events.Resources
	attrs    map[string]string // what it registers its machine with
	boot     int               // bumps at each reboot of the machine

	// The running agent's memory, lost when it crashes.
	tasks    map[string]*atask
	events   []*agentpb.AgentEvent
	nextSeq  uint64
	dropped  uint64
	epoch    int64
	lastPoll time.Time

	disk *saved // survives crashes and reboots

	// The harness's counts, over every incarnation: polls accepted, and
	// those from the holder of the current lease.
	polls, leaderPolls int64
	leaderPollTimes    []time.Time // of the latest leader polls
}

// maxEvents is small so that long partitions overflow the buffer and the
// link's fallback to the full state is exercised.
const maxEvents = 24

func (w *World) newAgent(name string, capacity *events.Resources, attrs map[string]string) *Agent {
	a := &Agent{w: w, node: &node{name: name}, name: name, capacity: capacity, attrs: attrs}
	a.reset()
	return a
}

func (a *Agent) reset() {
	a.tasks, a.events, a.nextSeq, a.dropped, a.epoch = map[string]*atask{}, nil, 1, 0, 0
	a.lastPoll = a.w.now
}

func (a *Agent) now() time.Time { return a.w.now }

// ---- polls ----------------------------------------------------------------

var errPollRefused = errors.New("agent refused the poll")

// poll answers one poll; counted is the harness's: whether the poll counts
// toward the reconciliation window (see checker).
func (a *Agent) poll(req *agentpb.PollRequest, counted bool) (*agentpb.AgentState, error) {
	if err := agent.AcceptPoll(a.name, a.epoch, req); err != nil {
		return nil, fmt.Errorf("%w: %v", errPollRefused, err)
	}
	a.epoch = req.Epoch
	a.polls++
	if le, ok := a.w.log.Lease(events.LeaderLease); ok && le.Epoch == req.Epoch && counted {
		a.leaderPolls++
		a.leaderPollTimes = append(a.leaderPollTimes, a.now())
		if len(a.leaderPollTimes) > 2*reconcilePolls {
			a.leaderPollTimes = slices.Delete(a.leaderPollTimes, 0, reconcilePolls)
		}
	}
	results := make([]*agentpb.RequestResult, 0, len(req.Requests))
	for _, r := range req.Requests {
		res := &agentpb.RequestResult{Id: r.Id}
		if err := a.apply(r); err != nil {
			res.Error = err.Error()
		}
		results = append(results, res)
	}
	n := 0
	for n < len(a.events) && a.events[n].Seq <= req.EventsAcked {
		n++
	}
	a.events = slices.Delete(a.events, 0, n)
	st := a.snapshot()
	st.Results = results
	a.save()
	if a.w.cfg.Trace != nil {
		var ts []string
		for _, t := range st.Tasks {
			ts = append(ts, fmt.Sprintf("%s=%s/%d", agent.TaskKey(t.Task), strings.TrimPrefix(t.State.String(), "TASK_STATE_"), t.Pid))
		}
		a.w.tracef("%s: answers a poll of epoch %d: %s; %d events up to %d", a.name, req.Epoch, strings.Join(ts, " "), len(st.Events), st.LastEventSeq)
	}
	return st, nil
}

func (a *Agent) snapshot() *agentpb.AgentState {
	now := a.now()
	st := &agentpb.AgentState{Machine: a.name, Incarnation: fmt.Sprintf("%s-%d-%d", a.name, a.boot, a.node.inc), TimeUs: now.UnixMicro(),
		Capacity: a.capacity, Epoch: a.epoch, LastEventSeq: a.nextSeq - 1, EventsDropped: a.dropped}
	for _, k := range slices.Sorted(maps.Keys(a.tasks)) {
		t := a.tasks[k]
		ts := &agentpb.TaskStatus{Task: t.ref, SpecVersion: t.version, Submission: t.submission, State: t.state, Pid: t.pid,
			ExitCode: t.exitCode, Restarts: t.restarts, Failures: t.failures, Reason: t.reason, Message: t.msg,
			StartedAtUs: t.startedAt.UnixMicro(), Priority: t.spec.GetPriority(), Resources: t.spec.GetResources(), Adopted: t.adopted}
		st.Tasks = append(st.Tasks, ts)
		if t.state != agentpb.TaskState_TASK_STATE_RUNNING {
			continue
		}
		p := a.w.procs[t.pid]
		if p == nil || !p.alive {
			continue
		}
		ts.Health, ts.HealthMessage = p.health(t.spec.GetHealthCheck(), now.Sub(t.startedAt))
		from := a.lastPoll
		if t.startedAt.After(from) {
			from = t.startedAt
		}
		secs := now.Sub(from).Seconds()
		if secs <= 0 {
			continue
		}
		lim := t.spec.GetResources()
		mem := int64(float64(lim.GetMemoryBytes()) * p.memFrac)
		st.Usage = append(st.Usage, &agentpb.TaskUsageSample{Task: t.ref, SampledAtUs: now.UnixMicro(), MemoryBytes: mem, MemoryPeakBytes: mem,
			Window:        &events.TaskUsage{User: t.ref.User, Job: t.ref.Job, Index: t.ref.Index, CpuCoreSeconds: secs * float64(lim.GetCpuMilli()) / 1000 * p.cpuFrac, MemoryBytes: mem, MemoryMaxBytes: mem},
			WindowStartUs: from.UnixMicro(), WindowEndUs: now.UnixMicro()})
	}
	st.Events = slices.Clone(a.events)
	a.lastPoll = now
	return st
}

func (a *Agent) save() {
	d := &saved{boot: a.boot, epoch: a.epoch, nextSeq: a.nextSeq, dropped: a.dropped, events: slices.Clone(a.events)}
	for _, k := range slices.Sorted(maps.Keys(a.tasks)) {
		d.tasks = append(d.tasks, a.tasks[k].clone())
	}
	a.disk = d
}

func (a *Agent) apply(r *agentpb.Request) error {
	switch k := r.Kind.(type) {
	case *agentpb.Request_Start:
		return a.start(k.Start)
	case *agentpb.Request_Update:
		return a.update(k.Update.GetTask(), k.Update.GetSpecVersion(), k.Update.GetSpec())
	case *agentpb.Request_Stop:
		return a.stop(k.Stop)
	case *agentpb.Request_Forget:
		key := agent.TaskKey(k.Forget.GetTask())
		t := a.tasks[key]
		if t == nil {
			return nil
		}
		if !agentlink.AgentTaskEnded(t.state) {
			return fmt.Errorf("forget %s: the task is live; stop it first", key)
		}
		delete(a.tasks, key)
		return nil
	}
	return fmt.Errorf("request %q: no kind set", r.Id)
}

func (a *Agent) start(r *agentpb.StartTask) error {
	key := agent.TaskKey(r.Task)
	if err := agent.ValidateTaskSpec(r.Spec); err != nil {
		return fmt.Errorf("start %s: %w", key, err)
	}
	if t := a.tasks[key]; t != nil && !agentlink.AgentTaskEnded(t.state) {
		resent, err := agent.PlanStart(key, t.killing, t.version, t.submission, t.spec, r)
		if err != nil || resent {
			return err
		}
		return a.update(r.Task, r.SpecVersion, r.Spec)
	}
	t := &atask{ref: proto.Clone(r.Task).(*events.TaskRef), key: key, version: r.SpecVersion, submission: r.Submission, spec: proto.Clone(r.Spec).(*agentpb.TaskSpec)}
	if old := a.tasks[key]; old != nil {
		t.gen = old.gen + 1
	}
	a.tasks[key] = t
	a.launch(t)
	return nil
}

func (a *Agent) update(ref *events.TaskRef, version int64, spec *agentpb.TaskSpec) error {
	key := agent.TaskKey(ref)
	t := a.tasks[key]
	if t == nil {
		return fmt.Errorf("update %s: the task does not run here; start it", key)
	}
	action, err := agent.PlanUpdate(key, t.state, t.killing, t.version, t.spec, version, spec)
	if err != nil || action == agent.UpdateNothing {
		return err
	}
	spec = proto.Clone(spec).(*agentpb.TaskSpec)
	switch action {
	case agent.UpdateInPlace:
		t.version, t.spec = version, spec
	case agent.UpdateRelaunch:
		t.version, t.spec = version, spec
		a.launch(t)
	case agent.UpdatePending:
		t.killing, t.pendingSpec, t.pendingVersion = agent.KillUpdate, spec, version
	case agent.UpdateRestart:
		t.pendingSpec, t.pendingVersion = spec, version
		a.terminate(t, agent.KillUpdate)
	}
	return nil
}

func (a *Agent) stop(r *agentpb.StopTask) error {
	t := a.tasks[agent.TaskKey(r.Task)]
	if t == nil || agentlink.AgentTaskEnded(t.state) {
		return nil
	}
	reason := r.Reason
	if reason == "" {
		reason = "stopped"
	}
	switch t.state {
	case agentpb.TaskState_TASK_STATE_BACKOFF:
		a.end(t, agentpb.TaskState_TASK_STATE_KILLED, reason, "")
		a.emit(agentpb.EventKind_EVENT_KIND_KILLED, t, func(e *agentpb.AgentEvent) { e.Reason = reason })
	case agentpb.TaskState_TASK_STATE_STOPPING:
		t.killing, t.stopReason, t.pendingSpec = agent.KillStop, reason, nil
	default:
		t.stopReason = reason
		a.terminate(t, agent.KillStop)
	}
	return nil
}

// terminate is SIGTERM: the process exits a little later (its grace).
func (a *Agent) terminate(t *atask, why agent.KillKind) {
	t.killing = why
	t.state = agentpb.TaskState_TASK_STATE_STOPPING
	p := a.w.procs[t.pid]
	if p == nil || !p.alive {
		return
	}
	a.w.at(nil, a.w.between(5*time.Millisecond, time.Second), func() { a.w.procExit(p, -1, false) })
}

// ---- the process lifecycle --------------------------------------------------

func (a *Agent) launch(t *atask) {
	t.gen++
	now := a.now()
	t.state = agentpb.TaskState_TASK_STATE_RUNNING
	t.nextStartAt = time.Time{}
	t.killing, t.stopReason, t.adopted = agent.KillNone, "", false
	t.startedAt = now
	t.reason, t.msg = "", ""
	t.pid = a.w.spawn(a, t)
	a.emit(agentpb.EventKind_EVENT_KIND_STARTED, t, nil)
}

// exited is the agent learning that t's process ended; known is false for
// an adopted process, whose exit status the agent cannot read.
func (a *Agent) exited(t *atask, code int32, oom, known bool) {
	a.settle(t, agent.Exit{Known: known, Code: code, OOM: oom && known, MemoryLimit: t.spec.GetResources().GetMemoryBytes(),
		RanFor: a.now().Sub(t.startedAt)})
}

// settle applies the lifecycle's rule (agent.AfterExit), as the agent's
// settle does.
func (a *Agent) settle(t *atask, e agent.Exit) {
	pid := t.pid
	t.pid = 0
	t.finishedAt = a.now()
	t.exitCode = e.Code
	e.Why, e.KillReason, e.KillMessage, e.PendingUpdate = t.killing, t.stopReason, t.msg, t.pendingSpec != nil
	t.killing = agent.KillNone
	next := agent.AfterExit(t.spec.GetRestart(), agent.Counts{Restarts: t.restarts, Failures: t.failures, Consecutive: t.consecutive}, e)
	if next.Relaunch {
		t.spec, t.version = t.pendingSpec, t.pendingVersion
		t.pendingSpec = nil
		a.launch(t)
		return
	}
	t.failures, t.consecutive = next.Counts.Failures, next.Counts.Consecutive
	if next.State == agentpb.TaskState_TASK_STATE_BACKOFF {
		t.state = next.State
		t.reason, t.msg = next.Reason, next.Message
		a.scheduleRestart(t, next.RestartIn)
	} else {
		a.end(t, next.State, next.Reason, next.Message)
	}
	a.emit(next.Event, t, func(ev *agentpb.AgentEvent) {
		ev.Pid, ev.ExitCode = pid, t.exitCode
		ev.Reason, ev.Message, ev.WillRestart = next.Reason, next.Message, next.WillRestart
	})
}

func (a *Agent) scheduleRestart(t *atask, delay time.Duration) {
	t.nextStartAt = a.now().Add(delay)
	key, gen := t.key, t.gen
	a.w.at(a.node, delay, func() {
		if t := a.tasks[key]; t != nil && t.gen == gen && t.state == agentpb.TaskState_TASK_STATE_BACKOFF {
			t.restarts++
			a.launch(t)
		}
	})
}

func (a *Agent) end(t *atask, state agentpb.TaskState, reason, msg string) {
	t.gen++
	t.state = state
	t.reason, t.msg = reason, msg
	t.nextStartAt = time.Time{}
	t.pendingSpec = nil
	if t.finishedAt.IsZero() {
		t.finishedAt = a.now()
	}
}

func (a *Agent) emit(kind agentpb.EventKind, t *atask, fill func(*agentpb.AgentEvent)) {
	ev := &agentpb.AgentEvent{Seq: a.nextSeq, TimeUs: a.now().UnixMicro(), Kind: kind, Task: t.ref,
		SpecVersion: t.version, Submission: t.submission, Pid: t.pid, Restarts: t.restarts}
	if fill != nil {
		fill(ev)
	}
	a.nextSeq++
	a.events = append(a.events, ev)
	if over := len(a.events) - maxEvents; over > 0 {
		a.events = slices.Delete(a.events, 0, over)
		a.dropped += uint64(over)
	}
}

// ---- crashes and restarts ---------------------------------------------------

// crash ends the agent process: its memory is gone, its tasks run on.
func (a *Agent) crash() {
	a.node.down = true
	a.node.inc++
	a.tasks, a.events = nil, nil
}

// reboot ends the machine's processes too; the agent comes back on a new
// boot, so no saved pid means anything.
func (a *Agent) reboot() {
	a.crash()
	a.boot++
	if a.w.rng.IntN(2) == 0 {
		// Comes back on a new kernel: the agent registers the change.
		a.attrs["kernel"] = fmt.Sprintf("6.%d", a.boot)
	}
	for _, p := range a.w.machineProcs(a.name) {
		a.w.kill(p)
	}
}

// restart starts a new agent on the saved state: processes still running
// with their saved pids are adopted, the others were lost while no agent
// watched, and anything else on the machine is killed.
func (a *Agent) restart() {
	a.node.down = false
	a.reset()
	d := a.disk
	keep := map[int64]bool{}
	if d != nil {
		a.epoch, a.nextSeq, a.dropped = d.epoch, max(d.nextSeq, 1), d.dropped
		a.events = slices.Clone(d.events)
		sameBoot := d.boot == a.boot
		for _, st := range d.tasks {
			t := st.clone()
			a.tasks[t.key] = t
			switch t.state {
			case agentpb.TaskState_TASK_STATE_STARTING, agentpb.TaskState_TASK_STATE_RUNNING, agentpb.TaskState_TASK_STATE_STOPPING:
				p := a.w.procs[t.pid]
				if !sameBoot || p == nil || !p.alive || p.machine != a.name {
					a.exitedUnwatched(t)
					continue
				}
				keep[t.pid] = true
				t.adopted = true
				t.state = agentpb.TaskState_TASK_STATE_RUNNING
				a.emit(agentpb.EventKind_EVENT_KIND_ADOPTED, t, nil)
				if t.killing != agent.KillNone {
					// The grace period ran while the agent was away.
					t.state = agentpb.TaskState_TASK_STATE_STOPPING
					a.w.at(nil, 0, func() { a.w.procExit(p, -1, false) })
				}
			case agentpb.TaskState_TASK_STATE_BACKOFF:
				a.scheduleRestart(t, max(t.nextStartAt.Sub(a.now()), 0))
			}
		}
	}
	// The sweep keeps only the adopted processes, as agent/persist.go's
	// restore does: a task relaunched above (its update's restart was in
	// flight when the agent died) loses its new process too, and the agent
	// sees its child killed.
	for _, p := range a.w.machineProcs(a.name) {
		if !keep[p.pid] {
			a.w.tracef("%s: restarted agent kills pid %d (%s), which no task of its saved state owns", a.name, p.pid, p.task)
			if t := a.tasks[p.task]; t != nil && t.pid == p.pid {
				a.w.SweptOwn++
			}
			a.w.procExit(p, -1, false)
		}
	}
	a.w.tracef("%s: agent restarted, adopted %d", a.name, len(keep))
	a.register()
}

// register records the machine with the leader, as agent.Run does at every
// start: through master.Registration, so a machine the cell does not know
// is registered and one whose hardware changed is updated. It tries the
// masters in turn until one that leads answers.
func (a *Agent) register() {
	inc := a.node.inc
	info := &agentpb.MachineInfo{Name: a.name, Address: a.name + ":7070", Capacity: a.capacity, Attributes: maps.Clone(a.attrs), PortFirst: 20000}
	m := a.w.masters[a.w.rng.IntN(len(a.w.masters))]
	a.w.call(a.node, m.node, 2*time.Second, func(respond func(any, error)) {
		if m.st == nil || !m.leading {
			respond(nil, m.notLeader())
			return
		}
		m.view(func(st *projections.State) {
			cmd := master.Registration(st, info, agentlink.Meta)
			if cmd == nil {
				respond(nil, nil)
				return
			}
			m.do(cmd, func(_ master.Result, err error) { respond(nil, err) })
		})
	}, func(_ any, err error) {
		if err != nil && a.node.inc == inc && !a.node.down {
			a.w.at(a.node, time.Second, a.register)
		}
	})
}

func (a *Agent) exitedUnwatched(t *atask) {
	a.settle(t, agent.Exit{Code: -1, Lost: errors.New("no process with its pid on this boot")})
}

// leaderPollAt is when the n-th poll by a current leader was answered (the
// far future when it has not happened or is too old to be remembered).
func (a *Agent) leaderPollAt(n int64) time.Time {
	i := len(a.leaderPollTimes) - 1 - int(a.leaderPolls-n)
	if n > a.leaderPolls || i < 0 {
		return a.now().Add(time.Hour)
	}
	return a.leaderPollTimes[i]
}
