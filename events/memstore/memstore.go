package memstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/corralhq/corral/events"
)

// ErrStoreDown is what every call gets while the database is made
// unreachable (SetDown); it stands for a refused connection, so it wraps nothing the
// callers could mistake for a decision of the store (ErrConflict, ErrFenced).
var ErrStoreDown = errors.New("memstore: the database is unreachable")

// Log is the database: one cell's log, its idempotency keys,
// leases and checkpoints. Open hands out connections to it, each with the
// clock of the host it runs on, as pgstore's Options.Clock. It follows the
// append rules of the real backends through the same helpers
// (events.ValidateBatch, CheckAppend, AssignRows, DecideAcquire), keeps
// payloads encoded and decodes them on every read, so no two readers ever
// share a payload, and passes the events/storetest conformance suite.
type Log struct {
	mu          sync.Mutex
	rows        []events.Row // rows[i] is at position i+1
	epochs      []int64      // the epoch each row's append carried
	versions    map[string]int64
	keys        map[string]events.Request
	checkpoints map[string][]events.Checkpoint // by position
	leases      map[string]events.Lease
	notify      *events.Notifier
	down        bool
	// onAppend, when set, sees every committed append (under mu) and the
	// process that made it (the connection's writer).
	onAppend func(first, last int64, epoch int64, writer string)
}

// NewLog returns an empty log.
func NewLog() *Log {
	return &Log{versions: map[string]int64{}, keys: map[string]events.Request{},
		checkpoints: map[string][]events.Checkpoint{}, leases: map[string]events.Lease{}, notify: events.NewNotifier()}
}

// OnAppend sets a function that sees every committed append (under the
// log's lock) and the connection's writer (OpenAs) that made it.
func (l *Log) OnAppend(f func(first, last int64, epoch int64, writer string)) {
	l.mu.Lock()
	l.onAppend = f
	l.mu.Unlock()
}

// Checkpoints counts the checkpoints stored under name.
func (l *Log) Checkpoints(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.checkpoints[name])
}

// SetDown makes every call of every connection fail with ErrStoreDown
// (true) or work again (false). Nothing stored is lost.
func (l *Log) SetDown(down bool) {
	l.mu.Lock()
	l.down = down
	l.mu.Unlock()
}

// Down reports whether the database is unreachable.
func (l *Log) Down() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.down
}

// Head is the position of the last event, for the harness (it ignores Down).
func (l *Log) Head() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.rows))
}

// Key returns where the append carrying an idempotency key landed.
func (l *Log) Key(key string) (events.AppendResult, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.keys[key]
	return events.AppendResult{First: r.First, Last: r.Last}, ok
}

// Row returns the stored row at a position (1-based) and the epoch its
// append carried, for the harness's checks.
func (l *Log) Row(pos int64) (events.Row, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rows[pos-1], l.epochs[pos-1]
}

// Lease returns the named lease as stored.
func (l *Log) Lease(name string) (events.Lease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	le, ok := l.leases[name]
	return le, ok
}

// Open returns a connection whose recorded_at and lease expiry come from
// clock: the clock of the host making the calls.
func (l *Log) Open(clock func() time.Time) *Store {
	return &Store{log: l, clock: clock}
}

// OpenAs is Open for a connection of one process, named by writer, so that
// a harness can tell which process made each append.
func (l *Log) OpenAs(clock func() time.Time, writer string) *Store {
	return &Store{log: l, clock: clock, writer: writer}
}

// Store is one connection to a Log; it implements events.Store.
type Store struct {
	log    *Log
	clock  func() time.Time
	writer string
	closed bool
}

var _ events.Store = (*Store)(nil)

// Log is the Log this connection belongs to.
func (s *Store) Log() *Log { return s.log }

// lock takes the log's lock unless the connection is closed or the
// database down.
func (s *Store) lock() error {
	s.log.mu.Lock()
	if s.closed {
		s.log.mu.Unlock()
		return events.ErrClosed
	}
	if s.log.down {
		s.log.mu.Unlock()
		return ErrStoreDown
	}
	return nil
}

func (s *Store) unlock() { s.log.mu.Unlock() }

func (s *Store) Append(ctx context.Context, req events.AppendRequest) (events.AppendResult, error) {
	rs, err := s.AppendMany(ctx, []events.AppendRequest{req})
	if err != nil {
		return events.AppendResult{}, err
	}
	return rs[0], nil
}

func (s *Store) AppendMany(ctx context.Context, reqs []events.AppendRequest) ([]events.AppendResult, error) {
	b, err := events.ValidateBatch(reqs)
	if err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.unlock()
	l := s.log
	for _, k := range b.Keys() {
		if r, ok := l.keys[k]; ok {
			return b.Seen(r)
		}
	}
	head := int64(len(l.rows))
	var epoch int64
	if le, ok := l.leases[events.LeaderLease]; ok {
		epoch = le.Epoch
	}
	if err := events.CheckAppend(&reqs[0], head, epoch); err != nil {
		return nil, err
	}
	var last time.Time
	if head > 0 {
		last = l.rows[head-1].RecordedAt
	}
	events.AssignRows(b.Rows, head, l.versions, events.RecordedAt(s.clock(), last))
	for i := range b.Rows {
		b.Rows[i].Data = nil // kept encoded only: every read decodes a fresh payload
		l.rows = append(l.rows, b.Rows[i])
		l.epochs = append(l.epochs, reqs[0].Epoch)
	}
	results := b.Results()
	for _, r := range b.Requests() {
		l.keys[r.Key] = r
	}
	if l.onAppend != nil {
		l.onAppend(head+1, int64(len(l.rows)), reqs[0].Epoch, s.writer)
	}
	l.notify.Notify()
	return results, nil
}

func (s *Store) Read(ctx context.Context, from int64, limit int) ([]events.Event, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit: %d, must be positive", events.ErrInvalid, limit)
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	rows := s.log.rows
	s.unlock()
	if from < 1 {
		from = 1
	}
	if from > int64(len(rows)) {
		return nil, nil
	}
	end := min(from-1+int64(limit), int64(len(rows)))
	return decode(rows[from-1 : end])
}

// decode turns stored rows into events with payloads of their own. Rows are
// never changed once appended (Corrupt replaces them), so they are read
// without the lock.
func decode(rows []events.Row) ([]events.Event, error) {
	out := make([]events.Event, len(rows))
	for i := range rows {
		out[i] = rows[i].Event
		if err := events.DecodeRow(&out[i], rows[i].Payload); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) ReadStream(ctx context.Context, stream string) ([]events.Event, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	var rows []events.Row
	for _, r := range s.log.rows {
		if r.Stream == stream {
			rows = append(rows, r)
		}
	}
	s.unlock()
	return decode(rows)
}

func (s *Store) Head(ctx context.Context) (int64, error) {
	if err := s.lock(); err != nil {
		return 0, err
	}
	defer s.unlock()
	return int64(len(s.log.rows)), nil
}

// Subscribe tails the log with a real-time poll: for the conformance suite
// and tools. The simulation itself never waits on it; it reads by position.
func (s *Store) Subscribe(after int64) *events.Subscription {
	return events.NewSubscription(s, s.log.notify, after, 1000, 10*time.Millisecond)
}

func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (events.Lease, error) {
	if err := s.lock(); err != nil {
		return events.Lease{}, err
	}
	defer s.unlock()
	stored, found := s.log.leases[name]
	le, err := events.DecideAcquire(stored, found, name, holder, s.clock(), ttl)
	if err != nil {
		return le, err
	}
	s.log.leases[name] = le
	return le, nil
}

// RenewLease extends the lease while the holder and epoch still match, as
// pgstore's UPDATE ... WHERE holder AND epoch does: a lease that lapsed but
// that nobody took is renewed.
func (s *Store) RenewLease(ctx context.Context, le events.Lease, ttl time.Duration) (events.Lease, error) {
	if err := s.lock(); err != nil {
		return events.Lease{}, err
	}
	defer s.unlock()
	cur, ok := s.log.leases[le.Name]
	if !ok || cur.Holder != le.Holder || cur.Epoch != le.Epoch {
		return events.Lease{}, events.LeaseLost(le)
	}
	cur.ExpiresAt = events.LeaseExpiry(s.clock(), ttl)
	s.log.leases[le.Name] = cur
	return cur, nil
}

func (s *Store) ReleaseLease(ctx context.Context, le events.Lease) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	if cur, ok := s.log.leases[le.Name]; ok && cur.Holder == le.Holder && cur.Epoch == le.Epoch {
		cur.ExpiresAt = events.ReleasedExpiry()
		s.log.leases[le.Name] = cur
	}
	return nil
}

func (s *Store) Request(ctx context.Context, key string) (events.Request, bool, error) {
	if err := s.lock(); err != nil {
		return events.Request{}, false, err
	}
	defer s.unlock()
	r, ok := s.log.keys[key]
	return r, ok, nil
}

func (s *Store) CurrentLease(ctx context.Context, name string) (events.Lease, bool, error) {
	if err := s.lock(); err != nil {
		return events.Lease{}, false, err
	}
	defer s.unlock()
	le, ok := s.log.leases[name]
	return le, ok, nil
}

func (s *Store) SaveCheckpoint(ctx context.Context, c events.Checkpoint) error {
	if c.Name == "" {
		return fmt.Errorf("%w: checkpoint name: must not be empty", events.ErrInvalid)
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	c.State = append([]byte(nil), c.State...)
	cps := s.log.checkpoints[c.Name]
	i := sort.Search(len(cps), func(i int) bool { return cps[i].Position >= c.Position })
	if i < len(cps) && cps[i].Position == c.Position {
		cps[i] = c
	} else {
		cps = append(cps, events.Checkpoint{})
		copy(cps[i+1:], cps[i:])
		cps[i] = c
	}
	s.log.checkpoints[c.Name] = cps
	return nil
}

func (s *Store) LoadCheckpoint(ctx context.Context, name string, atOrBefore int64) (events.Checkpoint, bool, error) {
	if err := s.lock(); err != nil {
		return events.Checkpoint{}, false, err
	}
	defer s.unlock()
	cps := s.log.checkpoints[name]
	i := sort.Search(len(cps), func(i int) bool { return cps[i].Position > atOrBefore })
	if i == 0 {
		return events.Checkpoint{}, false, nil
	}
	c := cps[i-1]
	c.State = append([]byte(nil), c.State...)
	return c, true, nil
}

func (s *Store) Close() error {
	s.log.mu.Lock()
	s.closed = true
	s.log.mu.Unlock()
	return nil
}

// Corrupt overwrites the stored type and payload at a position, bypassing
// every check: for the conformance suite's corruption test.
func (l *Log) Corrupt(position int64, typ string, payload []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rows[position-1]
	r.Type, r.Payload = typ, payload
	l.rows[position-1] = r
}
