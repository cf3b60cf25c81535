package master

import (
	"sync"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/scheduler"
)

// SchedulerMetrics receives what each scheduling pass did (package ops
// turns it into Prometheus series). It is called from the scheduling loop,
// outside the state's lock, and must not block.
type SchedulerMetrics interface {
	// PassDone reports one pass: how long scheduler.Schedule took and its
	// plan (placements proposed, preemptions, what stays pending and why).
	PassDone(took time.Duration, plan *scheduler.Plan)
}

// LinkMetrics receives what each poll of an agent did. It is called by the
// poll's goroutine and must not block.
type LinkMetrics interface {
	// PollDone reports one poll of machine: took is how long the answered
	// poll took (0 when unanswered), interval the time since the machine's
	// previous answered poll (0 when unknown), err why it went unanswered.
	PollDone(machine string, took, interval time.Duration, err error)
}

// AgentSeen is what the leader's link last saw of a machine's agent. It is
// not in the log: it is the leader's observation, gone with its term.
type AgentSeen struct {
	LastPoll    time.Time     // the last answered poll; zero if none
	MissedPolls int           // unanswered in a row since
	ClockSkew   time.Duration // the agent's clock minus the master's, at LastPoll
	CgroupMode  string        // v1, v2, sampling
	CgroupNote  string
}

// agentTable holds AgentSeen by machine name.
type agentTable struct{ m sync.Map }

func (t *agentTable) get(name string) (AgentSeen, bool) {
	v, ok := t.m.Load(name)
	if !ok {
		return AgentSeen{}, false
	}
	return v.(AgentSeen), true
}

// Agent returns what this replica's link last saw of a machine's agent;
// false on a follower or before the first poll of the machine.
func (m *Master) Agent(machine string) (AgentSeen, bool) {
	if !m.Leading() {
		return AgentSeen{}, false
	}
	return m.agents.get(machine)
}

// polled records an answered poll that started at started and ended at now.
func (l *link) polled(ml *machineLink, started, now time.Time, st *agentpb.AgentState) {
	took := now.Sub(started)
	seen := AgentSeen{LastPoll: now, CgroupMode: st.GetCgroupMode().Label(), CgroupNote: st.GetCgroupNote()}
	if us := st.GetTimeUs(); us != 0 {
		// The agent took its time somewhere within the poll: take the middle.
		seen.ClockSkew = time.UnixMicro(us).Sub(started.Add(took / 2))
	}
	l.m.agents.m.Store(ml.name, seen)
	if l.cfg.Metrics != nil {
		var interval time.Duration
		if !ml.lastOK.IsZero() && ml.misses == 0 {
			interval = now.Sub(ml.lastOK)
		}
		l.cfg.Metrics.PollDone(ml.name, took, interval, nil)
	}
}

// unanswered records a poll the agent did not answer; ml.misses counts it.
func (l *link) unanswered(ml *machineLink, err error) {
	seen, _ := l.m.agents.get(ml.name)
	seen.MissedPolls = ml.misses
	l.m.agents.m.Store(ml.name, seen)
	if l.cfg.Metrics != nil {
		l.cfg.Metrics.PollDone(ml.name, 0, 0, err)
	}
}
