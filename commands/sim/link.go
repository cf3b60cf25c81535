package sim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
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
	m    *Master
	term int
	by   map[string]*mlink
}

type mlink struct {
	name        string
	busy        bool
	next        time.Time
	polledVer   int64
	down        bool
	version     int64
	last        *agentpb.AgentState
	synced      bool
	lastOK      time.Time
	misses      int
	acked       uint64
	dropped     uint64
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

// The link's settings: Borg's three missed polls; a short usage window so
// that reservations move within a run.
const (
	pollInterval = 2 * time.Second
	missedPolls  = 3
	usageWindow  = 30 * time.Second
	stopGrace    = time.Second
)

var linkAdmin = commands.Meta{Actor: commands.Actor{User: "link", Admin: true}}

func newLink(m *Master) *simLink { return &simLink{m: m, term: m.term, by: map[string]*mlink{}} }

func (l *simLink) live() bool { return l.m.term == l.term && l.m.link == l }

func (l *simLink) start() {
	var tick func()
	tick = func() {
		if !l.live() {
			return
		}
		l.run()
		l.m.at(pollInterval/8, tick)
	}
	tick()
}

// run starts the polls that are due.
func (l *simLink) run() {
	l.m.view(func(s *projections.State) {
		if !l.live() {
			return
		}
		now := l.m.now()
		for _, name := range slices.Sorted(maps.Keys(s.Machines)) {
			m := s.Machines[name]
			ml := l.by[name]
			if ml == nil {
				ml = &mlink{name: name, usage: map[projections.TaskKey]*usageAcc{}, windowStart: now, polledVer: -1}
				l.by[name] = ml
			}
			ml.version, ml.down = m.Version, m.State == projections.MachineDown
		}
		for name := range l.by {
			if s.Machines[name] == nil {
				delete(l.by, name)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(l.by)) {
			ml := l.by[name]
			if ml.busy || (now.Before(ml.next) && (ml.down || ml.version == ml.polledVer)) {
				continue
			}
			l.poll(ml)
		}
	})
}

// poll sends a machine its outstanding requests and records its report.
// It runs with the state readable.
func (l *simLink) poll(ml *mlink) {
	ml.busy = true
	ml.next = l.m.now().Add(pollInterval)
	down := ml.down
	var reqs []*agentpb.Request
	first := ml.last == nil
	if !first {
		reqs = l.requests(ml)
	}
	finish := func(st *agentpb.AgentState, err error) {
		if !l.live() {
			return
		}
		if err != nil {
			l.missed(ml, down, err)
			return
		}
		now := l.m.now()
		ml.misses, ml.lastOK, ml.last, ml.synced = 0, now, st, false
		l.accumulate(ml, st)
		var usage []commands.UsageWindow
		windowDue := now.Sub(ml.windowStart) >= usageWindow
		if windowDue {
			if w := l.window(ml); len(w.Tasks) > 0 {
				usage = append(usage, w)
			}
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
				ml.usage, ml.windowStart = map[projections.TaskKey]*usageAcc{}, now
			}
			ml.synced, ml.acked, ml.dropped = true, st.LastEventSeq, st.EventsDropped
		})
	}
	l.send(ml, reqs, !first, func(st *agentpb.AgentState, err error) {
		if err == nil && first && l.live() {
			// First contact: now that the agent's state is known, send what
			// it lacks right away.
			ml.last, ml.synced = st, false
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

// missed counts a poll that got no answer; MissedPolls in a row mark the
// machine down and its tasks lost.
func (l *simLink) missed(ml *mlink, down bool, err error) {
	ml.misses++
	if ml.misses < missedPolls {
		ml.busy = false
		return
	}
	ml.last, ml.synced = nil, false
	if down {
		ml.busy = false
		return
	}
	l.m.logf("%s missed %d polls: %v", ml.name, ml.misses, err)
	l.m.do(commands.ReportAgentState{Meta: linkAdmin, Machine: ml.name, Unreachable: true, MissedPolls: int32(ml.misses)}, func(_ master.Result, err error) {
		if l.live() {
			ml.busy = false
		}
	})
}

// record turns one reply into ReportAgentState commands, in link.go's
// order: refused starts, then each event alone, then the full state; done
// gets the first error, or nil once all are in the log.
func (l *simLink) record(ml *mlink, st *agentpb.AgentState, reqs []*agentpb.Request, usage []commands.UsageWindow, done func(error)) {
	l.m.view(func(s *projections.State) { l.recordIn(s, ml, st, reqs, usage, done) })
}

func (l *simLink) recordIn(s *projections.State, ml *mlink, st *agentpb.AgentState, reqs []*agentpb.Request, usage []commands.UsageWindow, done func(error)) {
	neutral := make([]commands.AgentTask, len(st.Tasks))
	index := make(map[projections.TaskKey]int, len(st.Tasks))
	for i, ts := range st.Tasks {
		k := master.TaskKeyOf(ts.Task)
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
	var cmds []commands.ReportAgentState
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
		at := commands.AgentTask{Task: master.TaskKeyOf(s.Task), SpecVersion: s.SpecVersion, State: commands.AgentFailed, ExitCode: -1,
			Reason: agent.ReasonStartFailed, Message: "the agent refused to start it: " + res.Error}
		cmds = append(cmds, commands.ReportAgentState{Meta: linkAdmin, Machine: ml.name, Tasks: one(at)})
	}
	recorded := master.RecordedStarts(s, ml.name, st.Events)
	lastOf := make(map[projections.TaskKey]uint64, len(st.Events))
	// The log's watermark of the machine's events (link.go): everything
	// before an event whose key the log holds was recorded then.
	through := ml.acked
	for _, ev := range st.Events {
		lastOf[master.TaskKeyOf(ev.Task)] = ev.Seq
		if _, _, ok := l.m.recent.Get(commands.Meta{Actor: linkAdmin.Actor, RequestID: master.AgentEventKey(ml.name, ev)}.Key()); ok {
			through = max(through, ev.Seq)
		}
	}
	for _, ev := range st.Events {
		if ev.Seq <= through || ev.Seq <= recorded[master.TaskKeyOf(ev.Task)] {
			continue
		}
		at, ok := master.AgentEventTask(ev)
		if !ok {
			continue
		}
		if ev.Seq == lastOf[at.Task] && (at.State == commands.AgentRunning || at.State == commands.AgentBackoff) {
			continue // the full state below says the same
		}
		meta := linkAdmin
		meta.RequestID = master.AgentEventKey(ml.name, ev)
		cmds = append(cmds, commands.ReportAgentState{Meta: meta, Machine: ml.name, Tasks: one(at)})
	}
	fallback := st.EventsDropped > ml.dropped
	full := commands.ReportAgentState{Meta: linkAdmin, Machine: ml.name, Tasks: make([]commands.AgentTask, 0, len(st.Tasks)), Usage: usage}
	for _, ts := range st.Tasks {
		if master.AgentTaskEnded(ts.State) && !fallback {
			full.Tasks = append(full.Tasks, neutral[index[master.TaskKeyOf(ts.Task)]])
			continue
		}
		full.Tasks = append(full.Tasks, commands.AgentTask{Task: master.TaskKeyOf(ts.Task), SpecVersion: ts.SpecVersion,
			State: commands.AgentTaskState(ts.State), Pid: ts.Pid, ExitCode: ts.ExitCode, Signal: ts.Signal,
			Restarts: ts.Restarts, Reason: ts.Reason, Message: ts.Message})
	}
	cmds = append(cmds, full)
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
		evs, err := commands.Decide(s, cmd, commands.ClockFunc(l.m.now))
		if err == nil && len(evs) == 0 {
			done(nil)
			return
		}
		l.m.do(cmd, func(_ master.Result, err error) { done(err) })
	})
}

// requests compares what the projection places on the machine with what
// the agent last reported (link.go's requests). The state must be readable.
func (l *simLink) requests(ml *mlink) []*agentpb.Request {
	s := l.m.st
	reported := make(map[projections.TaskKey]*agentpb.TaskStatus, len(ml.last.GetTasks()))
	for _, t := range ml.last.GetTasks() {
		reported[master.TaskKeyOf(t.Task)] = t
	}
	id := func() string { ml.reqSeq++; return ml.name + "-" + strconv.FormatInt(ml.reqSeq, 10) }
	var reqs []*agentpb.Request
	m := s.Machines[ml.name]
	if m == nil {
		return nil
	}
	ml.polledVer = m.Version
	wanted := make(map[projections.TaskKey]bool, m.TaskCount())
	for _, t := range m.Tasks() {
		k := t.Key()
		wanted[k] = true
		ref := &events.TaskRef{User: k.User, Job: k.Job, Index: k.Index}
		rep := reported[k]
		start := (rep == nil || (master.AgentTaskEnded(rep.State) && ml.synced)) && t.State == projections.TaskScheduled
		update := rep != nil && rep.SpecVersion < t.SpecVersion && master.AgentTaskLive(rep.State)
		if !start && !update {
			continue
		}
		spec, err := master.TaskSpec(t)
		switch {
		case err != nil:
			panic(fmt.Sprintf("sim: task %v placed on %s: its spec does not resolve: %v", k, ml.name, err))
		case start:
			reqs = append(reqs, agent.StartRequest(id(), ref, t.SpecVersion, spec))
		default:
			reqs = append(reqs, agent.UpdateRequest(id(), ref, t.SpecVersion, spec))
		}
	}
	keys := slices.SortedFunc(maps.Keys(reported), func(a, b projections.TaskKey) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Job, b.Job), cmp.Compare(a.Index, b.Index))
	})
	for _, k := range keys {
		rep := reported[k]
		if wanted[k] {
			continue
		}
		ref := &events.TaskRef{User: k.User, Job: k.Job, Index: k.Index}
		if master.AgentTaskLive(rep.State) {
			reqs = append(reqs, agent.StopRequest(id(), ref, "not placed on "+ml.name+" by the master", stopGrace.Milliseconds()))
		} else if rep.State != agentpb.TaskState_TASK_STATE_STOPPING && ml.synced {
			reqs = append(reqs, agent.ForgetRequest(id(), ref))
		}
	}
	return reqs
}

// accumulate adds a poll's usage samples to the machine's open window.
func (l *simLink) accumulate(ml *mlink, st *agentpb.AgentState) {
	for _, u := range st.Usage {
		ref := master.TaskKeyOf(u.Task)
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
		acc.endUS = max(acc.endUS, u.WindowEndUs)
		acc.cpu += w.CpuCoreSeconds
		acc.memByteSecs += float64(w.MemoryBytes) * secs
		acc.seconds += secs
		acc.memMax = max(acc.memMax, w.MemoryMaxBytes, u.MemoryPeakBytes)
		acc.disk = u.DiskBytes
	}
}

// window sums the machine's open usage window, tasks in key order.
func (l *simLink) window(ml *mlink) commands.UsageWindow {
	var w commands.UsageWindow
	keys := slices.SortedFunc(maps.Keys(ml.usage), func(a, b projections.TaskKey) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Job, b.Job), cmp.Compare(a.Index, b.Index))
	})
	for _, ref := range keys {
		acc := ml.usage[ref]
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
