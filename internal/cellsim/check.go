package cellsim

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/usagecheck"
	"github.com/corralhq/corral/projections"
)

// checker holds the invariants. After every step of the world it brings a
// shadow projection up to the log's head (a replay, event by event, of
// what the store holds) and checks:
//
//  1. every master's readable state equals the replay of the log up to its
//     position (so no master ever exposes an event that is not in the log,
//     and a state loaded from a checkpoint and its tail equals the fold);
//  2. no machine holds prod limits above its capacity;
//  3. every task is in exactly one state and on at most one machine, the
//     one it names, and the projection skipped no event;
//  4. every acknowledged request's events are in the log at the positions
//     acknowledged, under its request id, and a request answered with a
//     refusal appended nothing;
//  5. appends carry non-decreasing epochs (a deposed leader never lands an
//     append after its successor), and each new leader a higher epoch;
//  6. no machine runs two processes of one task, and a process of a task
//     the projection does not place on its machine is gone within a few
//     polls of that machine by the current leader (the reconciliation
//     window): a task never runs on two machines after reconciliation.
//  7. usage windows tile time (internal/usagecheck): a machine's windows
//     neither overlap nor leave gaps, and a task's intervals never overlap
//     and lie inside its runs, through failovers, clock jumps, agent
//     restarts and lost polls.
type checker struct {
	w      *World
	err    error
	shadow *projections.State
	hashes map[int64]uint64 // position -> hash of the shadow's encoding there

	seen      map[*Master]seenState
	lastEp    int64            // epoch of the last append
	writers   map[int64]string // the process that appended at each epoch
	epochErr  error
	elected   int64 // highest LeaderElected epoch in the log
	electedBy string

	acked     map[string]master.Result
	refused   map[string]bool
	unwanted  map[int64]unwanted // by pid
	Positions int64              // checked
	usage     *usagecheck.Checker
}

// unwanted is when a process was first seen running where the projection
// does not place its task: the time, and the machine's count of polls by
// the current leader then. The window runs from the next such poll.
type unwanted struct {
	at    time.Time
	polls int64
}

type seenState struct {
	st  *projections.State
	pos int64
}

// The reconciliation window: a process of a task the projection does not
// place on its machine must be gone stopGrace (and a little slack) after
// the machine answered the third poll of the current leader since, not
// counting first contacts (which send nothing, whatever the projection
// wants): the first may have been computed before the projection changed,
// the second carries the stop, the third is to spare. A machine that cannot
// be reached answers no poll, and a leader that cannot read its own state
// (a write or a reload in flight) sends none: the window does not start.
const (
	reconcilePolls = 3
	reconcileGrace = stopGrace + 500*time.Millisecond
)

func newChecker(w *World) *checker {
	c := &checker{w: w, shadow: projections.New(), hashes: map[int64]uint64{0: hashState(projections.New())},
		writers: map[int64]string{}, seen: map[*Master]seenState{}, acked: map[string]master.Result{}, refused: map[string]bool{}, unwanted: map[int64]unwanted{},
		usage: usagecheck.New()}
	return c
}

func hashState(s *projections.State) uint64 {
	h := fnv.New64a()
	h.Write(projections.Encode(s))
	return h.Sum64()
}

func (c *checker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("at %s (step %d): %s", c.w.now.Sub(epoch0), c.w.Steps, fmt.Sprintf(format, args...))
	}
}

// appended runs under the log's lock for every committed append.
func (c *checker) appended(first, last, epoch int64, writer string) {
	// One epoch, one writer: two processes appending under one epoch are
	// two leaders (a replica restarted under its name while the old
	// process was paused must lead at a new epoch).
	if epoch > 0 && writer != "" {
		if prev, ok := c.writers[epoch]; ok && prev != writer && c.epochErr == nil {
			c.epochErr = fmt.Errorf("positions %d..%d were appended at epoch %d by %s, after appends at that epoch by %s: two leaders at one epoch", first, last, epoch, writer, prev)
		}
		c.writers[epoch] = writer
	}
	if epoch < c.lastEp && c.epochErr == nil {
		c.epochErr = fmt.Errorf("positions %d..%d were appended at epoch %d after an append at epoch %d: a deposed leader's append landed", first, last, epoch, c.lastEp)
	}
	c.lastEp = max(c.lastEp, epoch)
}

// step checks every invariant after one action of the world.
func (c *checker) step() {
	if c.err != nil {
		return
	}
	if c.epochErr != nil {
		c.fail("%v", c.epochErr)
		return
	}
	if c.advance() {
		c.checkState()
	}
	c.checkMasters()
	c.checkProcs()
}

// advance brings the shadow to the log's head; it reports whether it moved.
func (c *checker) advance() bool {
	head := c.w.log.Head()
	if c.shadow.Position == head {
		return false
	}
	for c.shadow.Position < head {
		pos := c.shadow.Position + 1
		row, _ := c.w.log.Row(pos)
		ev := row.Event
		if err := events.DecodeRow(&ev, row.Payload); err != nil {
			c.fail("position %d: %v", pos, err)
			return false
		}
		if err := projections.Apply(c.shadow, ev); err != nil {
			c.fail("replaying position %d: %v", pos, err)
			return false
		}
		if err := c.usage.Apply(ev); err != nil {
			c.fail("usage: %v", err)
			return false
		}
		if c.shadow.Skipped != 0 {
			c.fail("the projection skipped the event at %d (%s %s): a writer appended an event that does not fit the state it decided against", pos, ev.Type, ev.Stream)
			return false
		}
		if le, ok := ev.Data.(*events.LeaderElected); ok {
			// A leader whose first LeaderElected's answer was lost takes the
			// lease again at the same epoch and records it again.
			holder := le.Holder + "#" + le.Incarnation
			if le.Epoch < c.elected || (le.Epoch == c.elected && holder != c.electedBy) {
				c.fail("LeaderElected at %d: %s at epoch %d, after %s at epoch %d", pos, holder, le.Epoch, c.electedBy, c.elected)
			}
			c.elected, c.electedBy = le.Epoch, holder
		}
		c.Positions++
	}
	c.hashes[head] = hashState(c.shadow)
	if head/100 != (head-1)/100 {
		if err := c.shadow.CheckIndexes(); err != nil {
			c.fail("indexes at %d: %v", head, err)
		}
	}
	return true
}

// checkState: capacity and the one-state-one-machine rule, on the shadow.
func (c *checker) checkState() {
	s := c.shadow
	on := map[projections.TaskKey]string{}
	for _, name := range slices.Sorted(maps.Keys(s.Machines)) {
		m := s.Machines[name]
		var prod projections.Resources
		for _, t := range m.Tasks() {
			k := t.Key()
			if other, ok := on[k]; ok {
				c.fail("task %s is on machines %s and %s", k, other, name)
				return
			}
			on[k] = name
			if !t.Live() || t.Machine != name {
				c.fail("machine %s holds task %s, which is %s on %q", name, k, t.State, t.Machine)
				return
			}
			if projections.IsProd(t.Priority()) && t.AllocIndex < 0 {
				prod = prod.Add(t.Limit)
			}
		}
		for _, a := range m.Allocs() {
			if projections.IsProd(a.Set.Priority) {
				prod = prod.Add(a.Set.Resources)
			}
		}
		if !prod.LessEq(m.Capacity) {
			c.fail("machine %s holds prod limits %v above its capacity %v", name, prod, m.Capacity)
			return
		}
	}
	pending := map[projections.TaskKey]bool{}
	for _, t := range s.PendingTasks() {
		pending[t.Key()] = true
	}
	for _, j := range s.SortedJobs() {
		for _, t := range j.Tasks {
			if t == nil {
				continue
			}
			k := t.Key()
			switch t.State {
			case projections.TaskPending:
				if !pending[k] || on[k] != "" {
					c.fail("pending task %s: in the pending index %v, on machine %q", k, pending[k], on[k])
				}
			case projections.TaskScheduled, projections.TaskRunning:
				if pending[k] || on[k] != t.Machine {
					c.fail("%s task %s names machine %s, is on %q, pending %v", t.State, k, t.Machine, on[k], pending[k])
				}
			case projections.TaskDead:
				if pending[k] || on[k] != "" || t.End == projections.NoEnd {
					c.fail("dead task %s: pending %v, on %q, how %v", k, pending[k], on[k], t.End)
				}
			default:
				c.fail("task %s in state %d", k, t.State)
			}
			if c.err != nil {
				return
			}
		}
	}
}

// checkMasters compares each master's readable state with the replay.
func (c *checker) checkMasters() {
	head := c.shadow.Position
	for _, m := range c.w.processes() {
		if m.node.down || m.st == nil || m.locked {
			continue
		}
		if prev := c.seen[m]; prev.st == m.st && prev.pos == m.st.Position {
			continue
		}
		pos := m.st.Position
		c.seen[m] = seenState{m.st, pos}
		if pos > head {
			c.fail("%s exposes a state at position %d, beyond the log's head %d: it holds events that are not in the log", m.name, pos, head)
			return
		}
		want, ok := c.hashes[pos]
		if !ok {
			s, err := projections.StateAt(context.Background(), c.w.log.Open(c.w.clock), pos)
			if err != nil {
				c.fail("replaying to %d: %v", pos, err)
				return
			}
			want = hashState(s)
			c.hashes[pos] = want
		}
		if got := hashState(m.st); got != want {
			c.fail("%s's state at position %d differs from the replay of the log to %d", m.name, pos, pos)
			return
		}
	}
}

// acknowledged checks an answer a client got.
func (c *checker) acknowledged(id string, res master.Result) {
	res.Appended = nil // the positions are what it checks
	c.acked[id] = res
	stored, ok := c.w.log.Key(id)
	if res.Events == 0 && !res.Duplicate {
		if ok {
			c.fail("request %s was answered \"nothing to do\" but appended %d..%d", id, stored.First, stored.Last)
		}
		return
	}
	if !ok || stored.First != res.First || stored.Last != res.Last {
		c.fail("request %s was acknowledged at %d..%d; the log has it at %+v (found %v)", id, res.First, res.Last, stored, ok)
		return
	}
	for p := res.First; p <= res.Last; p++ {
		if row, _ := c.w.log.Row(p); row.IdempotencyKey != id {
			c.fail("request %s acknowledged at %d..%d, but position %d belongs to %q", id, res.First, res.Last, p, row.IdempotencyKey)
			return
		}
	}
}

// refusedAnswer checks a refusal a client got: nothing of the request may be
// in the log.
func (c *checker) refusedAnswer(id string, err error) {
	c.refused[id] = true
	if stored, ok := c.w.log.Key(id); ok {
		c.fail("request %s was answered with a refusal (%v) but its events are in the log at %d..%d", id, err, stored.First, stored.Last)
	}
}

// checkProcs checks the machines' processes against the projection.
func (c *checker) checkProcs() {
	s := c.shadow
	one := map[[2]string]int64{}
	for _, pid := range slices.Sorted(maps.Keys(c.w.procs)) {
		p := c.w.procs[pid]
		k := [2]string{p.machine, p.task}
		if other, ok := one[k]; ok {
			c.fail("machine %s runs task %s twice: pids %d and %d", p.machine, p.task, other, pid)
			return
		}
		one[k] = pid
		t := taskOf(s, p.task)
		if t != nil && t.Live() && t.Machine == p.machine {
			delete(c.unwanted, pid)
			continue
		}
		a := c.w.agents[p.machine]
		first, ok := c.unwanted[pid]
		if !ok {
			first = unwanted{at: c.w.now, polls: a.leaderPolls}
			c.unwanted[pid] = first
		}
		if a.leaderPolls-first.polls >= reconcilePolls && c.w.now.Sub(a.leaderPollAt(first.polls+reconcilePolls)) >= reconcileGrace {
			where := "nowhere"
			if t != nil {
				where = fmt.Sprintf("%s on %q", t.State, t.Machine)
			}
			c.fail("task %s still runs on %s as pid %d, %s and %d polls of that machine by the leader after the projection stopped placing it there; the projection has it %s",
				p.task, p.machine, pid, c.w.now.Sub(first.at), a.leaderPolls-first.polls, where)
			return
		}
	}
	for pid := range c.unwanted {
		if c.w.procs[pid] == nil {
			delete(c.unwanted, pid)
		}
	}
}

// taskOf finds a task by its agent key user/job/index.
func taskOf(s *projections.State, key string) *projections.Task {
	var user, job string
	var index int32
	for i, j := 0, 0; i < len(key); i++ {
		if key[i] != '/' {
			continue
		}
		if user == "" {
			user, j = key[:i], i+1
			continue
		}
		job = key[j:i]
		var n int
		if _, err := fmt.Sscanf(key[i+1:], "%d", &n); err != nil {
			return nil
		}
		index = int32(n)
		break
	}
	return s.Task(user, job, index)
}

// final runs once every fault has healed and the cell had time to settle.
func (c *checker) final() error {
	c.step()
	if c.err != nil {
		return c.err
	}
	var leader *Master
	for _, m := range c.w.masters {
		if m.leading {
			leader = m
		}
	}
	if leader == nil {
		return fmt.Errorf("after healing and %s: no master leads", c.w.cfg.Settle)
	}
	if err := c.converged(); err != nil {
		return err
	}
	if err := c.noneLeftBehind(); err != nil {
		return err
	}
	if err := c.reloadsEqual(); err != nil {
		return err
	}
	for id, res := range c.acked {
		c.acknowledged(id, res)
	}
	return c.err
}

// converged checks that what runs is what the projection says runs, and
// that what it placed on a machine that is up has started.
func (c *checker) converged() error {
	s := c.shadow
	for _, j := range s.SortedJobs() {
		for _, t := range j.Tasks {
			if t == nil {
				continue
			}
			// Reservations still move with usage after the heal, so the
			// scheduler may have placed something a moment ago.
			if t.State == projections.TaskScheduled && s.Machines[t.Machine].State == projections.MachineUp &&
				c.w.now.Sub(time.UnixMicro(t.SinceUS)) > 2*pollInterval+time.Second {
				return fmt.Errorf("after healing: task %s is still only scheduled on %s, since %s", t.Key(), t.Machine, time.UnixMicro(t.SinceUS).Sub(epoch0))
			}
			if t.State != projections.TaskRunning {
				continue
			}
			p := c.w.procs[t.Pid]
			if p == nil || p.machine != t.Machine || p.task != agentKey(t.Key()) {
				return fmt.Errorf("after healing: task %s runs on %s as pid %d in the projection, but no such process runs there (%+v)", t.Key(), t.Machine, t.Pid, p)
			}
		}
	}
	return nil
}

// noneLeftBehind checks that no task is left behind on a version its job
// no longer wants: a live job whose live tasks run an older spec version
// has a roll in flight or held by its disruption budget (a task that does
// not serve: a replacement stopped, waiting to be placed, or running and
// not yet healthy, or any task waiting for room), or an update that waits
// on promotion or has halted.
func (c *checker) noneLeftBehind() error {
	for _, j := range c.shadow.SortedJobs() {
		if j.Dead() {
			continue
		}
		var behind *projections.Task
		inFlight := false
		for _, t := range j.Tasks {
			if t == nil || t.State == projections.TaskDead {
				continue
			}
			if t.SpecVersion != j.Current && behind == nil {
				behind = t
			}
			if !t.Serving(c.w.now.UnixMicro()) {
				inFlight = true
			}
		}
		// An update that waits on a person (its canaries serve and await
		// promotion) or failed (halted: nothing more rolls) keeps the
		// rest behind by design.
		if phase, _ := j.UpdatePhase(c.w.now.UnixMicro()); phase == projections.UpdateAwaitingPromote || phase == projections.UpdateHalted {
			continue
		}
		if behind != nil && !inFlight {
			return fmt.Errorf("after healing: task %s runs spec version %d, its job wants %d, and no roll is in flight (update open: %v)",
				behind.Key(), behind.SpecVersion, j.Current, j.Update != nil)
		}
	}
	return nil
}

// reloadsEqual checks that a full replay and a load (newest checkpoint
// and its tail) equal the shadow.
func (c *checker) reloadsEqual() error {
	conn := c.w.log.Open(c.w.clock)
	full := projections.New()
	if err := projections.Replay(context.Background(), conn, full, c.shadow.Position); err != nil {
		return err
	}
	loaded, err := projections.Load(context.Background(), conn)
	if err != nil {
		return err
	}
	want := hashState(c.shadow)
	if hashState(full) != want || hashState(loaded) != want {
		return fmt.Errorf("after the run: a full replay or a load from the newest checkpoint differs from the state folded event by event")
	}
	return nil
}

func agentKey(k projections.TaskKey) string {
	return fmt.Sprintf("%s/%s/%d", k.User, k.Job, k.Index)
}
