package master

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Result is where a command's events landed.
type Result struct {
	First, Last int64 // 0, 0 when the command changed nothing
	Events      int
	Duplicate   bool // the request id was seen before: nothing new was appended
}

type writeResult struct {
	res Result
	err error
}

type writeOp struct {
	cmd  commands.Command
	done chan writeResult
}

func (op *writeOp) reply(res Result, err error) { op.done <- writeResult{res, err} }

// writer is the only appender while this replica leads. It drains the queue
// into group commits: each command is decided against the state including
// the previous commands of the batch (applied speculatively under the write
// lock), then the whole batch is appended in one transaction. If the append
// fails, the state is reloaded from the log, so nothing uncommitted survives.
func (m *Master) writer(ctx context.Context) {
	for {
		var first *writeOp
		select {
		case <-ctx.Done():
			m.failQueued(m.notLeader())
			return
		case first = <-m.writes:
		}
		ops := []*writeOp{first}
	drain:
		for len(ops) < m.cfg.MaxBatch {
			select {
			case op := <-m.writes:
				ops = append(ops, op)
			default:
				break drain
			}
		}
		for len(ops) > 0 {
			ops = m.commit(ctx, ops)
		}
	}
}

func (m *Master) failQueued(err error) {
	for {
		select {
		case op := <-m.writes:
			op.reply(Result{}, err)
		default:
			return
		}
	}
}

type decided struct {
	op  *writeOp
	evs []events.Event
}

// commit decides and appends one batch. It returns the ops it left for
// the next batch: retries of a request the batch already carries.
func (m *Master) commit(ctx context.Context, ops []*writeOp) (later []*writeOp) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.applied.Notify()
	// Commands refused for want of a capability are recorded once the
	// batch is in the log (deferred calls run in reverse: before Notify).
	var refused []events.Event
	defer func() { m.recordRefusalsLocked(ctx, refused) }()
	epoch := m.Epoch()
	if epoch == 0 {
		for _, op := range ops {
			op.reply(Result{}, m.notLeaderLocked())
		}
		return nil
	}
	base := m.state.Position
	var batch []decided
	inBatch := map[string]bool{}
	for _, op := range ops {
		meta := op.cmd.Metadata()
		key := meta.Key()
		if key != "" {
			if res, fp, ok := m.recent.get(key); ok {
				if err := m.sameRequestLocked(ctx, meta, res, fp); err != nil {
					op.reply(Result{}, err)
					continue
				}
				res.Duplicate = true
				op.reply(res, nil)
				continue
			}
			if inBatch[key] {
				// A retry queued behind its first attempt (the client gave
				// up waiting, the op stayed queued): it waits for that
				// attempt's outcome, rather than being decided against a
				// state that already holds it and refused.
				later = append(later, op)
				continue
			}
		}
		evs, err := commands.Decide(m.state, op.cmd, commands.ClockFunc(m.clock))
		if err != nil {
			op.reply(Result{}, err)
			if ev, ok := refusal(op.cmd, err, m.clock()); ok {
				refused = append(refused, ev)
			}
			continue
		}
		if len(evs) == 0 {
			op.reply(Result{}, nil)
			continue
		}
		for i := range evs {
			evs[i].Position = m.state.Position + 1
			if err := projections.Apply(m.state, evs[i]); err != nil {
				// Cannot happen: positions are contiguous by construction.
				panic(fmt.Sprintf("master: applying a decided event: %v", err))
			}
		}
		batch = append(batch, decided{op, evs})
		if key != "" {
			inBatch[key] = true
		}
	}
	if len(batch) == 0 {
		return later
	}
	reqs := make([]events.AppendRequest, len(batch))
	for i, d := range batch {
		meta := d.op.cmd.Metadata()
		reqs[i] = events.AppendRequest{ExpectedPosition: events.AnyPosition, Epoch: epoch, IdempotencyKey: meta.Key(), Fingerprint: meta.Fingerprint, Events: d.evs}
	}
	reqs[0].ExpectedPosition = base
	results, err := m.store.AppendMany(ctx, reqs)
	if err == nil && len(results) == 1 && results[0].Duplicate {
		// A retry the recent cache no longer knew (a new leader's): the
		// store appended nothing and answered with the first result, so
		// the speculative applies are undone.
		m.reloadLocked(base)
		res := Result{First: results[0].First, Last: results[0].Last, Events: int(results[0].Last - results[0].First + 1)}
		if meta := batch[0].op.cmd.Metadata(); meta.Key() != "" {
			m.recent.put(meta.Key(), res, meta.Fingerprint)
		}
		res.Duplicate = true
		batch[0].op.reply(res, nil)
		return later
	}
	if err == nil {
		for i, d := range batch {
			res := Result{First: results[i].First, Last: results[i].Last, Events: len(d.evs)}
			if meta := d.op.cmd.Metadata(); meta.Key() != "" {
				m.recent.put(meta.Key(), res, meta.Fingerprint)
			}
			d.op.reply(res, nil)
		}
		m.maybeCheckpoint(ctx)
		return later
	}
	switch {
	case errors.Is(err, events.ErrDuplicateInBatch) && len(batch) > 1:
		// A retried request the recent cache no longer knew: do them one by
		// one, so the seen one returns its first result.
		m.reloadLocked(base)
		for _, d := range batch {
			m.commitOneLocked(ctx, d.op)
		}
		return later
	case errors.Is(err, events.ErrRequestReused):
		// One request, whose id this user sent before for another request
		// (Batch.Seen): nothing was appended.
		m.reloadLocked(base)
		meta := batch[0].op.cmd.Metadata()
		batch[0].op.reply(Result{}, m.reusedLocked(ctx, meta))
		return later
	case errors.Is(err, events.ErrFenced):
		m.leading.Store(false)
		for _, d := range batch {
			d.op.reply(Result{}, fmt.Errorf("this master was deposed while writing: %w", err))
		}
	default:
		for _, d := range batch {
			d.op.reply(Result{}, fmt.Errorf("appending to the log: %w", err))
		}
	}
	// Undo the speculative applies, once the clients have their answer. The
	// append may have landed (its answer lost): the reload learns its
	// request ids from the log, for the clients' retries.
	m.reloadLocked(base)
	return later
}

// commitOneLocked decides and appends a single command with the store's own
// idempotency answer.
func (m *Master) commitOneLocked(ctx context.Context, op *writeOp) {
	evs, err := commands.Decide(m.state, op.cmd, commands.ClockFunc(m.clock))
	if err != nil || len(evs) == 0 {
		op.reply(Result{}, err)
		return
	}
	meta := op.cmd.Metadata()
	key := meta.Key()
	res, err := m.store.Append(ctx, events.AppendRequest{ExpectedPosition: m.state.Position, Epoch: m.Epoch(), IdempotencyKey: key, Fingerprint: meta.Fingerprint, Events: evs})
	if errors.Is(err, events.ErrRequestReused) {
		op.reply(Result{}, m.reusedLocked(ctx, meta))
		return
	}
	if err != nil {
		op.reply(Result{}, fmt.Errorf("appending to the log: %w", err))
		return
	}
	out := Result{First: res.First, Last: res.Last, Events: len(evs), Duplicate: res.Duplicate}
	if !res.Duplicate {
		for i := range evs {
			evs[i].Position = res.First + int64(i)
			if err := projections.Apply(m.state, evs[i]); err != nil {
				m.log.Error("applying appended events", "err", err)
			}
		}
	} else {
		// The first result may be beyond what this replica applied.
		if err := projections.Replay(ctx, m.store, m.state, 1<<62); err != nil {
			m.log.Error("catching up after a duplicate", "err", err)
		}
	}
	if key != "" {
		m.recent.put(key, Result{First: res.First, Last: res.Last, Events: len(evs)}, meta.Fingerprint)
	}
	op.reply(out, nil)
}

// sameRequestLocked checks that a request whose id was seen before (res,
// with the fingerprint fp it was appended with, "" when it was learned from
// the log) is the same request: the same id for another request is refused.
// When the cache does not know the first request's fingerprint the store
// does.
func (m *Master) sameRequestLocked(ctx context.Context, meta commands.Meta, res Result, fp string) error {
	if meta.Fingerprint == "" {
		return nil
	}
	if fp == "" {
		r, found, err := m.store.Request(ctx, meta.Key())
		if err != nil {
			return fmt.Errorf("reading what request %q was: %w", meta.RequestID, err)
		}
		if !found {
			return nil
		}
		fp = r.Fingerprint
		m.recent.learn(meta.Key(), fp)
	}
	if fp != "" && fp != meta.Fingerprint {
		return commands.ReusedRequestID(meta.RequestID, res.First, res.Last)
	}
	return nil
}

// reusedLocked is the refusal of a request id the store says was used for
// another request, naming where that one landed.
func (m *Master) reusedLocked(ctx context.Context, meta commands.Meta) error {
	r, _, err := m.store.Request(ctx, meta.Key())
	if err != nil {
		return commands.ReusedRequestID(meta.RequestID, 0, 0)
	}
	return commands.ReusedRequestID(meta.RequestID, r.First, r.Last)
}

// reloadLocked undoes a batch's speculative applies: it loads the state
// from the log and notes the request ids of the events after base (the
// position before the batch), so a retry of a request that landed although
// its append reported an error gets its first result. It does not return
// before a load succeeds (or the master shuts down): a state holding events
// that are not in the log must never be read, nor have the log's later
// events applied over it by the tail. So it ignores the leadership's end,
// which cancels the append it undoes, and retries while the store is
// unreachable, the write lock held: readers of this replica wait, writes
// queued meanwhile are refused at once.
func (m *Master) reloadLocked(base int64) {
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := projections.Load(ctx, m.store)
		if err == nil {
			m.state = st
			err = m.noteRequests(ctx, base, st.Position)
		}
		cancel()
		if err == nil {
			return
		}
		m.log.Error("reloading the state after a failed append; retrying", "err", err, "in", backoff)
		m.failQueued(fmt.Errorf("reading the log to undo a failed append: %w", err))
		select {
		case <-m.stopping:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// noteRequests reads the events after `after` up to `to` and remembers
// where the requests behind them landed, from the idempotency key every
// event carries.
func (m *Master) noteRequests(ctx context.Context, after, to int64) error {
	for after < to {
		evs, err := m.store.Read(ctx, after+1, int(min(to-after, 1000)))
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		m.recent.note(evs)
		after = evs[len(evs)-1].Position
	}
	return nil
}

func (m *Master) notLeaderLocked() error {
	e := &ErrNotLeader{Master: m.cfg.Name, Leader: m.state.Leader, Address: m.state.LeaderAddress}
	if e.Leader == m.cfg.Name {
		e.Leader, e.Address = "", ""
	}
	return e
}

func (m *Master) maybeCheckpoint(ctx context.Context) {
	if !m.checkpointer.Due(m.state) {
		return
	}
	cp, err := m.checkpointer.Save(ctx, m.state)
	if err != nil {
		m.log.Warn("writing a checkpoint", "err", err)
		return
	}
	m.log.Info("checkpoint written", "position", cp.Position, "bytes", len(cp.State))
}

// recentRequests remembers the results of recent request ids so a retry is
// answered without touching the store. It is bounded; older retries are
// caught by the store's idempotency keys.
type recentRequests struct {
	mu    sync.Mutex
	max   int
	order *list.List
	byID  map[string]*list.Element
}

type recentEntry struct {
	id  string
	res Result
	fp  string // the request's fingerprint; "" when learned from the log
}

func newRecentRequests(max int) *recentRequests {
	return &recentRequests{max: max, order: list.New(), byID: map[string]*list.Element{}}
}

func (r *recentRequests) get(id string) (Result, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byID[id]; ok {
		ent := e.Value.(recentEntry)
		return ent.res, ent.fp, true
	}
	return Result{}, "", false
}

// learn records the fingerprint of a request learned from the log.
func (r *recentRequests) learn(id, fp string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byID[id]; ok {
		ent := e.Value.(recentEntry)
		ent.fp = fp
		e.Value = ent
	}
}

// note remembers the requests behind events read from the log: each
// event carries its request's id, and a request's events are contiguous.
func (r *recentRequests) note(evs []events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range evs {
		if e.IdempotencyKey == "" {
			continue
		}
		if el, ok := r.byID[e.IdempotencyKey]; ok {
			if ent := el.Value.(recentEntry); ent.res.Last == e.Position-1 {
				ent.res.Last, ent.res.Events = e.Position, ent.res.Events+1
				el.Value = ent
			}
			continue
		}
		r.byID[e.IdempotencyKey] = r.order.PushBack(recentEntry{e.IdempotencyKey, Result{First: e.Position, Last: e.Position, Events: 1}, ""})
		for r.order.Len() > r.max {
			old := r.order.Remove(r.order.Front()).(recentEntry)
			delete(r.byID, old.id)
		}
	}
}

func (r *recentRequests) put(id string, res Result, fp string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byID[id]; ok {
		return
	}
	r.byID[id] = r.order.PushBack(recentEntry{id, res, fp})
	for r.order.Len() > r.max {
		old := r.order.Remove(r.order.Front()).(recentEntry)
		delete(r.byID, old.id)
	}
}
