package cellsim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/commands/writer"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/memstore"
	"github.com/corralhq/corral/projections"
)

// Master is one simulated replica. It follows commands/master's write path
// and leadership step for step (master.go, write.go), with every store call
// a message to the database that can be delayed, lost or cut off:
//
//   - it loads the newest checkpoint and replays the tail when it starts,
//     and tails the log by position while it runs;
//   - it campaigns for the lease every TTL/3, renews it while it leads, and
//     steps down when the lease is lost, or has expired on its own clock
//     while the store could not be reached;
//   - taking over, it replays to the head and appends LeaderElected under
//     its epoch, then runs the scheduler and the agent link;
//   - its writer decides a batch of queued commands against the state
//     (applying them speculatively, the state locked), appends them with
//     one AppendMany carrying the expected position, the epoch and each
//     request id, and on any failure reloads the state from the log;
//     ErrFenced deposes it, and a batch holding a retried request is redone
//     one command at a time.
type Master struct {
	w    *World
	node *node
	name string
	// incarnation names the running process (a new one at every start):
	// it holds the lease as name#incarnation, as master.Master does.
	incarnation string
	skew        time.Duration // its host's clock minus the true time
	conn        *memstore.Store

	st      *projections.State // nil until loaded
	leading bool               // master.Master.leading: writes are accepted
	elected bool               // the leader's loops run (campaign's stopLeader != nil)
	term    int                // moves at every change of leadership; stale callbacks check it
	lease   events.Lease

	writes  []*op
	locked  bool // a batch (or a reload) is in flight: nobody may read the state
	waiters []func()
	recent  *writer.Recent

	cpPos int64
	cpAt  time.Time

	committedBase int64 // the position before the batch in flight

	link  *simLink
	sched *simSched
	kick  bool // a wake-up of the link and the scheduler is queued
	tail  bool // a tail read is in flight
}

type op struct {
	cmd    commands.Command
	single bool // commit alone (writer.Op.Single)
	done   func(master.Result, error)
}

// Timing of the masters, as commands/master's defaults and failover test.
const (
	leaseTTL      = 6 * time.Second
	tailEvery     = 100 * time.Millisecond
	storeTimeout  = 2 * time.Second // a store call's deadline
	maxBatch      = 64
	cpEveryEvents = 250 // small, so that restarts load checkpoints and replay tails
	cpEvery       = time.Minute
)

func (w *World) newMaster(name string) *Master {
	return &Master{w: w, node: &node{name: name}, name: name}
}

// holder is what the process holds the lease as (master.Master.Holder).
func (m *Master) holder() string { return m.name + "#" + m.incarnation }

// now is the master host's clock, which may be skewed or jump.
func (m *Master) now() time.Time { return m.w.now.Add(m.skew) }

func (m *Master) at(d time.Duration, fn func()) { m.w.at(m.node, d, fn) }

// store sends fn to the database on this incarnation's connection, taken
// now: a request still in flight when the process crashes reaches the
// store as the old process's, never the next incarnation's.
func (m *Master) store(fn func(conn *memstore.Store) (any, error), reply func(any, error)) {
	conn := m.conn
	m.w.store(m.node, storeTimeout, func() (any, error) { return fn(conn) }, reply)
}

func (m *Master) logf(format string, args ...any) {
	m.w.tracef("%s: %s", m.name, fmt.Sprintf(format, args...))
}

// ---- life -----------------------------------------------------------------

// start is a fresh process: it loads the state, then tails and campaigns.
func (m *Master) start() {
	m.node.down = false
	m.st, m.leading, m.elected, m.writes, m.locked, m.waiters = nil, false, false, nil, false, nil
	m.recent = writer.NewRecent(1 << 20)
	m.link, m.sched, m.kick, m.tail = nil, nil, false, false
	m.term++
	m.w.incarnations++
	m.incarnation = fmt.Sprint(m.w.incarnations)
	m.conn = m.w.log.OpenAs(m.now, m.holder())
	m.load()
}

func (m *Master) load() {
	m.store(func(conn *memstore.Store) (any, error) { return loadNoting(conn, -1) }, func(v any, err error) {
		if err != nil {
			m.logf("loading the state: %v; retrying", err)
			m.at(time.Second, m.load)
			return
		}
		l := v.(loaded)
		m.w.Loads++
		m.st = l.st
		m.noteRequests(l.tail)
		m.cpPos, m.cpAt = m.st.Position, m.now()
		m.w.loaded(m)
		m.logf("state loaded at %d", m.st.Position)
		m.at(0, m.tailTick)
		m.at(0, m.campaign)
	})
}

// crash is kill -9: memory gone, in-flight requests still travel.
func (m *Master) crash() {
	m.node.down = true
	m.node.inc++
	m.term++
	m.st, m.leading, m.elected, m.locked = nil, false, false, false
	m.logf("crashed")
}

// ---- reading the state --------------------------------------------------------

// view runs fn on the state once no batch is in flight, as a reader taking
// master.Master's read lock would.
func (m *Master) view(fn func(s *projections.State)) {
	if m.locked {
		m.waiters = append(m.waiters, func() { fn(m.st) })
		return
	}
	fn(m.st)
}

func (m *Master) unlock() {
	m.locked = false
	ws := m.waiters
	m.waiters = nil
	for _, fn := range ws {
		if m.locked {
			m.waiters = append(m.waiters, fn)
			continue
		}
		fn()
	}
	m.wake()
	m.pump()
}

// wake lets the link and the scheduler see new events (master.applied).
func (m *Master) wake() {
	if m.kick || !m.leading {
		return
	}
	m.kick = true
	term := m.term
	m.at(5*time.Millisecond, func() {
		m.kick = false
		if m.term != term || !m.leading {
			return
		}
		m.link.run(0) // woken by placements: on time
		m.sched.run(false)
	})
}

func (m *Master) tailTick() {
	m.at(tailEvery, m.tailTick)
	if m.st == nil || m.locked || m.tail {
		return
	}
	m.tail = true
	from := m.st.Position + 1
	m.store(func(conn *memstore.Store) (any, error) { return conn.Read(context.Background(), from, 1000) }, func(v any, err error) {
		m.tail = false
		if err != nil || m.st == nil || m.locked || m.st.Position != from-1 {
			return // read again at the next tick
		}
		evs := v.([]events.Event)
		if len(evs) == 0 {
			return
		}
		if err := projections.ApplyAll(m.st, evs); err != nil {
			m.logf("tail: %v", err)
		}
		m.noteRequests(evs)
		m.wake()
	})
}

// ---- leadership ---------------------------------------------------------------

func (m *Master) campaign() {
	next := func() { m.at(leaseTTL/3, m.campaign) }
	if m.st == nil {
		next()
		return
	}
	if !m.elected {
		holder := m.holder()
		m.store(func(conn *memstore.Store) (any, error) {
			return conn.AcquireLease(context.Background(), events.LeaderLease, holder, leaseTTL)
		}, func(v any, err error) {
			defer next()
			if err != nil {
				if !errors.Is(err, events.ErrLeaseHeld) {
					m.logf("campaigning: %v", err)
				}
				return
			}
			m.lease = v.(events.Lease)
			m.elected = true
			m.term++
			m.becomeLeader()
		})
		return
	}
	l := m.lease
	m.store(func(conn *memstore.Store) (any, error) { return conn.RenewLease(context.Background(), l, leaseTTL) }, func(v any, err error) {
		defer next()
		if !m.elected || m.lease.Epoch != l.Epoch {
			return
		}
		if err == nil {
			m.lease = v.(events.Lease)
		} else if keep, why := events.KeepLeading(l, err, m.now()); !keep {
			m.stepDown(why)
		}
	})
}

// becomeLeader catches up with the log and records the election, the state
// locked throughout, as master.becomeLeader does under the write lock.
func (m *Master) becomeLeader() {
	if m.locked {
		m.waiters = append(m.waiters, m.becomeLeader)
		return
	}
	m.locked = true
	term, l := m.term, m.lease
	fail := func(err error) {
		m.logf("taking over as leader: %v", err)
		if m.term == term {
			m.elected = false
		}
		m.unlock()
	}
	from := m.st.Position + 1
	m.store(func(conn *memstore.Store) (any, error) { return readAll(conn, from) }, func(v any, err error) {
		if err != nil {
			fail(err)
			return
		}
		evs := v.([]events.Event)
		if err := projections.ApplyAll(m.st, evs); err != nil {
			fail(err)
			return
		}
		m.noteRequests(evs)
		evs, err = commands.ElectionEvents(m.st, m.now(), &events.LeaderElected{Holder: m.name, Epoch: l.Epoch, Address: m.name, Incarnation: m.incarnation}, nil)
		if err != nil {
			fail(err)
			return
		}
		req := events.AppendRequest{ExpectedPosition: m.st.Position, Epoch: l.Epoch, Events: evs}
		m.store(func(conn *memstore.Store) (any, error) { return conn.Append(context.Background(), req) }, func(v any, err error) {
			if err != nil {
				if errors.Is(err, events.ErrFenced) {
					m.w.Fenced++
				}
				fail(err)
				return
			}
			first := v.(events.AppendResult).First
			for i := range evs {
				evs[i].Position = first + int64(i)
				if err := projections.Apply(m.st, evs[i]); err != nil {
					fail(err)
					return
				}
			}
			if m.term != term || !m.elected {
				m.unlock()
				return
			}
			m.leading = true
			m.link = newLink(m)
			m.sched = newSched(m)
			m.logf("leading at epoch %d from position %d", l.Epoch, first)
			m.w.elected(m, l.Epoch)
			m.unlock()
			m.link.start()
			m.sched.start()
		})
	})
}

func readAll(s *memstore.Store, from int64) ([]events.Event, error) {
	var out []events.Event
	for {
		evs, err := s.Read(context.Background(), from, 1000)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return out, nil
		}
		out = append(out, evs...)
		from = evs[len(evs)-1].Position + 1
	}
}

func (m *Master) stepDown(why string) {
	if !m.elected {
		return
	}
	m.elected, m.leading = false, false
	m.term++
	m.link, m.sched = nil, nil
	m.failQueued()
	m.logf("no longer leading: %s", why)
}

func (m *Master) notLeader() error {
	e := &master.ErrNotLeader{Master: m.name}
	if m.st != nil && !m.locked {
		e.Leader, e.Address = m.st.Leader, m.st.LeaderAddress
	}
	if e.Leader == m.name {
		e.Leader, e.Address = "", ""
	}
	return e
}

func (m *Master) failQueued() {
	ws := m.writes
	m.writes = nil
	for _, o := range ws {
		o.done(master.Result{}, m.notLeader())
	}
}

// ---- the write path -------------------------------------------------------------

// do queues a command to the writer (master.Master.Do).
func (m *Master) do(cmd commands.Command, done func(master.Result, error)) {
	if !m.leading {
		done(master.Result{}, m.notLeader())
		return
	}
	m.writes = append(m.writes, &op{cmd: cmd, done: done})
	m.pump()
}

// pump starts the next group commit when none is in flight: the
// writer's decisions (commands/writer) with every store call a message.
func (m *Master) pump() {
	if m.locked || len(m.writes) == 0 || m.st == nil {
		return
	}
	if !m.leading {
		m.failQueued()
		return
	}
	ops := m.writes
	m.writes = nil
	in := make([]writer.Op, len(ops))
	for i, o := range ops {
		in[i] = writer.Op{Cmd: o.cmd, Single: o.single}
	}
	m.locked = true
	b := writer.Plan(m.st, in, m.lease.Epoch, maxBatch, m.recent, m.now)
	m.committedBase = b.Base
	for _, i := range b.Later {
		m.writes = append(m.writes, ops[i])
	}
	m.answer(ops, b.Answers, func() {
		if len(b.Appends) == 0 {
			m.recordRefusals(b.Refusals, m.unlock)
			return
		}
		m.store(func(conn *memstore.Store) (any, error) { return conn.AppendMany(context.Background(), b.Appends) }, func(v any, err error) {
			results, _ := v.([]events.AppendResult)
			m.committed(ops, b, results, err)
		})
	})
}

// committed is the rest of master.commit, once the append answered.
func (m *Master) committed(ops []*op, b writer.Batch, results []events.AppendResult, err error) {
	if m.w.cfg.Trace != nil {
		var ids []string
		for _, i := range b.Ops {
			ids = append(ids, fmt.Sprintf("%T %s", ops[i].cmd, ops[i].cmd.Metadata().RequestID))
		}
		m.logf("append of %v: %v %v", ids, results, err)
	}
	out := writer.Finish(b, results, err, m.recent)
	if out.Deposed {
		m.w.Fenced++
		m.leading = false
	}
	var retry []*op
	for _, i := range out.Retry {
		ops[i].single = true
		retry = append(retry, ops[i])
	}
	m.writes = append(retry, m.writes...)
	m.answer(ops, out.Answers, func() {
		done := func() { m.recordRefusals(b.Refusals, m.unlock) }
		if out.Landed {
			for _, i := range b.Ops {
				m.w.Landed[commands.Name(ops[i].cmd)]++
			}
			m.w.applied(m)
			m.maybeCheckpoint()
		}
		if out.Reload {
			m.reload(done)
			return
		}
		done()
	})
}

// answer sends the answers in order, doing the store reads they ask for
// (master.answerLocked), then runs then.
func (m *Master) answer(ops []*op, as []writer.Answer, then func()) {
	if len(as) == 0 {
		then()
		return
	}
	a, rest := as[0], as[1:]
	o := ops[a.Op]
	next := func() { m.answer(ops, rest, then) }
	meta := o.cmd.Metadata()
	// lookup asks the store which request the id was.
	lookup := func(use func(r events.Request, found bool, err error)) {
		m.store(func(conn *memstore.Store) (any, error) {
			r, found, err := conn.Request(context.Background(), meta.Key())
			return lookedUp{r, found}, err
		}, func(v any, err error) {
			l, _ := v.(lookedUp)
			use(l.r, l.found, err)
		})
	}
	reused := func(first, last int64) error { return commands.ReusedRequestID(meta.RequestID, first, last) }
	switch {
	case a.Check == writer.CheckReused:
		lookup(func(r events.Request, _ bool, err error) {
			if err != nil {
				r = events.Request{}
			}
			o.done(writer.Result{}, reused(r.First, r.Last))
			next()
		})
	case a.Check == writer.CheckSameRequest && meta.Fingerprint != "" && a.Fingerprint == "":
		lookup(func(r events.Request, found bool, err error) {
			switch {
			case err != nil:
				o.done(writer.Result{}, fmt.Errorf("reading what request %q was: %w", meta.RequestID, err))
			case found && r.Fingerprint != "" && r.Fingerprint != meta.Fingerprint:
				m.recent.Learn(meta.Key(), r.Fingerprint)
				o.done(writer.Result{}, reused(a.Result.First, a.Result.Last))
			default:
				if found {
					m.recent.Learn(meta.Key(), r.Fingerprint)
				}
				o.done(a.Result, nil)
			}
			next()
		})
	case a.Check == writer.CheckSameRequest && meta.Fingerprint != "" && a.Fingerprint != meta.Fingerprint:
		o.done(writer.Result{}, reused(a.Result.First, a.Result.Last))
		next()
	default:
		o.done(a.Result, a.Err)
		next()
	}
}

type lookedUp struct {
	r     events.Request
	found bool
}

// recordRefusals appends a batch's refusals and applies them, the state
// still locked (master.recordRefusalsLocked), then runs then. A failure is
// only logged: the refused callers have their answers.
func (m *Master) recordRefusals(evs []events.Event, then func()) {
	if len(evs) == 0 || !m.leading {
		then()
		return
	}
	req := events.AppendRequest{ExpectedPosition: m.st.Position, Epoch: m.lease.Epoch, Events: evs}
	m.store(func(conn *memstore.Store) (any, error) { return conn.Append(context.Background(), req) }, func(v any, err error) {
		if err != nil {
			m.logf("recording refused commands: %v", err)
			then()
			return
		}
		first := v.(events.AppendResult).First
		for i := range evs {
			evs[i].Position = first + int64(i)
			if m.st != nil {
				if err := projections.Apply(m.st, evs[i]); err != nil {
					m.logf("applying a recorded refusal: %v", err)
					break
				}
			}
		}
		then()
	})
}

// reload undoes the speculative applies by loading the state from the log
// (master.reloadLocked), then runs then. The state stays locked meanwhile,
// and until a load succeeds: a state holding events that are not in the
// log must never be read, nor have the log's later events applied over it.
func (m *Master) reload(then func()) {
	m.reloadAfter(then, 100*time.Millisecond)
}

func (m *Master) reloadAfter(then func(), backoff time.Duration) {
	base := m.committedBase
	m.store(func(conn *memstore.Store) (any, error) { return loadNoting(conn, base) }, func(v any, err error) {
		if err != nil {
			m.logf("reloading the state after a failed append: %v; retrying in %s", err, backoff)
			ws := m.writes
			m.writes = nil
			for _, o := range ws {
				o.done(master.Result{}, fmt.Errorf("the event log is unreachable (%v): this master cannot write before it has read the log again", err))
			}
			m.at(backoff, func() { m.reloadAfter(then, min(2*backoff, 2*time.Second)) })
			return
		}
		l := v.(loaded)
		m.st = l.st
		m.noteRequests(l.tail)
		m.w.loaded(m)
		then()
	})
}

// loaded is a state loaded from the store and the events at its end whose
// request ids the master notes.
type loaded struct {
	st   *projections.State
	tail []events.Event
}

// recentWindow is how many events before its head a master starting up
// reads back to learn their request ids.
const recentWindow = 10_000

// loadNoting loads the state, then reads the events after `after` (the
// last recentWindow events when after < 0): retried requests among them
// are answered with their first result.
func loadNoting(conn *memstore.Store, after int64) (any, error) {
	st, err := projections.Load(context.Background(), conn)
	if err != nil {
		return nil, err
	}
	if after < 0 {
		after = max(st.Position-recentWindow, 0)
	}
	var tail []events.Event
	for from := after + 1; from <= st.Position; {
		evs, err := conn.Read(context.Background(), from, int(min(st.Position-from+1, 1000)))
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			break
		}
		tail = append(tail, evs...)
		from = evs[len(evs)-1].Position + 1
	}
	return loaded{st, tail}, nil
}

// noteRequests remembers where the requests behind events read from the
// log landed (writer.Recent.Note).
func (m *Master) noteRequests(evs []events.Event) { m.recent.Note(evs) }

func (m *Master) maybeCheckpoint() {
	s := m.st
	if s.Position-m.cpPos < cpEveryEvents && m.now().Sub(m.cpAt) < cpEvery {
		return
	}
	cp := events.Checkpoint{Name: projections.CheckpointName, Position: s.Position, TakenAt: m.now(), State: projections.Encode(s)}
	m.cpPos, m.cpAt = s.Position, m.now()
	m.store(func(conn *memstore.Store) (any, error) { return nil, conn.SaveCheckpoint(context.Background(), cp) }, func(_ any, err error) {
		if err != nil {
			m.logf("writing a checkpoint: %v", err)
			return
		}
		m.w.Checkpoints++
	})
}
