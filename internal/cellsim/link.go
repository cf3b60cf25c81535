package cellsim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/agentlink"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/projections"
)

// simLink is the leader's agent link, the protocol of commands/master's
// link.go decision for decision: a poll every interval (at once when the
// machine's placements changed) carrying the starts, updates, stops and
// forgets that make the agent match the projection; a reply recorded as a
// ReportAgentState per refused start, per agent event (with the idempotency
// key link/<machine>/<seq>/<time>) and one for the full state with the
// usage window; acknowledgement only once all of that is in the log;
// MissedPolls misses in a row mark the machine down. Only the transport is
// the simulation's: a poll is a message to the agent that can be delayed,
// lost or cut off.
type simLink struct {
	m     *Master
	term  int
	by    map[string]*mlink
	since time.Time // when this leader's link started: leaderGrace runs from here
	// A loss hold, as link.go's: since is set while too many machines miss
	// at once (agentlink.HoldLoss); holdEnd is when the last one ended.
	holdSince, holdEnd        time.Time
	holdMissing, holdMachines int // at the worst of the current hold
}

type mlink struct {
	name      string
	busy      bool
	next      time.Time
	polledVer int64
	down      bool
	version   int64
	agentlink.Machine
	lastOK  time.Time
	misses  int
	failing bool // its last poll got no answer
	silence agentlink.Silence
	acked   uint64
	dropped uint64
	usage   *agentlink.Usage
}

// The link's settings: Borg's three missed polls and master.LinkConfig's
// defaults; a short usage window so that reservations move within a run.
const (
	pollInterval     = 2 * time.Second
	missedPolls      = 3
	leaderGrace      = 2 * missedPolls * pollInterval
	silence          = 2 * missedPolls * pollInterval
	maxStartsPerPoll = 10
	usageWindow      = 30 * time.Second
	stopGrace        = time.Second
)

func newLink(m *Master) *simLink {
	return &simLink{m: m, term: m.term, by: map[string]*mlink{}, since: m.now()}
}

func (l *simLink) live() bool { return l.m.term == l.term && l.m.link == l }

func (l *simLink) start() {
	var tick func()
	due := l.m.now()
	tick = func() {
		if !l.live() {
			return
		}
		// A paused master's ticks come late: its polls then count against
		// no machine, as link.go's after a late wake.
		l.run(l.m.now().Sub(due))
		due = l.m.now().Add(pollInterval / 8)
		l.m.at(pollInterval/8, tick)
	}
	tick()
}

// run starts the polls that are due, in a pass lag late.
func (l *simLink) run(lag time.Duration) {
	l.m.view(func(s *projections.State) {
		if !l.live() {
			return
		}
		now := l.m.now()
		for _, name := range slices.Sorted(maps.Keys(s.Machines)) {
			m := s.Machines[name]
			ml := l.by[name]
			if ml == nil {
				ml = &mlink{name: name, Machine: agentlink.Machine{Name: name}, usage: agentlink.NewUsage(now), polledVer: -1}
				l.by[name] = ml
			}
			ml.version, ml.down = m.Version, m.State == projections.MachineDown
		}
		for name := range l.by {
			if s.Machines[name] == nil {
				delete(l.by, name)
			}
		}
		l.checkHold()
		for _, name := range slices.Sorted(maps.Keys(l.by)) {
			ml := l.by[name]
			if ml.busy || !agentlink.Due(now, ml.next, pollInterval, ml.down, ml.version != ml.polledVer) {
				continue
			}
			l.poll(ml, lag)
		}
	})
}

// poll sends a machine its outstanding requests and records its report.
// It runs with the state readable.
func (l *simLink) poll(ml *mlink, lag time.Duration) {
	ml.busy = true
	started := l.m.now()
	ml.next = started.Add(pollInterval)
	down := ml.down
	var reqs []*agentpb.Request
	first := ml.Last == nil
	if !first {
		reqs = l.requests(ml)
	}
	finish := func(st *agentpb.AgentState, err error) {
		if !l.live() {
			return
		}
		if err != nil {
			l.missed(ml, down, started, lag, err)
			return
		}
		now := l.m.now()
		ml.misses, ml.failing, ml.silence, ml.lastOK, ml.Last, ml.Synced = 0, false, agentlink.Silence{}, now, st, false
		ml.usage.Add(st)
		var usage *commands.UsageWindow
		windowDue := now.Sub(ml.usage.Start) >= usageWindow
		if windowDue {
			usage = ml.usage.Window()
		}
		l.record(ml, st, reqs, usage, func(err error) {
			if !l.live() {
				return
			}
			ml.busy = false
			if err != nil {
				l.m.logf("recording %s's report: %v", ml.name, err)
				return // unacknowledged: the next poll brings the events again
			}
			if windowDue {
				ml.usage = agentlink.NewUsage(now)
			}
			ml.Synced, ml.acked, ml.dropped = true, st.LastEventSeq, st.EventsDropped
		})
	}
	l.send(ml, reqs, !first, func(st *agentpb.AgentState, err error) {
		if err == nil && first && l.live() {
			// First contact: now that the agent's state is known, send what
			// it lacks right away.
			ml.Last, ml.Synced = st, false
			l.m.view(func(*projections.State) {
				if reqs = l.requests(ml); len(reqs) > 0 {
					l.send(ml, reqs, true, finish)
					return
				}
				finish(st, nil)
			})
			return
		}
		finish(st, err)
	})
}

// send polls a machine. counted says whether the harness's reconciliation
// window counts the poll: every poll but a first contact, which sends
// nothing whatever the projection wants.
func (l *simLink) send(ml *mlink, reqs []*agentpb.Request, counted bool, reply func(*agentpb.AgentState, error)) {
	var epoch int64
	if l.m.leading {
		epoch = l.m.lease.Epoch
	}
	req := &agentpb.PollRequest{MasterId: l.m.name, Epoch: epoch, Cell: "sim", Requests: reqs, EventsAcked: ml.acked, Machine: ml.name}
	if l.m.w.cfg.Trace != nil {
		l.m.logf("polls %s (epoch %d, acked %d): %s", ml.name, epoch, ml.acked, describe(reqs))
	}
	a := l.m.w.agents[ml.name]
	if a == nil {
		reply(nil, fmt.Errorf("no agent at %s", ml.name))
		return
	}
	l.m.w.call(l.m.node, a.node, pollInterval, func(respond func(any, error)) {
		st, err := a.poll(req, counted)
		respond(st, err)
	}, func(v any, err error) {
		st, _ := v.(*agentpb.AgentState)
		reply(st, err)
	})
}

// missed counts a poll that got no answer; agentlink.LossRule says when
// such misses mark the machine down and its tasks lost, unless the link
// holds machine loss (checkHold).
func (l *simLink) missed(ml *mlink, down bool, started time.Time, lag time.Duration, err error) {
	ml.misses++
	ml.failing = true
	now := l.m.now()
	rule := agentlink.LossRule{Interval: pollInterval, MissedPolls: missedPolls, Silence: silence}
	if !rule.Miss(&ml.silence, started, lag, agentlink.CountFrom(ml.lastOK, l.since.Add(leaderGrace), l.holdEnd), now, !l.holdSince.IsZero()) {
		ml.busy = false
		return
	}
	if !down && l.checkHold() {
		ml.busy = false
		return
	}
	ml.Last, ml.Synced = nil, false
	if down {
		ml.busy = false
		return
	}
	l.m.logf("%s missed %d polls: %v", ml.name, ml.misses, err)
	l.m.do(commands.ReportAgentState{Meta: agentlink.Meta, Machine: ml.name, Unreachable: true, MissedPolls: int32(ml.misses)}, func(_ master.Result, err error) {
		if l.live() {
			ml.busy = false
		}
	})
}

// checkHold starts or ends the loss hold from the machines (not down)
// whose last poll went unanswered, and says whether the link holds.
func (l *simLink) checkHold() bool {
	missing, live := 0, 0
	for _, ml := range l.by {
		if !ml.down {
			live++
			if ml.failing {
				missing++
			}
		}
	}
	hold := agentlink.HoldLoss(missing, live)
	switch {
	case hold && l.holdSince.IsZero():
		l.holdSince, l.holdMissing, l.holdMachines = l.m.now(), missing, live
		l.m.logf("holds machine loss: %d of %d machines miss their polls", missing, live)
		l.m.do(commands.RecordLossHold{Meta: agentlink.Meta, Since: l.holdSince, Missing: missing, Machines: live}, func(master.Result, error) {})
	case hold && missing > l.holdMissing:
		l.holdMissing, l.holdMachines = missing, live
	case !hold && !l.holdSince.IsZero():
		l.m.logf("machine loss no longer held after %s", l.m.now().Sub(l.holdSince))
		l.m.do(commands.RecordLossHold{Meta: agentlink.Meta, Since: l.holdSince, Ended: l.m.now(), Missing: l.holdMissing, Machines: l.holdMachines}, func(master.Result, error) {})
		l.holdSince, l.holdEnd = time.Time{}, l.m.now()
	}
	return hold
}

// record turns one reply into ReportAgentState commands, in link.go's
// order: refused starts, then each event alone, then the full state; done
// gets the first error, or nil once all are in the log.
func (l *simLink) record(ml *mlink, st *agentpb.AgentState, reqs []*agentpb.Request, usage *commands.UsageWindow, done func(error)) {
	l.m.view(func(s *projections.State) { l.recordIn(s, ml, st, reqs, usage, done) })
}

func (l *simLink) recordIn(s *projections.State, ml *mlink, st *agentpb.AgentState, reqs []*agentpb.Request, usage *commands.UsageWindow, done func(error)) {
	recorded := func(id string) bool {
		_, _, ok := l.m.recent.Get(commands.Meta{Actor: agentlink.Meta.Actor, RequestID: id}.Key())
		return ok
	}
	cmds := agentlink.Reports(s, ml.name, st, reqs, ml.acked, ml.dropped, recorded, usage).Commands
	var next func(i int)
	next = func(i int) {
		if i == len(cmds) {
			done(nil)
			return
		}
		l.do(cmds[i], func(err error) {
			if err != nil {
				done(err)
				return
			}
			next(i + 1)
		})
	}
	next(0)
}

// do sends a report through the write path unless, decided against the
// projection now, it would append nothing.
func (l *simLink) do(cmd commands.ReportAgentState, done func(error)) {
	l.m.view(func(s *projections.State) {
		if !l.live() {
			return
		}
		if !agentlink.News(s, cmd, l.m.now()) {
			done(nil)
			return
		}
		l.m.do(cmd, func(_ master.Result, err error) { done(err) })
	})
}

// requests returns what makes the agent match the projection
// (agentlink.Requests). The state must be readable.
func (l *simLink) requests(ml *mlink) []*agentpb.Request {
	reqs, version, bad := agentlink.Requests(l.m.st, &ml.Machine, maxStartsPerPoll, stopGrace)
	if len(bad) > 0 {
		panic(fmt.Sprintf("sim: task %v placed on %s: its spec does not resolve: %v", bad[0].Task, ml.name, bad[0].Err))
	}
	if version >= 0 {
		ml.polledVer = version
	}
	return reqs
}

func describe(reqs []*agentpb.Request) string {
	var out []string
	for _, r := range reqs {
		switch k := r.Kind.(type) {
		case *agentpb.Request_Start:
			out = append(out, "start "+agent.TaskKey(k.Start.Task))
		case *agentpb.Request_Update:
			out = append(out, "update "+agent.TaskKey(k.Update.Task))
		case *agentpb.Request_Stop:
			out = append(out, "stop "+agent.TaskKey(k.Stop.Task))
		case *agentpb.Request_Forget:
			out = append(out, "forget "+agent.TaskKey(k.Forget.Task))
		}
	}
	return strings.Join(out, ", ")
}
