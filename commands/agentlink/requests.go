package agentlink

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Machine is what the link keeps of one agent between polls, beyond the
// projection.
type Machine struct {
	Name string
	// Last is the agent's last report; nil before the first contact (and
	// after the machine was marked down).
	Last *agentpb.AgentState
	// Synced: Last's events and ended tasks are in the log, so an ended
	// task placed here again is a new placement and is started.
	Synced bool
	// RequestSeq numbers the requests sent to the agent.
	RequestSeq int64
}

// Unresolved is a placed task whose spec does not resolve (a master bug):
// nothing is sent for it.
type Unresolved struct {
	Task projections.TaskKey
	Err  error
}

// Requests compares what s places on the machine with what its agent last
// reported, and returns the starts, updates, stops and forgets that make
// the agent match, and the machine version they were computed against
// (-1 when s does not know the machine). A task placed elsewhere meanwhile
// (the machine was down) is stopped, so a task never runs twice. A task
// placed here again after it ended here is started again once its end is
// in the log. At most maxStarts tasks are started: the rest wait for a
// later poll.
func Requests(s *projections.State, ml *Machine, maxStarts int, stopGrace time.Duration) (reqs []*agentpb.Request, version int64, bad []Unresolved) {
	m := s.Machines[ml.Name]
	if m == nil {
		return nil, -1, nil
	}
	reported := make(map[projections.TaskKey]*agentpb.TaskStatus, len(ml.Last.GetTasks()))
	for _, t := range ml.Last.GetTasks() {
		reported[TaskKeyOf(t.Task)] = t
	}
	todos, stale, wanted := news(m, ml, reported)
	reqs, bad = ml.startsAndUpdates(todos, maxStarts)
	for _, k := range stale {
		ref := &events.TaskRef{User: k.User, Job: k.Job, Index: k.Index}
		reqs = append(reqs, agent.StopRequest(ml.nextRequestID(), ref, "a run of an earlier submission of the task", stopGrace.Milliseconds()))
	}
	reqs = append(reqs, ml.stopsAndForgets(reported, wanted, stopGrace)...)
	return reqs, m.Version, bad
}

// nextRequestID names the next request to the machine's agent.
func (ml *Machine) nextRequestID() string {
	ml.RequestSeq++
	return ml.Name + "-" + strconv.FormatInt(ml.RequestSeq, 10)
}

// todo is a task to start or update.
type todo struct {
	t     *projections.Task
	start bool
}

// news finds the tasks to start or update, in key order, and the stale runs
// to stop: a pass over the machine's tasks in no order, then a sort of the
// few that need news, so that the same state always sends the same
// requests. wanted is every task placed on the machine.
func news(m *projections.Machine, ml *Machine, reported map[projections.TaskKey]*agentpb.TaskStatus) (todos []todo, stale []projections.TaskKey, wanted map[projections.TaskKey]bool) {
	wanted = make(map[projections.TaskKey]bool, m.TaskCount())
	m.RangeTasks(func(t *projections.Task) bool {
		k := t.Key()
		wanted[k] = true
		rep := reported[k]
		start := (rep == nil || (AgentTaskEnded(rep.State) && ml.Synced)) && t.State == projections.TaskScheduled
		// A run of another submission than this placement's, or of a
		// later spec version (spec versions only grow within one
		// incarnation of a job): the job was killed and submitted again
		// under its name, or the task's run ended in the log (evicted,
		// lost) and it was placed here again, before the agent heard the
		// stop. It can be neither adopted as the new run nor updated into
		// it, nor left running beside it: stop it, and the new run starts
		// once its end is in the log.
		other := rep != nil && AgentTaskLive(rep.State) && t.State == projections.TaskScheduled &&
			(rep.SpecVersion > t.SpecVersion || commands.OtherSubmission(t, rep.Submission))
		update := rep != nil && rep.SpecVersion < t.SpecVersion && AgentTaskLive(rep.State) && !other
		if start || update {
			todos = append(todos, todo{t, start})
		}
		if other {
			stale = append(stale, k)
		}
		return true
	})
	slices.SortFunc(todos, func(a, b todo) int { return compareKeys(a.t.Key(), b.t.Key()) })
	slices.SortFunc(stale, compareKeys)
	return todos, stale, wanted
}

// startsAndUpdates are the requests for todos, at most maxStarts starts;
// the rest start with a later poll.
func (ml *Machine) startsAndUpdates(todos []todo, maxStarts int) (reqs []*agentpb.Request, bad []Unresolved) {
	starts := 0
	for _, td := range todos {
		if td.start {
			if starts >= maxStarts {
				continue // with a later poll
			}
			starts++
		}
		k := td.t.Key()
		spec, err := TaskSpec(td.t)
		ref := &events.TaskRef{User: k.User, Job: k.Job, Index: k.Index}
		switch {
		case err != nil:
			bad = append(bad, Unresolved{k, err})
		case td.start:
			reqs = append(reqs, agent.StartRequest(ml.nextRequestID(), ref, td.t.SpecVersion, td.t.Seq, spec))
		default:
			reqs = append(reqs, agent.UpdateRequest(ml.nextRequestID(), ref, td.t.SpecVersion, spec))
		}
	}
	return reqs, bad
}

// stopsAndForgets stops the runs of tasks the agent reports and the master
// did not place there, and lets the agent drop those whose end is in the
// log.
func (ml *Machine) stopsAndForgets(reported map[projections.TaskKey]*agentpb.TaskStatus, wanted map[projections.TaskKey]bool, stopGrace time.Duration) []*agentpb.Request {
	var reqs []*agentpb.Request
	var unwanted []projections.TaskKey
	for k := range reported {
		if !wanted[k] {
			unwanted = append(unwanted, k)
		}
	}
	slices.SortFunc(unwanted, compareKeys)
	for _, k := range unwanted {
		rep := reported[k]
		ref := &events.TaskRef{User: k.User, Job: k.Job, Index: k.Index}
		if AgentTaskLive(rep.State) {
			reqs = append(reqs, agent.StopRequest(ml.nextRequestID(), ref, "not placed on "+ml.Name+" by the master", stopGrace.Milliseconds()))
		} else if rep.State != agentpb.TaskState_TASK_STATE_STOPPING && ml.Synced {
			// Its end is in the log: the agent may drop it.
			reqs = append(reqs, agent.ForgetRequest(ml.nextRequestID(), ref))
		}
	}
	return reqs
}

func compareKeys(a, b projections.TaskKey) int {
	return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Job, b.Job), cmp.Compare(a.Index, b.Index))
}

// TaskSpec is what the agent needs to run t: agent.ResolveSpec, the one
// rule, of its job's spec at its version, its index and its ports. An
// error means a placement that does not match its spec, a master bug: the
// link logs it and starts nothing rather than send what the agent would
// refuse.
func TaskSpec(t *projections.Task) (*agentpb.TaskSpec, error) {
	return agent.ResolveSpec(t.Spec(), t.Index, t.Ports)
}

// Due says whether a machine's next poll is due at now: an interval after
// the previous one started (next), whether it was answered or not, or at
// once when the machine's placements changed since the last requests were
// computed, unless it is down. A next more than an interval ahead means
// the clock went back: the poll is due rather than an hour late.
func Due(now, next time.Time, interval time.Duration, down, placementsChanged bool) bool {
	return !now.Before(next) || next.Sub(now) > interval || (placementsChanged && !down)
}
