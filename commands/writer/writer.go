package writer

import (
	"errors"
	"fmt"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Op is one queued command.
type Op struct {
	Cmd commands.Command
	// Single commits the command in a batch of its own, so that the
	// store's idempotency answer is its alone (Finish hands a batch back
	// as singles when it held a retry the cache no longer knew).
	Single bool
}

// Check says what the caller must look up in the store before it sends
// an answer: the only reads the decisions leave to the caller.
type Check int

const (
	// CheckNone: send the answer as it is.
	CheckNone Check = iota
	// CheckSameRequest: the request id was answered before (Result); if
	// the command carries a fingerprint and Fingerprint is "" (learned from
	// the log), ask the store which request the id was, and refuse the
	// command with commands.ReusedRequestID if it was another one.
	CheckSameRequest
	// CheckReused: the store refused the request id as used for another
	// request: answer commands.ReusedRequestID naming where that one
	// landed (the store's Request).
	CheckReused
)

// Answer is the reply to one op.
type Answer struct {
	Op          int // index into the ops given to Plan
	Result      Result
	Err         error
	Check       Check
	Fingerprint string // with CheckSameRequest: the fingerprint the id was first seen with
}

// Batch is one group commit as Plan decided it.
type Batch struct {
	// Base is the state's position before the batch: the append expects
	// it, and a reload notes the request ids of the events after it.
	Base int64
	// Ops are the indices of the decided ops, one per append request.
	Ops []int
	// Appends go to the store in one AppendMany, in order.
	Appends []events.AppendRequest
	// Answers are sent at once, before the append.
	Answers []Answer
	// Later are ops to decide in the next batch, in this order, ahead of
	// the rest of the queue.
	Later []int
	// Refusals record the commands refused for want of a capability;
	// the caller appends them once the batch is settled.
	Refusals []events.Event
}

// Plan decides a batch of ops against st under epoch: each command is
// decided against the state including the previous commands of the batch
// (applied to st speculatively), and the decided ones make one append
// request each. If ops[0] is Single it alone is decided; otherwise ops up
// to the first Single one (at most maxBatch) are. st is changed; the
// caller must load it again unless Finish says the batch landed.
func Plan(st *projections.State, ops []Op, epoch int64, maxBatch int, recent *Recent, now func() time.Time) Batch {
	b := Batch{Base: st.Position}
	if len(ops) == 0 {
		return b
	}
	n := 1
	if !ops[0].Single {
		for n < len(ops) && n < maxBatch && !ops[n].Single {
			n++
		}
	}
	inBatch := map[string]bool{}
	// Commands decide at the time the log keeps (microseconds): a replay
	// of the log decides the same (a reservation's decay, a backoff's end).
	clock := commands.ClockFunc(func() time.Time { return now().Truncate(time.Microsecond) })
	for i, op := range ops[:n] {
		meta := op.Cmd.Metadata()
		key := meta.Key()
		if key != "" {
			if res, fp, ok := recent.Get(key); ok {
				res.Duplicate = true
				b.Answers = append(b.Answers, Answer{Op: i, Result: res, Check: CheckSameRequest, Fingerprint: fp})
				continue
			}
			if inBatch[key] {
				// A retry queued behind its first attempt (the client gave
				// up waiting, the op stayed queued): it waits for that
				// attempt's outcome, rather than being decided against a
				// state that already holds it and refused.
				b.Later = append(b.Later, i)
				continue
			}
		}
		evs, err := commands.Decide(st, op.Cmd, clock)
		if err != nil {
			b.Answers = append(b.Answers, Answer{Op: i, Err: err})
			if ev, ok := Refusal(op.Cmd, err, now()); ok {
				b.Refusals = append(b.Refusals, ev)
			}
			continue
		}
		if len(evs) == 0 {
			b.Answers = append(b.Answers, Answer{Op: i})
			continue
		}
		for j := range evs {
			evs[j].Position = st.Position + 1
			if err := projections.Apply(st, evs[j]); err != nil {
				// Cannot happen: positions are contiguous by construction.
				panic(fmt.Sprintf("writer: applying a decided event: %v", err))
			}
		}
		b.Ops = append(b.Ops, i)
		b.Appends = append(b.Appends, events.AppendRequest{
			ExpectedPosition: events.AnyPosition, Epoch: epoch,
			IdempotencyKey: key, Fingerprint: meta.Fingerprint, Events: evs,
		})
		if key != "" {
			inBatch[key] = true
		}
	}
	if len(b.Appends) > 0 {
		b.Appends[0].ExpectedPosition = b.Base
	}
	for i := n; i < len(ops); i++ {
		b.Later = append(b.Later, i)
	}
	return b
}

// Outcome is what the caller does once the append answered.
type Outcome struct {
	Answers []Answer
	// Landed: the batch is in the log as st holds it; no reload.
	Landed bool
	// Reload: st holds speculative applies that are not in the log (or a
	// retry's events it had not read): load it again before anything
	// reads it, noting the request ids after Batch.Base.
	Reload bool
	// Deposed: the store fenced the epoch; this master no longer leads.
	Deposed bool
	// Retry are ops to decide again one by one (Single), ahead of Later
	// and the rest of the queue.
	Retry []int
}

// Finish turns the append's answer (results, err) into the replies and
// what the caller must do, and remembers the landed request ids in recent.
// The answers name ops as Plan's input did.
func Finish(b Batch, results []events.AppendResult, err error, recent *Recent) Outcome {
	if len(b.Appends) == 0 {
		return Outcome{Landed: true}
	}
	if err == nil && len(results) == 1 && results[0].Duplicate {
		// A retry the cache no longer knew (a new leader's): the store
		// appended nothing and answered with the first result, so the
		// speculative applies are undone.
		res := Result{First: results[0].First, Last: results[0].Last, Events: int(results[0].Last - results[0].First + 1)}
		if key := b.Appends[0].IdempotencyKey; key != "" {
			recent.Put(key, res, b.Appends[0].Fingerprint)
		}
		res.Duplicate = true
		return Outcome{Reload: true, Answers: []Answer{{Op: b.Ops[0], Result: res}}}
	}
	if err == nil {
		out := Outcome{Landed: true}
		for i, op := range b.Ops {
			res := Result{First: results[i].First, Last: results[i].Last, Events: len(b.Appends[i].Events)}
			if key := b.Appends[i].IdempotencyKey; key != "" {
				recent.Put(key, res, b.Appends[i].Fingerprint)
			}
			res.Appended = b.Appends[i].Events
			out.Answers = append(out.Answers, Answer{Op: op, Result: res})
		}
		return out
	}
	out := Outcome{Reload: true}
	// Undo the speculative applies, once the clients have their answer. The
	// append may have landed (its answer lost): the reload learns its
	// request ids from the log, for the clients' retries.
	switch {
	case errors.Is(err, events.ErrDuplicateInBatch) && len(b.Ops) > 1:
		// A retried request the cache no longer knew: redo them one by
		// one, so the seen one gets its first result from the store.
		out.Retry = append(out.Retry, b.Ops...)
	case errors.Is(err, events.ErrRequestReused):
		// One request, whose id this user sent before for another
		// request: nothing was appended.
		out.Answers = []Answer{{Op: b.Ops[0], Check: CheckReused}}
	case errors.Is(err, events.ErrFenced):
		out.Deposed = true
		for _, op := range b.Ops {
			out.Answers = append(out.Answers, Answer{Op: op, Err: fmt.Errorf("this master was deposed while writing: %w", err)})
		}
	default:
		for _, op := range b.Ops {
			out.Answers = append(out.Answers, Answer{Op: op, Err: fmt.Errorf("appending to the log: %w", err)})
		}
	}
	return out
}
