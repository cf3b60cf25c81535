package projections

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/corralhq/corral/events"
)

// CheckpointName is the name the cell state's checkpoints are stored under.
const CheckpointName = "cell-state"

// Source is what rebuilding a state needs of an events.Store.
type Source interface {
	Read(ctx context.Context, from int64, limit int) ([]events.Event, error)
	Head(ctx context.Context) (int64, error)
	LoadCheckpoint(ctx context.Context, name string, atOrBefore int64) (events.Checkpoint, bool, error)
}

// CheckpointSaver is what a Checkpointer needs of an events.Store.
type CheckpointSaver interface {
	SaveCheckpoint(ctx context.Context, c events.Checkpoint) error
}

// ErrNoPosition: the log does not reach the asked position.
var ErrNoPosition = errors.New("projections: position beyond the log's head")

// replayBatch is how many events one Read of a replay asks for.
const replayBatch = 8192

// maxBadCheckpoints bounds how many unreadable checkpoints a load skips
// before it replays from the start.
const maxBadCheckpoints = 3

// Load rebuilds the state at the log's head: the newest readable checkpoint,
// then every event after it.
func Load(ctx context.Context, src Source) (*State, error) {
	s, err := fromCheckpoint(ctx, src, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	if err := Replay(ctx, src, s, math.MaxInt64); err != nil {
		return nil, err
	}
	return s, nil
}

// StateAt rebuilds the exact state after the event at position: the newest
// checkpoint at or before it, then the events up to it. Position 0 is the
// empty cell.
func StateAt(ctx context.Context, src Source, position int64) (*State, error) {
	if position < 0 {
		return nil, fmt.Errorf("projections: position %d: must not be negative", position)
	}
	s, err := fromCheckpoint(ctx, src, position)
	if err != nil {
		return nil, err
	}
	if err := Replay(ctx, src, s, position); err != nil {
		return nil, err
	}
	if s.Position != position {
		return nil, fmt.Errorf("%w: asked for %d, the log ends at %d", ErrNoPosition, position, s.Position)
	}
	return s, nil
}

// StateAtTime rebuilds the state as it was at t: after the last event
// recorded at or before t. It returns that event's position too.
func StateAtTime(ctx context.Context, src Source, t time.Time) (*State, int64, error) {
	pos, err := PositionAt(ctx, src, t)
	if err != nil {
		return nil, 0, err
	}
	s, err := StateAt(ctx, src, pos)
	return s, pos, err
}

// PositionAt returns the position of the last event recorded at or before t
// (0 when none was). It binary-searches the log, one single-event Read per
// step, on the store's recorded_at, which the single writer assigns in
// order; events without it (a fake store) are searched by occurred_at.
func PositionAt(ctx context.Context, src Source, t time.Time) (int64, error) {
	head, err := src.Head(ctx)
	if err != nil {
		return 0, err
	}
	lo, hi := int64(0), head // invariant: the event at lo is at or before t (0: none)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		evs, err := src.Read(ctx, mid, 1)
		if err != nil {
			return 0, err
		}
		if len(evs) == 0 || evs[0].Position != mid {
			return 0, fmt.Errorf("projections: the log has no event at position %d below head %d", mid, head)
		}
		at := evs[0].RecordedAt
		if at.IsZero() {
			at = evs[0].OccurredAt
		}
		if at.After(t) {
			hi = mid - 1
		} else {
			lo = mid
		}
	}
	return lo, nil
}

// Replay applies the events after s.Position up to and including `to`
// (math.MaxInt64: to the head as it is now).
func Replay(ctx context.Context, src Source, s *State, to int64) error {
	for s.Position < to {
		limit := int64(replayBatch)
		if to-s.Position < limit {
			limit = to - s.Position
		}
		evs, err := src.Read(ctx, s.Position+1, int(limit))
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		for i := range evs {
			if evs[i].Position > to {
				return nil
			}
			if err := Apply(s, evs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// fromCheckpoint returns the state of the newest readable checkpoint at or
// before position, or the empty state. Checkpoints are a cache of the log:
// one that cannot be read costs a longer replay, not an error.
func fromCheckpoint(ctx context.Context, src Source, position int64) (*State, error) {
	at := position
	for range maxBadCheckpoints {
		cp, ok, err := src.LoadCheckpoint(ctx, CheckpointName, at)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		s, err := Decode(cp.State)
		if err == nil && s.Position == cp.Position {
			return s, nil
		}
		if cp.Position <= 0 {
			break
		}
		at = cp.Position - 1
	}
	return New(), nil
}

// CheckpointPolicy says when a Checkpointer writes: after EveryEvents
// events, or Every of clock time, whichever comes first. A zero field
// disables its trigger.
type CheckpointPolicy struct {
	EveryEvents int64
	Every       time.Duration
}

// DefaultCheckpointPolicy bounds a restart's replay to about 100,000 events
// (well under a second) and a quiet cell's to ten minutes of history.
var DefaultCheckpointPolicy = CheckpointPolicy{EveryEvents: 100_000, Every: 10 * time.Minute}

// Checkpointer writes the state to the store when its policy says so. It
// holds no timer: the caller asks after applying events (and on a tick),
// with the time from its injected clock.
type Checkpointer struct {
	store  CheckpointSaver
	policy CheckpointPolicy
	now    func() time.Time
	last   int64
	lastAt time.Time
}

// NewCheckpointer returns a Checkpointer that counts from the state at
// position `from` (the position the caller loaded, whose checkpoint
// exists or is the empty log) and from now().
func NewCheckpointer(store CheckpointSaver, policy CheckpointPolicy, now func() time.Time, from int64) *Checkpointer {
	return &Checkpointer{store: store, policy: policy, now: now, last: from, lastAt: now()}
}

// Due reports whether s should be checkpointed now.
func (c *Checkpointer) Due(s *State) bool {
	if s.Position <= c.last {
		return false
	}
	if c.policy.EveryEvents > 0 && s.Position-c.last >= c.policy.EveryEvents {
		return true
	}
	return c.policy.Every > 0 && c.now().Sub(c.lastAt) >= c.policy.Every
}

// Maybe saves a checkpoint of s when one is due and reports whether it did.
func (c *Checkpointer) Maybe(ctx context.Context, s *State) (events.Checkpoint, bool, error) {
	if !c.Due(s) {
		return events.Checkpoint{}, false, nil
	}
	cp, err := c.Save(ctx, s)
	return cp, err == nil, err
}

// Save writes a checkpoint of s now.
func (c *Checkpointer) Save(ctx context.Context, s *State) (events.Checkpoint, error) {
	now := c.now()
	cp := events.Checkpoint{Name: CheckpointName, Position: s.Position, TakenAt: now, State: Encode(s)}
	if err := c.store.SaveCheckpoint(ctx, cp); err != nil {
		return events.Checkpoint{}, fmt.Errorf("projections: checkpoint at %d: %w", s.Position, err)
	}
	c.last, c.lastAt = s.Position, now
	return cp, nil
}
