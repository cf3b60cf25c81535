package agent

import (
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/events"
	"google.golang.org/protobuf/proto"
)

// Reasons reported in TaskStatus.reason and AgentEvent.reason.
const (
	ReasonExited        = "exited"
	ReasonSignaled      = "signaled"
	ReasonStartFailed   = "start-failed"
	ReasonHealth        = "health"
	ReasonOOM           = "oom"
	ReasonOvercommitted = "overcommitted"
	ReasonLost          = "lost" // the process ended while no agent watched it
	ReasonUnknownExit   = "exit-unknown"
)

// task is the agent's record of one task. Every field is guarded by the
// agent's mu.
type task struct {
	ref     *events.TaskRef
	key     string
	version int64
	// submission is the StartTask's: which submission of the task this
	// run serves (0: not said).
	submission int64
	spec       *agentpb.TaskSpec
	sandbox    string
	uid        uint32 // of Config.TaskUIDs; 0 when tasks run as the agent's user or TaskUser
	state      agentpb.TaskState

	gen       int64 // incarnation: one per process started; names its container
	container string
	proc      process
	pid       int
	ticks     uint64 // the process's start time, to know it again after a restart
	adopted   bool

	startedAt, finishedAt, nextStartAt time.Time
	exitCode                           int32
	signal                             string
	restarts, failures, oomKills       int32
	consecutive                        int32 // failures in a row, for backoff
	reason, message                    string

	health         agentpb.Health
	healthFailures int32
	healthMessage  string // the last failed check's error, while unhealthy

	killing        KillKind
	stopReason     string
	pendingSpec    *agentpb.TaskSpec // started once the current process is gone
	pendingVersion int64

	timer       Timer // backoff restart, or SIGKILL at the end of a grace period
	healthTimer Timer
	u           usage
}

func (t *task) stopTimers() {
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if t.healthTimer != nil {
		t.healthTimer.Stop()
		t.healthTimer = nil
	}
}

// Ended: the task ended (finished, failed, killed or evicted); the agent
// keeps its record until the master has it and says forget.
func Ended(s agentpb.TaskState) bool {
	switch s {
	case agentpb.TaskState_TASK_STATE_FINISHED, agentpb.TaskState_TASK_STATE_FAILED,
		agentpb.TaskState_TASK_STATE_KILLED, agentpb.TaskState_TASK_STATE_EVICTED:
		return true
	}
	return false
}

func appclass(s *agentpb.TaskSpec) string {
	if s.Appclass != "" {
		return s.Appclass
	}
	// Prod work is served to users; everything else can wait for a CPU.
	if s.Priority >= ProdPriority {
		return "latency-sensitive"
	}
	return "batch"
}

// limitsFor turns a spec into container settings. The CPU limit is a hard
// quota for every task; shares decide who runs first when CPUs are
// contended, and batch tasks get a tenth of what latency-sensitive ones of
// the same size get (Borg §6.2).
func limitsFor(s *agentpb.TaskSpec) cgroup.Limits {
	r := orEmpty(s.Resources)
	shares := uint64(max(r.CpuMilli, 0)) * 1024 / 1000
	if appclass(s) == "batch" {
		shares /= 10
	}
	return cgroup.Limits{
		MemoryBytes:   r.MemoryBytes,
		CPUShares:     min(max(shares, 2), 262144),
		CPUQuotaMilli: r.CpuMilli,
	}
}

func (a *Agent) sandboxOf(ref *events.TaskRef) string {
	return filepath.Join(a.cfg.DataDir, "tasks", ref.User, ref.Job, strconv.Itoa(int(ref.Index)))
}

func containerName(ref *events.TaskRef, gen int64) string {
	return fmt.Sprintf("%s.%s.%d.%d", ref.User, ref.Job, ref.Index, gen)
}

// ---- requests (a.mu held) ----------------------------------------------------

func (a *Agent) startTask(r *agentpb.StartTask) error {
	if err := ValidateTaskRef(r.GetTask()); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	key := TaskKey(r.Task)
	if err := ValidateTaskSpec(r.Spec); err != nil {
		return fmt.Errorf("start %s: %w", key, err)
	}
	if t := a.tasks[key]; t != nil && !Ended(t.state) {
		resent, err := PlanStart(key, t.killing, t.version, t.submission, t.spec, r)
		if err != nil || resent {
			return err
		}
		return a.updateTask(r.Task, r.SpecVersion, r.Spec)
	} else if t != nil {
		t.stopTimers()
	}
	prev := a.tasks[key]
	t := &task{
		ref:        proto.Clone(r.Task).(*events.TaskRef),
		key:        key,
		version:    r.SpecVersion,
		submission: r.Submission,
		spec:       proto.Clone(r.Spec).(*agentpb.TaskSpec),
		sandbox:    a.sandboxOf(r.Task),
		health:     agentpb.Health_HEALTH_UNSPECIFIED,
	}
	if err := a.assignUID(t, prev); err != nil {
		return fmt.Errorf("start %s: %w", key, err)
	}
	a.tasks[key] = t
	a.launch(t)
	return nil
}

func (a *Agent) stopTask(r *agentpb.StopTask) error {
	if err := ValidateTaskRef(r.GetTask()); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if r.GracePeriodMs < 0 {
		return fmt.Errorf("stop %s: grace_period_ms %d: must not be negative", TaskKey(r.Task), r.GracePeriodMs)
	}
	t := a.tasks[TaskKey(r.Task)]
	if t == nil || Ended(t.state) {
		return nil // nothing runs: the master's wish holds already
	}
	reason := r.Reason
	if reason == "" {
		reason = "stopped"
	}
	grace := killTimeout(t.spec, time.Duration(r.GracePeriodMs)*time.Millisecond, a.cfg.DefaultGrace)
	switch t.state {
	case agentpb.TaskState_TASK_STATE_BACKOFF:
		a.end(t, agentpb.TaskState_TASK_STATE_KILLED, reason, "")
		a.emit(agentpb.EventKind_EVENT_KIND_KILLED, t, func(e *agentpb.AgentEvent) { e.Reason = reason })
	case agentpb.TaskState_TASK_STATE_STOPPING:
		// Already going: the stop decides what the exit means.
		t.killing, t.stopReason, t.pendingSpec = KillStop, reason, nil
		a.markDirty()
	default:
		t.stopReason = reason
		a.terminate(t, KillStop, grace, reason)
	}
	return nil
}

// updateTask changes a live task's spec: in place when only limits,
// priority, restart policy or health check change, by restarting otherwise.
func (a *Agent) updateTask(ref *events.TaskRef, version int64, spec *agentpb.TaskSpec) error {
	if err := ValidateTaskRef(ref); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	key := TaskKey(ref)
	if err := ValidateTaskSpec(spec); err != nil {
		return fmt.Errorf("update %s: %w", key, err)
	}
	t := a.tasks[key]
	if t == nil {
		return fmt.Errorf("update %s: the task does not run here; start it", key)
	}
	action, err := PlanUpdate(key, t.state, t.killing, t.version, t.spec, version, spec)
	if err != nil || action == UpdateNothing {
		return err
	}
	spec = proto.Clone(spec).(*agentpb.TaskSpec)
	switch action {
	case UpdateInPlace:
		t.version, t.spec = version, spec
		if t.proc != nil {
			if err := t.proc.update(limitsFor(spec)); err != nil {
				return fmt.Errorf("update %s: limits: %w", key, err)
			}
			if t.healthTimer != nil {
				t.healthTimer.Stop()
				t.healthTimer = nil
			}
			a.armHealth(t)
		}
		a.markDirty()
	case UpdateRelaunch:
		t.stopTimers()
		t.version, t.spec = version, spec
		a.launch(t)
	case UpdatePending:
		t.killing, t.pendingSpec, t.pendingVersion = KillUpdate, spec, version
		a.markDirty()
	case UpdateRestart:
		t.pendingSpec, t.pendingVersion = spec, version
		a.terminate(t, KillUpdate, killTimeout(t.spec, 0, a.cfg.DefaultGrace), "update")
	}
	return nil
}

// killTimeout is how long a stopped task has between SIGTERM and SIGKILL:
// its spec's kill_timeout, else the stop's grace period (asked), else def.
// The job's own word wins: it knows how long its process needs to drain.
func killTimeout(spec *agentpb.TaskSpec, asked, def time.Duration) time.Duration {
	switch {
	case spec.GetKillTimeoutMs() > 0:
		return time.Duration(spec.GetKillTimeoutMs()) * time.Millisecond
	case asked > 0:
		return asked
	}
	return def
}

func (a *Agent) forgetTask(r *agentpb.ForgetTask) error {
	if err := ValidateTaskRef(r.GetTask()); err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	key := TaskKey(r.Task)
	t := a.tasks[key]
	if t == nil {
		return nil
	}
	if !Ended(t.state) {
		return fmt.Errorf("forget %s: the task is %s; stop it first", key, stateName(t.state))
	}
	t.stopTimers()
	delete(a.tasks, key)
	a.retire(t)
	a.markDirty()
	return nil
}

func stateName(s agentpb.TaskState) string {
	return map[agentpb.TaskState]string{
		agentpb.TaskState_TASK_STATE_STARTING: "starting",
		agentpb.TaskState_TASK_STATE_RUNNING:  "running",
		agentpb.TaskState_TASK_STATE_BACKOFF:  "waiting to restart",
		agentpb.TaskState_TASK_STATE_STOPPING: "stopping",
		agentpb.TaskState_TASK_STATE_FINISHED: "finished",
		agentpb.TaskState_TASK_STATE_FAILED:   "failed",
		agentpb.TaskState_TASK_STATE_KILLED:   "killed",
		agentpb.TaskState_TASK_STATE_EVICTED:  "evicted",
	}[s]
}

// ---- the process lifecycle (a.mu held) --------------------------------------

// launch starts a new process for t. A failure to start is handled like a
// failed run.
func (a *Agent) launch(t *task) {
	t.gen++
	t.container = containerName(t.ref, t.gen)
	t.state = agentpb.TaskState_TASK_STATE_STARTING
	t.nextStartAt = time.Time{}
	t.killing, t.stopReason = KillNone, ""
	t.adopted = false
	t.startedAt = a.clock.Now()
	p, err := a.startProcess(t)
	if err != nil {
		a.exited(t, exitStatus{known: true, code: -1}, nil, err)
		return
	}
	t.proc, t.pid, t.ticks = p, p.pid(), p.startTicks()
	t.state = agentpb.TaskState_TASK_STATE_RUNNING
	t.reason, t.message = "", ""
	// A new process has passed no check yet, whatever the one it replaces
	// had (a release relaunched in place must not inherit "healthy").
	t.health, t.healthFailures, t.healthMessage = agentpb.Health_HEALTH_UNSPECIFIED, 0, ""
	t.u.begin(t.startedAt)
	a.emit(agentpb.EventKind_EVENT_KIND_STARTED, t, nil)
	a.watch(t)
	a.armHealth(t)
}

func (a *Agent) startProcess(t *task) (process, error) {
	work := filepath.Join(t.sandbox, "work")
	logs := filepath.Join(t.sandbox, "logs")
	if err := a.prepareSandbox(t); err != nil {
		return nil, err
	}
	markRun(t.sandbox, t.restarts+1, t.startedAt)
	env := taskEnv(t.ref, a.cell, t.spec, t.sandbox)
	path, err := lookPath(t.spec.Command, env, work)
	if err != nil {
		return nil, err
	}
	return a.rt.start(launchSpec{
		container: t.container,
		path:      path,
		args:      t.spec.Args,
		env:       env,
		dir:       work,
		stdout:    filepath.Join(logs, "stdout"),
		stderr:    filepath.Join(logs, "stderr"),
		limits:    limitsFor(t.spec),
		cred:      a.credOf(t),
	})
}

// watch waits for t's process to end, off the lock.
func (a *Agent) watch(t *task) {
	p, key, gen := t.proc, t.key, t.gen
	go func() {
		select {
		case <-p.done():
		case <-a.closing:
			return // a restarted agent will adopt the process
		}
		st := p.exit()
		// The container outlives the process: its counters say whether the
		// kernel killed it for memory.
		fin, err := p.stats()
		finp := &fin
		if err != nil {
			finp = nil
		}
		a.mu.Lock()
		if t := a.tasks[key]; !a.closed && t != nil && t.gen == gen && t.proc == p {
			a.exited(t, st, finp, nil)
		}
		a.mu.Unlock()
		if err := p.release(); err != nil {
			a.taskLog(key).Warn("removing task container", "err", err)
		}
	}()
}

// terminate asks t's process to end: SIGTERM, then SIGKILL after grace.
func (a *Agent) terminate(t *task, why KillKind, grace time.Duration, reason string) {
	if t.proc == nil {
		return
	}
	t.killing = why
	t.state = agentpb.TaskState_TASK_STATE_STOPPING
	t.reason = reason
	if t.healthTimer != nil {
		t.healthTimer.Stop()
		t.healthTimer = nil
	}
	if err := t.proc.signal(syscall.SIGTERM); err != nil {
		a.taskLog(t.key).Warn("SIGTERM", "err", err)
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	key, gen := t.key, t.gen
	t.timer = a.clock.AfterFunc(grace, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if t := a.tasks[key]; !a.closed && t != nil && t.gen == gen && t.proc != nil &&
			t.state == agentpb.TaskState_TASK_STATE_STOPPING {
			_ = t.proc.signal(syscall.SIGKILL)
		}
	})
	a.markDirty()
}

// killNow ends t's process with SIGKILL at once: memory cannot wait.
func (a *Agent) killNow(t *task, why KillKind, reason, msg string) {
	if t.proc == nil {
		return
	}
	if t.killing == KillStop {
		// The master asked for the end already: hasten it, and it is still
		// reported as the stop it asked for.
		_ = t.proc.signal(syscall.SIGKILL)
		return
	}
	t.killing = why
	t.state = agentpb.TaskState_TASK_STATE_STOPPING
	t.reason, t.message = reason, msg
	if t.healthTimer != nil {
		t.healthTimer.Stop()
		t.healthTimer = nil
	}
	_ = t.proc.signal(syscall.SIGKILL)
	a.markDirty()
}

// exited decides what an ended process means for t. fin holds the
// container's last counters when known; startErr is set when no process
// could be started.
func (a *Agent) exited(t *task, st exitStatus, fin *cgroup.Stats, startErr error) {
	now := a.clock.Now()
	t.u.finish(now, fin)
	limit := orEmpty(t.spec.Resources).MemoryBytes
	oom := t.killing == KillOOM || (fin != nil && (fin.OOMKills > 0 ||
		// The kernel counts OOM kills since 4.13; before, a SIGKILL with the
		// cgroup at its limit is the sign.
		(st.signal == syscall.SIGKILL && limit > 0 && fin.LimitHits > 0 && fin.MemoryPeakBytes >= limit-limit/20)))
	a.settle(t, Exit{StartErr: startErr, Known: st.known, Code: int32(st.code), Signal: st.signalName(),
		OOM: oom, MemoryLimit: limit, RanFor: now.Sub(t.startedAt)})
}

// settle ends the record of t's process and applies the lifecycle's rule
// (AfterExit) to what its exit means: a relaunch for an update, a restart
// in place after a backoff, or an end; then reports it.
func (a *Agent) settle(t *task, e Exit) {
	t.stopTimers()
	pid := t.pid
	t.proc, t.pid, t.ticks = nil, 0, 0
	t.finishedAt = a.clock.Now()
	t.exitCode, t.signal = e.Code, e.Signal
	e.Why, e.KillReason, e.KillMessage, e.PendingUpdate = t.killing, t.stopReason, t.message, t.pendingSpec != nil
	t.killing = KillNone
	next := AfterExit(t.spec.Restart, Counts{Restarts: t.restarts, Failures: t.failures, OOMKills: t.oomKills, Consecutive: t.consecutive}, e)
	if next.Relaunch {
		t.spec, t.version = t.pendingSpec, t.pendingVersion
		t.pendingSpec = nil
		a.launch(t)
		return
	}
	t.failures, t.oomKills, t.consecutive = next.Counts.Failures, next.Counts.OOMKills, next.Counts.Consecutive
	if next.State == agentpb.TaskState_TASK_STATE_BACKOFF {
		t.state = next.State
		t.reason, t.message = next.Reason, next.Message
		t.health = agentpb.Health_HEALTH_UNSPECIFIED
		a.scheduleRestart(t, next.RestartIn)
	} else {
		a.end(t, next.State, next.Reason, next.Message)
	}
	a.emit(next.Event, t, func(ev *agentpb.AgentEvent) {
		ev.Pid, ev.ExitCode, ev.Signal = int64(pid), t.exitCode, t.signal
		ev.Reason, ev.Message, ev.WillRestart = next.Reason, next.Message, next.WillRestart
	})
}

func (a *Agent) scheduleRestart(t *task, delay time.Duration) {
	t.nextStartAt = a.clock.Now().Add(delay)
	key, gen := t.key, t.gen
	t.timer = a.clock.AfterFunc(delay, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if t := a.tasks[key]; !a.closed && t != nil && t.gen == gen && t.state == agentpb.TaskState_TASK_STATE_BACKOFF {
			t.timer = nil
			t.restarts++
			a.metrics.restarts.WithLabelValues(bandOf(t.spec.GetPriority())).Inc()
			a.launch(t)
		}
	})
	a.markDirty()
}

// end puts t in an ended state.
func (a *Agent) end(t *task, state agentpb.TaskState, reason, msg string) {
	t.stopTimers()
	t.state = state
	t.reason, t.message = reason, msg
	t.nextStartAt = time.Time{}
	t.health = agentpb.Health_HEALTH_UNSPECIFIED
	t.pendingSpec = nil
	if t.finishedAt.IsZero() {
		t.finishedAt = a.clock.Now()
	}
	a.markDirty()
}
