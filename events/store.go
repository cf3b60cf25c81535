package events

import (
	"context"
	"sync"
	"time"
)

// AnyPosition as an AppendRequest's ExpectedPosition appends whatever the
// log's head is.
const AnyPosition int64 = -1

// AppendRequest is one atomic append.
type AppendRequest struct {
	// ExpectedPosition is the head the caller decided against (0 for an empty
	// log), or AnyPosition. A stale expectation fails with ErrConflict.
	ExpectedPosition int64
	// Epoch is the caller's leader epoch. Once any lease has been taken, an
	// append must carry the current epoch or fail with ErrFenced; before
	// that, it must carry 0.
	Epoch int64
	// IdempotencyKey, when set, makes a retried request harmless: a key seen
	// before returns the original positions and appends nothing.
	IdempotencyKey string
	// Fingerprint, when set, is a digest of the request behind the key: a
	// key seen before with another fingerprint is refused with
	// ErrRequestReused (the same id sent for a different request), not
	// answered as a duplicate. Empty on either side compares equal.
	Fingerprint string
	Events      []Event
}

// Request is what the store keeps of an appended request: where its events
// landed and its fingerprint.
type Request struct {
	Key         string
	First, Last int64
	Fingerprint string
}

// MaxIdempotencyKey bounds an idempotency key: a user's name and their
// request id (commands bound the id to 256 bytes).
const MaxIdempotencyKey = 512

// AppendResult is where an append's events landed.
type AppendResult struct {
	First, Last int64
	// Duplicate reports that the idempotency key was seen before and
	// nothing was appended by this call.
	Duplicate bool
}

// Lease is a holder's claim on leadership of the cell.
type Lease struct {
	Name      string
	Holder    string
	Epoch     int64 // grows by one at each new holder
	ExpiresAt time.Time
}

// Checkpoint is a projection's snapshot at a position. Checkpoints are a
// cache of the log: losing one costs a longer replay, never state.
type Checkpoint struct {
	Name     string
	Position int64
	TakenAt  time.Time
	State    []byte
}

// The store's interfaces are cut along what its users need, so that each
// takes the smallest (io.Reader beside io.ReadWriteCloser): the event feed
// and the Infrastore only tail (Tailer), the fold rebuilds from Log and
// Checkpoints, the master's writer appends (Appender) and asks what a
// request id was (Requests), and only the replica's lease loop and the
// health checks know of Leases. Store is all of them and Close: what a
// backend implements and what opening one returns.

// Reader is the part of a Store a Subscription needs.
type Reader interface {
	// Read returns up to limit events with position >= from, in order.
	Read(ctx context.Context, from int64, limit int) ([]Event, error)
}

// Tailer reads the log and follows it: what the event feed needs.
type Tailer interface {
	Reader
	// Subscribe tails the log from just after position `after`.
	Subscribe(after int64) *Subscription
}

// Log is the reading side of the log.
type Log interface {
	Tailer
	// ReadStream returns every event of one stream, in order.
	ReadStream(ctx context.Context, stream string) ([]Event, error)
	// Head returns the position of the last committed event (0 when empty).
	Head(ctx context.Context) (int64, error)
}

// Appender is the writing side of the log.
type Appender interface {
	// Append writes the request's events atomically at head+1 ... head+n.
	Append(ctx context.Context, req AppendRequest) (AppendResult, error)
	// AppendMany writes several requests in one transaction (group commit),
	// their events contiguous and in order. Only reqs[0].ExpectedPosition is
	// checked (the others must be AnyPosition) and every request carries the
	// same epoch. If any request's idempotency key was seen before, or
	// repeats within the batch, nothing is appended and the error is
	// ErrDuplicateInBatch: the caller retries the requests one by one.
	AppendMany(ctx context.Context, reqs []AppendRequest) ([]AppendResult, error)
}

// Leases are the named leases that elect the leader and fence its appends.
type Leases interface {
	// AcquireLease takes the named lease for holder for ttl, or returns
	// ErrLeaseHeld with the current lease when another holder has it.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)
	// RenewLease extends a held lease; ErrLeaseLost when it was lost.
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// ReleaseLease gives the lease up so a follower can take it at once.
	ReleaseLease(ctx context.Context, l Lease) error
	// CurrentLease returns the named lease as stored (ok=false if none).
	CurrentLease(ctx context.Context, name string) (Lease, bool, error)
}

// Requests answers what was appended under an idempotency key.
type Requests interface {
	// Request returns what the store keeps of the request appended with
	// an idempotency key (ok=false if none).
	Request(ctx context.Context, key string) (Request, bool, error)
}

// Checkpoints stores projections' snapshots.
type Checkpoints interface {
	// SaveCheckpoint stores a snapshot; LoadCheckpoint returns the newest
	// one of that name at or before position (ok=false if none).
	SaveCheckpoint(ctx context.Context, c Checkpoint) error
	LoadCheckpoint(ctx context.Context, name string, atOrBefore int64) (Checkpoint, bool, error)
}

// Store is the cell's append-only log with everything kept beside it.
// Implementations: pgstore (CockroachDB and PostgreSQL), sqlitestore (one
// machine), memstore (the simulation's) and ops.InstrumentStore's
// decorator; every one passes storetest.Run.
type Store interface {
	Log
	Appender
	Leases
	Requests
	Checkpoints
	Close() error
}

// LeaderLease is the name of the lease that fences appends.
const LeaderLease = "leader"

// Notifier wakes subscribers when the process's own store commits an append,
// so live followers see new events at once instead of at the next poll.
// Appends by other processes are seen at the next poll.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewNotifier returns a Notifier ready for use.
func NewNotifier() *Notifier { return &Notifier{ch: make(chan struct{})} }

// Wait returns a channel closed at the next Notify.
func (n *Notifier) Wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

// Notify wakes every waiter.
func (n *Notifier) Notify() {
	n.mu.Lock()
	close(n.ch)
	n.ch = make(chan struct{})
	n.mu.Unlock()
}

// Subscription tails the log: each Next returns the committed events after
// the last one it returned, in position order, with no gap and no duplicate.
// To resume after a restart, subscribe again after the last position applied.
type Subscription struct {
	r            Reader
	notify       *Notifier
	after        int64
	batch        int
	pollInterval time.Duration
}

// NewSubscription returns a subscription reading from r after position
// `after`, woken by notify (may be nil) or every pollInterval.
func NewSubscription(r Reader, notify *Notifier, after int64, batch int, pollInterval time.Duration) *Subscription {
	if batch <= 0 {
		batch = 1000
	}
	if pollInterval <= 0 {
		pollInterval = 100 * time.Millisecond
	}
	return &Subscription{r: r, notify: notify, after: after, batch: batch, pollInterval: pollInterval}
}

// Position is the last position delivered (or the starting point).
func (s *Subscription) Position() int64 { return s.after }

// Next blocks until at least one event after Position is committed, then
// returns up to the batch size of them. It returns ctx's error when ctx ends.
func (s *Subscription) Next(ctx context.Context) ([]Event, error) {
	timer := time.NewTimer(s.pollInterval)
	defer timer.Stop()
	for {
		// Take the wake-up channel before reading so an append that commits
		// between the read and the wait is not missed.
		var woken <-chan struct{}
		if s.notify != nil {
			woken = s.notify.Wait()
		}
		evs, err := s.r.Read(ctx, s.after+1, s.batch)
		if err != nil {
			return nil, err
		}
		if len(evs) > 0 {
			s.after = evs[len(evs)-1].Position
			return evs, nil
		}
		timer.Reset(s.pollInterval)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-woken:
		case <-timer.C:
		}
	}
}
