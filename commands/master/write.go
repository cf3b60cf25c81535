package master

import (
	"context"
	"fmt"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/writer"
	"github.com/corralhq/corral/projections"
)

// Result is where a command's events landed.
type Result = writer.Result

type writeResult struct {
	res Result
	err error
}

type writeOp struct {
	cmd    commands.Command
	single bool // commit alone (writer.Op.Single)
	done   chan writeResult
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

// commit decides and appends one batch with the writer's decisions
// (commands/writer), doing the store's I/O they leave to it. It returns
// the ops it left for the next batch, in order.
func (m *Master) commit(ctx context.Context, ops []*writeOp) (later []*writeOp) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.applied.Notify()
	epoch := m.Epoch()
	if epoch == 0 {
		for _, op := range ops {
			op.reply(Result{}, m.notLeaderLocked())
		}
		return nil
	}
	in := make([]writer.Op, len(ops))
	for i, op := range ops {
		in[i] = writer.Op{Cmd: op.cmd, Single: op.single}
	}
	b := writer.Plan(m.state, in, epoch, m.cfg.MaxBatch, m.recent, m.clock)
	// Commands refused for want of a capability are recorded once the
	// batch is settled (deferred calls run in reverse: before Notify).
	defer func() { m.recordRefusalsLocked(ctx, b.Refusals) }()
	for _, a := range b.Answers {
		m.answerLocked(ctx, ops[a.Op], a)
	}
	for _, i := range b.Later {
		later = append(later, ops[i])
	}
	if len(b.Appends) == 0 {
		return later
	}
	results, err := m.store.AppendMany(ctx, b.Appends)
	out := writer.Finish(b, results, err, m.recent)
	if out.Deposed {
		m.leading.Store(false)
	}
	for _, a := range out.Answers {
		m.answerLocked(ctx, ops[a.Op], a)
	}
	if out.Reload {
		m.reloadLocked(b.Base)
	}
	if out.Landed {
		m.maybeCheckpoint(ctx)
	}
	var retry []*writeOp
	for _, i := range out.Retry {
		ops[i].single = true
		retry = append(retry, ops[i])
	}
	return append(retry, later...)
}

// answerLocked sends an answer, doing the store read it asks for.
func (m *Master) answerLocked(ctx context.Context, op *writeOp, a writer.Answer) {
	meta := op.cmd.Metadata()
	switch a.Check {
	case writer.CheckSameRequest:
		if err := m.sameRequestLocked(ctx, meta, a.Result, a.Fingerprint); err != nil {
			op.reply(Result{}, err)
			return
		}
	case writer.CheckReused:
		op.reply(Result{}, m.reusedLocked(ctx, meta))
		return
	}
	op.reply(a.Result, a.Err)
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
		m.recent.Learn(meta.Key(), fp)
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
		m.recent.Note(evs)
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
	cp, written, err := m.checkpointer.Maybe(ctx, m.state)
	switch {
	case err != nil:
		m.log.Warn("writing a checkpoint", "err", err)
	case written:
		m.log.Info("checkpoint written", "position", cp.Position, "bytes", len(cp.State))
	}
}
