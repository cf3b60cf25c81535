package master

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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
	// LeaderGrace is how long a new leader waits before it marks any
	// machine down (default 2 × MissedPolls × Interval): after a failover
	// or a restart, agents may be restarting too, or not yet know where the
	// new leader is, and a machine that answers within the grace must not
	// lose its tasks.
	LeaderGrace time.Duration
	// Concurrency bounds the polls in flight (default 64), and as many
	// again to machines whose last poll went unanswered.
	Concurrency int
	// UsageWindow is how often a machine's usage becomes an event
	// (default 5 minutes, the Google trace's task_usage window).
	UsageWindow time.Duration
	// StopGrace is the SIGTERM-to-SIGKILL grace given to stopped tasks.
	StopGrace time.Duration
	// MaxStartsPerPoll bounds the starts one poll carries (default 10): an
	// agent starts them before it answers, and a machine given hundreds at
	// once (a cell resuming) would miss its polls and be marked down. The
	// rest go with the next polls.
	MaxStartsPerPoll int
	// Dial connects to an agent; default agent.Dial (plaintext).
	Dial func(addr string) (*agent.Client, error)
	// Stats, when set, receives poll timings (benchmarks, metrics).
	Stats *LinkStats
	// Metrics, when set, is told of every poll (see LinkMetrics).
	Metrics LinkMetrics
}

// LinkStats records what the link did.
type LinkStats struct {
	mu        sync.Mutex
	Intervals []time.Duration // between consecutive successful polls of a machine
	Polls     atomic.Int64    // answered
	Failures  atomic.Int64    // not answered
	Reports   atomic.Int64    // reports sent through the write path
	Unchanged atomic.Int64    // reports not sent: they would have changed nothing
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
	cfg   LinkConfig
	m     *Master
	mu    sync.Mutex // guards by and gen
	by    map[string]*machineLink
	gen   uint64        // of the last refresh, to find machines removed from the cell
	freed chan struct{} // a poll ended: the loop may start another
	since time.Time     // when this leader's link started: LeaderGrace runs from here
}

type machineLink struct {
	name string
	// Read by the loop without taking mu.
	busy      atomic.Bool                 // a poll is in flight
	failing   atomic.Bool                 // its last poll got no answer
	next      atomic.Int64                // when the next poll is due, Unix nanoseconds
	polledVer atomic.Int64                // the machine version the last requests were computed against
	info      atomic.Pointer[machineInfo] // as the projection has it
	seen      uint64                      // the refresh that last found it; under link.mu

	mu      sync.Mutex // held by the poll in flight
	address string     // the client's
	client  *agent.Client
	last    *agentpb.AgentState
	// synced: last's events and ended tasks are in the log, so an ended
	// task placed here again is a new placement and is started.
	synced      bool
	lastOK      time.Time
	misses      int
	acked       uint64 // the agent's events up to here are in the log
	dropped     uint64 // the agent's count of dropped events, as last seen
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

// Link returns the leader's agent link, for Config.OnLeading. It polls
// every machine each Interval (Borg §3.3: the master sets the pace; no
// agent ever calls in but to register), sends it the starts, updates and
// stops that make it match the projection, and records what it reports.
//
// Invariants:
//   - Every event an agent reports is recorded once, in order, though a
//     leader may die between recording and acknowledging: what it cannot
//     tell from the projection carries an idempotency key (see record).
//   - An agent's ended task is started again only once its end is in the
//     log, and forgotten by the agent only then.
//   - A machine is down after MissedPolls unanswered polls in a row, one per
//     interval, so at the earliest (MissedPolls-1) intervals after its last
//     answer, and never within LeaderGrace of this leader's start; its
//     tasks are then lost and placed elsewhere. When it answers
//     again it is up, and every task it runs that the projection places
//     elsewhere is stopped: a task never runs twice for long.
//   - A poll that changes nothing writes nothing.
//   - Machines that stop answering are polled from slots of their own and
//     on fresh connections: hung polls do not delay the others, and a
//     reconnect backoff does not hide an agent that is back.
func Link(cfg LinkConfig) func(ctx context.Context, m *Master) {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.MissedPolls <= 0 {
		cfg.MissedPolls = 3
	}
	if cfg.MaxStartsPerPoll <= 0 {
		cfg.MaxStartsPerPoll = 10
	}
	if cfg.LeaderGrace <= 0 {
		cfg.LeaderGrace = 2 * time.Duration(cfg.MissedPolls) * cfg.Interval
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
		l := &link{cfg: cfg, m: m, by: map[string]*machineLink{}, freed: make(chan struct{}, 1), since: time.Now()}
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

// run starts each machine's poll when it is due: an interval after the
// previous one started, whether it was answered or not (so K misses take K
// intervals), or at once when the machine's placements changed. At most
// Concurrency polls are in flight, and as many again to machines whose last
// poll got no answer: those may hang until the timeout, and must not hold
// up the machines that answer. A machine whose poll is still in flight is
// not polled again.
func (l *link) run(ctx context.Context) {
	sem := make(chan struct{}, l.cfg.Concurrency)
	suspect := make(chan struct{}, l.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var (
		mls      []*machineLink
		position = int64(-1)
		first    int // where a round starts: a full semaphore must not always leave out the same machines
	)
	for {
		woken := l.m.applied.Wait()
		mls, position = l.refresh(mls, position)
		now := time.Now().UnixNano()
		wake := now + int64(l.cfg.Interval)
		full := false
		for i := range mls {
			ml := mls[(first+i)%len(mls)]
			due := ml.next.Load()
			if ml.busy.Load() {
				wake = min(wake, due)
				continue
			}
			mi := ml.info.Load()
			if now < due && (mi.down || mi.version == ml.polledVer.Load()) {
				wake = min(wake, due)
				continue
			}
			slots := sem
			if ml.failing.Load() {
				slots = suspect
			}
			select {
			case slots <- struct{}{}:
			default:
				if slots == suspect {
					wake = min(wake, now+int64(l.cfg.Interval/200))
					continue // the machines that answer go on
				}
				full = true
				first = (first + i) % len(mls)
			}
			if full {
				break
			}
			ml.busy.Store(true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.poll(ctx, ml)
				ml.busy.Store(false)
				<-slots
				select {
				case l.freed <- struct{}{}:
				default:
				}
			}()
		}
		// Not sooner than a 200th of the interval: with thousands of
		// machines due at scattered times, every millisecond would be a pass
		// over all of them, for polls a few milliseconds earlier.
		timer.Reset(time.Duration(max(wake-now, int64(l.cfg.Interval/200))))
		var freed <-chan struct{}
		if full {
			freed = l.freed
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
		case <-timer.C:
		case <-freed:
		}
	}
}

// refresh brings the link's machines up to the projection when the log
// moved since position. It allocates nothing for machines that did not
// change, so a large cell costs one pass over its machines per refresh.
func (l *link) refresh(mls []*machineLink, position int64) ([]*machineLink, int64) {
	l.m.View(func(s *projections.State) {
		if s.Position == position {
			return
		}
		position = s.Position
		l.mu.Lock()
		defer l.mu.Unlock()
		l.gen++
		added := false
		for _, m := range s.Machines {
			ml := l.by[m.Name]
			if ml == nil {
				ml = &machineLink{name: m.Name, usage: map[projections.TaskKey]*usageAcc{}, windowStart: time.Now()}
				l.by[m.Name] = ml
				added = true
			}
			ml.seen = l.gen
			down := m.State == projections.MachineDown
			if cur := ml.info.Load(); cur == nil || cur.address != m.Address || cur.version != m.Version || cur.down != down {
				ml.info.Store(&machineInfo{name: m.Name, address: m.Address, version: m.Version, down: down})
			}
		}
		removed := false
		if len(l.by) != len(s.Machines) {
			for name, ml := range l.by {
				if ml.seen != l.gen && ml.mu.TryLock() {
					if ml.client != nil {
						ml.client.Close()
						ml.client = nil
					}
					ml.mu.Unlock()
					delete(l.by, name)
					removed = true
				}
			}
		}
		if added || removed || len(mls) != len(l.by) {
			mls = mls[:0]
			for _, ml := range l.by {
				mls = append(mls, ml)
			}
			slices.SortFunc(mls, func(a, b *machineLink) int { return strings.Compare(a.name, b.name) })
		}
	})
	return mls, position
}

// poll sends a machine its outstanding requests and records its report.
func (l *link) poll(ctx context.Context, ml *machineLink) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	mi := *ml.info.Load()
	started := time.Now()
	ml.next.Store(started.Add(l.cfg.Interval).UnixNano())
	if ml.client != nil && ml.address != mi.address {
		ml.client.Close()
		ml.client = nil
	}
	if ml.client == nil {
		c, err := l.cfg.Dial(mi.address)
		if err != nil {
			l.missed(ctx, ml, mi, fmt.Errorf("dialing %s: %w", mi.address, err))
			return
		}
		ml.client, ml.address = c, mi.address
	}
	var reqs []*agentpb.Request
	first := ml.last == nil
	if !first {
		reqs = l.requests(ml)
	}
	st, err := l.send(ctx, ml, reqs)
	if err == nil && first {
		// First contact: now that the agent's state is known, send what it
		// lacks right away.
		ml.last, ml.synced = st, false
		if reqs = l.requests(ml); len(reqs) > 0 {
			st, err = l.send(ctx, ml, reqs)
		}
	}
	if err != nil {
		l.missed(ctx, ml, mi, err)
		return
	}
	ml.failing.Store(false)
	now := time.Now()
	if l.cfg.Stats != nil {
		l.cfg.Stats.Polls.Add(1)
		if !ml.lastOK.IsZero() && ml.misses == 0 {
			l.cfg.Stats.interval(now.Sub(ml.lastOK))
		}
	}
	l.polled(ml, started, now, st)
	ml.misses, ml.lastOK, ml.last, ml.synced = 0, now, st, false
	l.accumulate(ml, st)
	var usage []commands.UsageWindow
	windowDue := now.Sub(ml.windowStart) >= l.cfg.UsageWindow
	if windowDue {
		if w := l.window(ml); len(w.Tasks) > 0 {
			usage = append(usage, w)
		}
	}
	if err := l.record(ctx, ml, st, reqs, usage); err != nil {
		if ctx.Err() == nil {
			l.m.log.Warn("recording an agent's report", "machine", ml.name, "err", err)
		}
		return // the events stay unacknowledged: the next poll brings them again
	}
	if windowDue {
		ml.usage, ml.windowStart = map[projections.TaskKey]*usageAcc{}, now
	}
	ml.synced, ml.acked, ml.dropped = true, st.LastEventSeq, st.EventsDropped
}

// missed counts a poll that got no answer. K in a row mark the machine
// down and its tasks lost; the link keeps polling it at the normal interval.
func (l *link) missed(ctx context.Context, ml *machineLink, mi machineInfo, err error) {
	if ctx.Err() != nil {
		return
	}
	if l.cfg.Stats != nil {
		l.cfg.Stats.Failures.Add(1)
	}
	ml.misses++
	ml.failing.Store(true)
	l.unanswered(ml, err)
	// The next poll gets a fresh connection: a failed one reconnects with a
	// growing backoff, which would hide an agent that is back.
	if ml.client != nil {
		ml.client.Close()
		ml.client = nil
	}
	if ml.misses < l.cfg.MissedPolls || time.Since(l.since) < l.cfg.LeaderGrace {
		return
	}
	if !mi.down {
		l.m.log.Warn("machine missed its polls", "machine", ml.name, "missed", ml.misses, "err", err)
		admin := linkMeta
		if _, derr := l.m.Do(ctx, commands.ReportAgentState{Meta: admin, Machine: ml.name, Unreachable: true, MissedPolls: int32(ml.misses)}); derr != nil && ctx.Err() == nil {
			l.m.log.Warn("marking machine down", "machine", ml.name, "err", derr)
		}
	}
	// When it answers again, it is a first contact.
	ml.last, ml.synced = nil, false
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

// record turns one reply into ReportAgentState commands, in this order:
//
//  1. Starts the agent refused (a spec it cannot run): each a failure of the
//     task, so the restart policy decides, rather than a task left
//     scheduled for ever.
//  2. Each event the agent reports, alone, as the task's state at that
//     moment: a task that failed and restarted three times between two
//     polls has three failures in the log, not one, and its restarts count
//     against max_restarts. (A task's last event when it is a start or a
//     failure restarting in place is left to the full state, which says the
//     same.) Each carries the idempotency key
//     link/<machine>/<seq>/<time>: a new leader does not know what the
//     last one recorded but did not acknowledge. Events up to a start the
//     projection has are skipped (recordedStarts); the store drops the
//     rest of what would be recorded twice.
//  3. The full state (Borg §3.3: full state, so a lost reply costs
//     nothing), with the usage window when one closed. Ended tasks are in
//     it only when the agent dropped events: otherwise their events said it
//     all, and the status of a task that ended before being placed here
//     again would end the new placement.
//
// A command the projection says changes nothing is not sent: a steady
// machine costs no write.
func (l *link) record(ctx context.Context, ml *machineLink, st *agentpb.AgentState, reqs []*agentpb.Request, usage []commands.UsageWindow) error {
	admin := linkMeta
	// Every task the agent has, as news of nothing (a task in a report is
	// not lost, and "starting" records nothing); each event overrides one.
	neutral := make([]commands.AgentTask, len(st.Tasks))
	index := make(map[projections.TaskKey]int, len(st.Tasks))
	for i, ts := range st.Tasks {
		k := TaskKeyOf(ts.Task)
		neutral[i] = commands.AgentTask{Task: k, SpecVersion: ts.SpecVersion, State: commands.AgentStarting}
		index[k] = i
	}
	one := func(at commands.AgentTask) []commands.AgentTask {
		tasks := slices.Clone(neutral)
		if i, ok := index[at.Task]; ok {
			tasks[i] = at
		} else {
			tasks = append(tasks, at)
		}
		return tasks
	}

	starts := map[string]*agentpb.StartTask{}
	for _, r := range reqs {
		if s := r.GetStart(); s != nil {
			starts[r.Id] = s
		}
	}
	for _, res := range st.Results {
		s := starts[res.Id]
		if res.Error == "" || s == nil {
			continue
		}
		l.m.log.Warn("the agent refused a start", "machine", ml.name, "user", s.Task.GetUser(), "job", s.Task.GetJob(), "task", s.Task.GetIndex(), "err", res.Error)
		at := commands.AgentTask{Task: TaskKeyOf(s.Task), SpecVersion: s.SpecVersion, State: commands.AgentFailed, ExitCode: -1,
			Reason: agent.ReasonStartFailed, Message: "the agent refused to start it: " + res.Error}
		if err := l.do(ctx, commands.ReportAgentState{Meta: admin, Machine: ml.name, Tasks: one(at)}); err != nil {
			return err
		}
	}

	recorded := l.recordedStarts(ml.name, st.Events)
	lastOf := make(map[projections.TaskKey]uint64, len(st.Events))
	// The log's watermark of this machine's events: record stops at its
	// first failure, so every event before one whose key the log holds was
	// recorded then (or needed no record). A new leader, or a retry after a
	// failed report, must not record them again: a start that went in
	// without a key (left to the full state) would otherwise be taken for
	// the start of a later placement of its task on this machine, and a
	// task recorded running whose process is long gone.
	done := ml.acked
	for _, ev := range st.Events {
		lastOf[TaskKeyOf(ev.Task)] = ev.Seq
		if _, _, ok := l.m.recent.Get(commands.Meta{Actor: linkMeta.Actor, RequestID: AgentEventKey(ml.name, ev)}.Key()); ok {
			done = max(done, ev.Seq)
		}
	}
	for _, ev := range st.Events {
		if ev.Seq <= done || ev.Seq <= recorded[TaskKeyOf(ev.Task)] {
			continue
		}
		at, ok := AgentEventTask(ev)
		if !ok {
			continue
		}
		if ev.Seq == lastOf[at.Task] && (at.State == commands.AgentRunning || at.State == commands.AgentBackoff) {
			// The task's state now says the same, and the full state below
			// records it as well, idempotently: a burst of starts costs one
			// write, not one each.
			continue
		}
		meta := admin
		meta.RequestID = AgentEventKey(ml.name, ev)
		if err := l.do(ctx, commands.ReportAgentState{Meta: meta, Machine: ml.name, Tasks: one(at)}); err != nil {
			return err
		}
	}

	fallback := st.EventsDropped > ml.dropped
	if fallback {
		l.m.log.Warn("the agent dropped events; recording from its full state", "machine", ml.name, "dropped", st.EventsDropped-ml.dropped)
	}
	full := commands.ReportAgentState{Meta: admin, Machine: ml.name, Tasks: make([]commands.AgentTask, 0, len(st.Tasks)), Usage: usage}
	for _, ts := range st.Tasks {
		if AgentTaskEnded(ts.State) && !fallback {
			full.Tasks = append(full.Tasks, neutral[index[TaskKeyOf(ts.Task)]])
			continue
		}
		full.Tasks = append(full.Tasks, commands.AgentTask{Task: TaskKeyOf(ts.Task), SpecVersion: ts.SpecVersion,
			State: commands.AgentTaskState(ts.State), Pid: ts.Pid, ExitCode: ts.ExitCode, Signal: ts.Signal,
			Restarts: ts.Restarts, Reason: ts.Reason, Message: ts.Message})
	}
	return l.do(ctx, full)
}

// linkMeta is who the link's commands come from: an admin whose request ids
// (eventKey) live in its own namespace of idempotency keys.
var linkMeta = commands.Meta{Actor: commands.Actor{User: "link", Admin: true}}

// recordedStarts finds, for each task with events, the start the
// projection already has (the task runs here with that pid): that event and
// every earlier one of the task are in the log, whatever was acknowledged.
// A new leader's first poll gets back what the last leader recorded but did
// not acknowledge; this spares the store most of those duplicates.
func (l *link) recordedStarts(machine string, evs []*agentpb.AgentEvent) map[projections.TaskKey]uint64 {
	if len(evs) == 0 {
		return nil
	}
	var out map[projections.TaskKey]uint64
	l.m.View(func(s *projections.State) { out = RecordedStarts(s, machine, evs) })
	return out
}

// do sends a report through the write path unless, decided against the
// projection now, it would append nothing.
func (l *link) do(ctx context.Context, cmd commands.ReportAgentState) error {
	news := true
	l.m.View(func(s *projections.State) {
		evs, err := commands.Decide(s, cmd, commands.ClockFunc(time.Now))
		news = err != nil || len(evs) > 0
	})
	if l.cfg.Stats != nil {
		if news {
			l.cfg.Stats.Reports.Add(1)
		} else {
			l.cfg.Stats.Unchanged.Add(1)
		}
	}
	if !news {
		return nil
	}
	_, err := l.m.Do(ctx, cmd)
	return err
}

// requests compares what the projection places on the machine with what the
// agent last reported, and returns the starts, updates and stops that make
// the agent match. A task placed elsewhere meanwhile (the machine was down)
// is stopped, so a task never runs twice. A task placed here again after it
// ended here is started again once its end is in the log.
func (l *link) requests(ml *machineLink) []*agentpb.Request {
	reported := make(map[projections.TaskKey]*agentpb.TaskStatus, len(ml.last.GetTasks()))
	for _, t := range ml.last.GetTasks() {
		reported[TaskKeyOf(t.Task)] = t
	}
	id := func() string { ml.reqSeq++; return ml.name + "-" + strconv.FormatInt(ml.reqSeq, 10) }
	var reqs []*agentpb.Request
	starts := 0
	grace := l.cfg.StopGrace.Milliseconds()
	l.m.View(func(s *projections.State) {
		m := s.Machines[ml.name]
		if m == nil {
			return
		}
		ml.polledVer.Store(m.Version)
		wanted := make(map[projections.TaskKey]bool, m.TaskCount())
		m.RangeTasks(func(t *projections.Task) bool {
			k := t.Key()
			wanted[k] = true
			ref := &events.TaskRef{User: k.User, Job: k.Job, Index: k.Index}
			rep := reported[k]
			start := (rep == nil || (AgentTaskEnded(rep.State) && ml.synced)) && t.State == projections.TaskScheduled
			update := rep != nil && rep.SpecVersion < t.SpecVersion && AgentTaskLive(rep.State)
			if !start && !update {
				return true
			}
			if start {
				if starts >= l.cfg.MaxStartsPerPoll {
					return true // with a later poll
				}
				starts++
			}
			spec, err := TaskSpec(t)
			switch {
			case err != nil:
				l.m.log.Error("a placed task's spec does not resolve; not sending it", "machine", ml.name, "task", k, "err", err)
			case start:
				reqs = append(reqs, agent.StartRequest(id(), ref, t.SpecVersion, spec))
			default:
				reqs = append(reqs, agent.UpdateRequest(id(), ref, t.SpecVersion, spec))
			}
			return true
		})
		for k, rep := range reported {
			if wanted[k] {
				continue
			}
			ref := &events.TaskRef{User: k.User, Job: k.Job, Index: k.Index}
			if AgentTaskLive(rep.State) {
				reqs = append(reqs, agent.StopRequest(id(), ref, "not placed on "+ml.name+" by the master", grace))
			} else if rep.State != agentpb.TaskState_TASK_STATE_STOPPING && ml.synced {
				// Its end is in the log: the agent may drop it.
				reqs = append(reqs, agent.ForgetRequest(id(), ref))
			}
		}
	})
	return reqs
}

// TaskSpec is what the agent needs to run t: agent.ResolveSpec, the one
// rule, of its job's spec at its version, its index and its ports. An
// error means a placement that does not match its spec, a master bug: the
// link logs it and starts nothing rather than send what the agent would
// refuse.
func TaskSpec(t *projections.Task) (*agentpb.TaskSpec, error) {
	return agent.ResolveSpec(t.Spec(), t.Index, t.Ports)
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

// window sums the machine's open usage window into one UsageWindow; the
// caller starts the next window once this one is recorded.
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
	var cmd commands.Command
	r.m.View(func(s *projections.State) { cmd = Registration(s, info, linkMeta) })
	if cmd != nil {
		if _, err := r.m.Do(ctx, cmd); err != nil {
			return nil, Status(ctx, err)
		}
	}
	return &agentpb.RegisterReply{Cell: r.cell, MasterId: r.m.Name(), Epoch: r.m.Epoch(), PollIntervalMs: r.pollInterval.Milliseconds()}, nil
}

// Registration is the command that records an agent's registration of its
// machine: RegisterMachine for a machine the cell does not know,
// UpdateMachine for one whose address, capacity, attributes or ports
// changed (an agent restarted on other hardware), nil when nothing did.
func Registration(s *projections.State, info *agentpb.MachineInfo, meta commands.Meta) commands.Command {
	caps := projections.ResourcesOf(info.Capacity)
	m := s.Machines[info.Name]
	switch {
	case m == nil:
		return commands.RegisterMachine{Meta: meta, Machine: info.Name, Address: info.Address, Capacity: caps, Attributes: info.Attributes, PortBase: info.PortFirst}
	case m.Address != info.Address || m.Capacity != caps || !maps.Equal(m.Attributes, info.Attributes) || m.PortBase != info.PortFirst:
		return commands.UpdateMachine{Meta: meta, Machine: info.Name, Address: info.Address, Capacity: caps, Attributes: info.Attributes, PortBase: info.PortFirst}
	}
	return nil
}
