package master

import (
	"context"
	"fmt"
	"maps"
	"slices"
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
	"github.com/corralhq/corral/commands/agentlink"
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
	// Silence is how long a machine must have gone without an answer, on
	// top of MissedPolls counted misses, before it is down (default
	// 2 × MissedPolls × Interval): a loaded master's timeouts alone do
	// not take a machine down.
	Silence time.Duration
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
	rule  agentlink.LossRule

	holdMu  sync.Mutex   // guards hold; taken after a machine's mu, never before
	hold    LossHold     // the current hold; zero Since when none
	holdEnd atomic.Int64 // when the last hold ended, Unix nanoseconds; 0 if none
	held    atomic.Bool  // hold.Since is set
	// holds carries the holds' starts and ends to the one goroutine that
	// records them, in order, off the poll loop.
	holds chan commands.RecordLossHold
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

	mu                sync.Mutex // held by the poll in flight
	address           string     // the client's
	client            *agent.Client
	agentlink.Machine // its last report, whether synced, its request numbers
	lastOK            time.Time
	misses            int               // unanswered polls in a row
	silence           agentlink.Silence // those that count against it
	acked             uint64            // the agent's events up to here are in the log
	dropped           uint64            // the agent's count of dropped events, as last seen
	usage             *agentlink.Usage
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
//   - A machine is down after MissedPolls unanswered polls in a row that
//     count and Silence without an answer (agentlink.LossRule). Polls the
//     link itself started late (its own delay), polls within LeaderGrace
//     of this leader's start (a new leader has made no poll yet) and polls
//     during a loss hold count against no machine; misses start over when
//     the grace or a hold ends. Its tasks are then lost and placed
//     elsewhere, at the scheduler's rate. When it answers again it is up,
//     and every task it runs that the projection places elsewhere is
//     stopped: a task never runs twice for long.
//   - When agentlink.HoldLoss says too many machines miss at once, the
//     link holds: it marks none down until fewer miss (LossHold), and
//     records the hold's start and end (MachineLossHeld).
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
	if cfg.Silence <= 0 {
		cfg.Silence = 2 * time.Duration(cfg.MissedPolls) * cfg.Interval
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
		l := &link{cfg: cfg, m: m, by: map[string]*machineLink{}, freed: make(chan struct{}, 1), since: m.clock(),
			rule: agentlink.LossRule{Interval: cfg.Interval, MissedPolls: cfg.MissedPolls, Silence: cfg.Silence}}
		defer l.close()
		defer m.lossHold.Store(nil)
		l.holds = make(chan commands.RecordLossHold, 16)
		go l.recordHolds(ctx)
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
	ps := &pollSlots{sem: make(chan struct{}, l.cfg.Concurrency), suspect: make(chan struct{}, l.cfg.Concurrency)}
	defer ps.wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var (
		mls      []*machineLink
		position = int64(-1)
		// lag is how late this pass woke after its timer was due: the
		// link's own delay, which a poll it starts counts against no
		// machine (agentlink.LossRule.Late).
		lag, timerDue = time.Duration(0), time.Time{}
	)
	for {
		woken := l.m.applied.Wait()
		mls, position = l.refresh(mls, position)
		nowT := l.m.clock()
		now := nowT.UnixNano()
		missing, live := missingOf(mls)
		l.checkHold(nowT, missing, live)
		wake, full := l.pollDue(ctx, ps, mls, nowT, lag)
		// Not sooner than a 200th of the interval: with thousands of
		// machines due at scattered times, every millisecond would be a pass
		// over all of them, for polls a few milliseconds earlier.
		sleep := time.Duration(max(wake-now, int64(l.cfg.Interval/200)))
		timer.Reset(sleep)
		timerDue = nowT.Add(sleep)
		var freed <-chan struct{}
		if full {
			freed = l.freed
		}
		lag = 0
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
			lag = l.m.clock().Sub(timerDue)
		case <-freed:
		}
	}
}

// pollSlots bounds the polls in flight: machines that answer and those
// failing to have slots of their own, so that the failing never hold up
// the rest.
type pollSlots struct {
	sem, suspect chan struct{}
	wg           sync.WaitGroup
	first        int // where a round starts: a full semaphore must not always leave out the same machines
}

// missingOf counts the machines not down, and those of them failing their
// polls.
func missingOf(mls []*machineLink) (missing, live int) {
	for _, ml := range mls {
		if !ml.info.Load().down {
			live++
			if ml.failing.Load() {
				missing++
			}
		}
	}
	return missing, live
}

// pollDue starts a poll of every machine due at nowT while slots are free,
// and returns when (in Unix nanoseconds) the next is due, and whether the
// slots filled up before all were started.
func (l *link) pollDue(ctx context.Context, ps *pollSlots, mls []*machineLink, nowT time.Time, lag time.Duration) (wake int64, full bool) {
	now := nowT.UnixNano()
	wake = now + int64(l.cfg.Interval)
	for i := range mls {
		ml := mls[(ps.first+i)%len(mls)]
		due := ml.next.Load()
		if ml.busy.Load() {
			wake = min(wake, due)
			continue
		}
		mi := ml.info.Load()
		if !agentlink.Due(nowT, time.Unix(0, due), l.cfg.Interval, mi.down, mi.version != ml.polledVer.Load()) {
			wake = min(wake, due)
			continue
		}
		slots := ps.sem
		if ml.failing.Load() {
			slots = ps.suspect
		}
		select {
		case slots <- struct{}{}:
		default:
			if slots == ps.suspect {
				wake = min(wake, now+int64(l.cfg.Interval/200))
				continue // the machines that answer go on
			}
			ps.first = (ps.first + i) % len(mls)
			return wake, true
		}
		ml.busy.Store(true)
		ps.wg.Add(1)
		go func() {
			defer ps.wg.Done()
			l.poll(ctx, ml, lag)
			ml.busy.Store(false)
			<-slots
			select {
			case l.freed <- struct{}{}:
			default:
			}
		}()
	}
	return wake, false
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
				ml = &machineLink{name: m.Name, Machine: agentlink.Machine{Name: m.Name}, usage: agentlink.NewUsage(l.m.clock())}
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
// lag is how late the loop's pass that started it woke.
func (l *link) poll(ctx context.Context, ml *machineLink, lag time.Duration) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	mi := *ml.info.Load()
	started := l.m.clock()
	ml.next.Store(started.Add(l.cfg.Interval).UnixNano())
	if ml.client != nil && ml.address != mi.address {
		ml.client.Close()
		ml.client = nil
	}
	if ml.client == nil {
		c, err := l.cfg.Dial(mi.address)
		if err != nil {
			l.missed(ctx, ml, mi, started, lag, fmt.Errorf("dialing %s: %w", mi.address, err))
			return
		}
		ml.client, ml.address = c, mi.address
	}
	var reqs []*agentpb.Request
	first := ml.Last == nil
	if !first {
		reqs = l.requests(ml)
	}
	st, err := l.send(ctx, ml, reqs)
	if err == nil && first {
		// First contact: now that the agent's state is known, send what it
		// lacks right away.
		ml.Last, ml.Synced = st, false
		if reqs = l.requests(ml); len(reqs) > 0 {
			st, err = l.send(ctx, ml, reqs)
		}
	}
	if err != nil {
		l.missed(ctx, ml, mi, started, lag, err)
		return
	}
	ml.failing.Store(false)
	now := l.m.clock()
	if l.cfg.Stats != nil {
		l.cfg.Stats.Polls.Add(1)
		if !ml.lastOK.IsZero() && ml.misses == 0 {
			l.cfg.Stats.interval(now.Sub(ml.lastOK))
		}
	}
	l.polled(ml, started, now, st)
	ml.misses, ml.silence, ml.lastOK, ml.Last, ml.Synced = 0, agentlink.Silence{}, now, st, false
	ml.usage.Add(st)
	var usage *commands.UsageWindow
	windowDue := now.Sub(ml.usage.Start) >= l.cfg.UsageWindow
	if windowDue {
		usage = ml.usage.Window()
	}
	if err := l.record(ctx, ml, st, reqs, usage); err != nil {
		if ctx.Err() == nil {
			l.m.log.Warn("recording an agent's report", "machine", ml.name, "err", err)
		}
		return // the events stay unacknowledged: the next poll brings them again
	}
	if windowDue {
		ml.usage = agentlink.NewUsage(now)
	}
	ml.Synced, ml.acked, ml.dropped = true, st.LastEventSeq, st.EventsDropped
}

// missed counts a poll, started at started by a pass lag late, that got
// no answer. The rule (agentlink.LossRule) says when such misses mark the
// machine down and its tasks lost; the link keeps polling it at the normal
// interval. A machine the rule would mark down while many others miss too
// starts a loss hold instead (checkHold).
func (l *link) missed(ctx context.Context, ml *machineLink, mi machineInfo, started time.Time, lag time.Duration, err error) {
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
	now := l.m.clock()
	from := agentlink.CountFrom(ml.lastOK, l.since.Add(l.cfg.LeaderGrace), l.holdEnded())
	if !l.rule.Miss(&ml.silence, started, lag, from, now, l.held.Load()) {
		return
	}
	if !mi.down {
		// Decided now, not at the loop's last pass: the machines that
		// missed with this one may not have been counted yet.
		if missing, live := l.missing(); l.checkHold(now, missing, live) {
			return
		}
		l.m.log.Warn("machine missed its polls", "machine", ml.name, "missed", ml.misses, "silent", now.Sub(from).Truncate(time.Millisecond), "err", err)
		if _, derr := l.m.Do(ctx, commands.ReportAgentState{Meta: agentlink.Meta, Machine: ml.name, Unreachable: true, MissedPolls: int32(ml.misses)}); derr != nil && ctx.Err() == nil {
			l.m.log.Warn("marking machine down", "machine", ml.name, "err", derr)
		}
	}
	// When it answers again, it is a first contact.
	ml.Last, ml.Synced = nil, false
}

// LossHold is a time when the link marks no machine down: Missing of the
// cell's Machines (not down) went unanswered at once, a share
// (agentlink.HoldLoss) that says the fault is the master's own or the
// network's rather than theirs.
type LossHold struct {
	Since             time.Time
	Missing, Machines int // at the worst moment of the hold
}

// LossHold returns the link's current loss hold, if this replica leads
// and its link holds.
func (m *Master) LossHold() (LossHold, bool) {
	if h := m.lossHold.Load(); h != nil && m.Leading() {
		return *h, true
	}
	return LossHold{}, false
}

func (l *link) holdEnded() time.Time {
	if n := l.holdEnd.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// missing counts the machines, not down, whose last poll went unanswered.
func (l *link) missing() (missing, live int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ml := range l.by {
		if !ml.info.Load().down {
			live++
			if ml.failing.Load() {
				missing++
			}
		}
	}
	return missing, live
}

// checkHold starts or ends the loss hold for missing of live machines
// unanswered at now, and says whether the link holds. A hold that ends
// makes every machine's misses start over (agentlink.CountFrom).
func (l *link) checkHold(now time.Time, missing, live int) bool {
	hold := agentlink.HoldLoss(missing, live)
	if hold == l.held.Load() && !hold {
		return false
	}
	l.holdMu.Lock()
	defer l.holdMu.Unlock()
	switch {
	case hold && l.hold.Since.IsZero():
		l.hold = LossHold{Since: now, Missing: missing, Machines: live}
		l.held.Store(true)
		l.m.log.Warn("holding machine loss: too many machines missed their polls at once for the fault to be theirs; marking none down until they answer",
			"missing", missing, "machines", live, "percent", agentlink.LossHoldPercent)
		l.recordHold(commands.RecordLossHold{Meta: agentlink.Meta, Since: now, Missing: missing, Machines: live})
	case hold:
		if missing > l.hold.Missing {
			l.hold.Missing, l.hold.Machines = missing, live
		}
	case !l.hold.Since.IsZero():
		l.m.log.Warn("machine loss no longer held: polls answered again", "held", now.Sub(l.hold.Since).Truncate(time.Millisecond),
			"missing", l.hold.Missing, "machines", l.hold.Machines)
		l.holdEnd.Store(now.UnixNano())
		l.recordHold(commands.RecordLossHold{Meta: agentlink.Meta, Since: l.hold.Since, Ended: now, Missing: l.hold.Missing, Machines: l.hold.Machines})
		l.hold = LossHold{}
		l.held.Store(false)
		l.m.lossHold.Store(nil)
		return false
	default:
		return false
	}
	h := l.hold
	l.m.lossHold.Store(&h)
	return true
}

// recordHold queues a hold's start or end for recordHolds; a full queue
// (the log not answering) drops it, logged, rather than hold up the polls.
func (l *link) recordHold(c commands.RecordLossHold) {
	select {
	case l.holds <- c:
	default:
		l.m.log.Warn("not recording a loss hold: the log is behind", "since", c.Since, "ended", c.Ended)
	}
}

func (l *link) recordHolds(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-l.holds:
			if _, err := l.m.Do(ctx, c); err != nil && ctx.Err() == nil {
				l.m.log.Warn("recording a loss hold", "err", err)
			}
		}
	}
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

// record turns one reply into the ReportAgentState commands that record
// it (agentlink.Reports) and sends them in order, stopping at the first
// that fails: the events stay unacknowledged and the next poll brings
// them again.
func (l *link) record(ctx context.Context, ml *machineLink, st *agentpb.AgentState, reqs []*agentpb.Request, usage *commands.UsageWindow) error {
	recorded := func(id string) bool {
		_, _, ok := l.m.recent.Get(commands.Meta{Actor: agentlink.Meta.Actor, RequestID: id}.Key())
		return ok
	}
	var rep agentlink.Report
	l.m.View(func(s *projections.State) {
		rep = agentlink.Reports(s, ml.name, st, reqs, ml.acked, ml.dropped, recorded, usage)
	})
	for _, r := range rep.Refused {
		l.m.log.Warn("the agent refused a start", "machine", ml.name, "task", r.Task, "err", r.Err)
	}
	if rep.Fallback {
		l.m.log.Warn("the agent dropped events; recording from its full state", "machine", ml.name, "dropped", st.EventsDropped-ml.dropped)
	}
	for _, cmd := range rep.Commands {
		if err := l.do(ctx, cmd); err != nil {
			return err
		}
	}
	return nil
}

// do sends a report through the write path unless, decided against the
// projection now, it would append nothing.
func (l *link) do(ctx context.Context, cmd commands.ReportAgentState) error {
	var news bool
	l.m.View(func(s *projections.State) { news = agentlink.News(s, cmd, l.m.clock()) })
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

// requests returns what makes the agent match the projection
// (agentlink.Requests), noting the machine version it was computed from.
func (l *link) requests(ml *machineLink) []*agentpb.Request {
	var reqs []*agentpb.Request
	l.m.View(func(s *projections.State) {
		var version int64
		var bad []agentlink.Unresolved
		reqs, version, bad = agentlink.Requests(s, &ml.Machine, l.cfg.MaxStartsPerPoll, l.cfg.StopGrace)
		if version >= 0 {
			ml.polledVer.Store(version)
		}
		for _, b := range bad {
			l.m.log.Error("a placed task's spec does not resolve; not sending it", "machine", ml.name, "task", b.Task, "err", b.Err)
		}
	})
	return reqs
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
	r.m.View(func(s *projections.State) { cmd = Registration(s, info, agentlink.Meta) })
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
