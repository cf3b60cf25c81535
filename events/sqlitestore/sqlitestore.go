package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/migrations"
)

const (
	sqlLeaseEpoch    = `SELECT epoch FROM leases WHERE name = ?`
	sqlRequest       = `SELECT first_position, last_position, fingerprint FROM requests WHERE idempotency_key = ?`
	sqlHead          = `SELECT COALESCE(max(position), 0) FROM events`
	sqlTail          = `SELECT position, recorded_at FROM events ORDER BY position DESC LIMIT 1`
	sqlStreamVersion = `SELECT COALESCE(max(stream_version), 0) FROM events WHERE stream = ?`
	sqlInsertEvent   = `INSERT INTO events (position, stream, stream_version, type, schema_version, occurred_at, recorded_at, actor, causation_id, correlation_id, idempotency_key, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertRequest = `INSERT INTO requests (idempotency_key, first_position, last_position, fingerprint) VALUES (?, ?, ?, ?)`
	sqlColumns       = `position, stream, stream_version, type, schema_version, occurred_at, recorded_at, actor, causation_id, correlation_id, idempotency_key, payload`
	sqlReadRange     = `SELECT ` + sqlColumns + ` FROM events WHERE position >= ? AND position < ? ORDER BY position LIMIT ?`
	sqlReadStream    = `SELECT ` + sqlColumns + ` FROM events WHERE stream = ? ORDER BY stream_version`

	sqlLeaseGet    = `SELECT holder, epoch, expires_at FROM leases WHERE name = ?`
	sqlLeaseUpsert = `INSERT INTO leases (name, holder, epoch, expires_at) VALUES (?, ?, ?, ?) ` +
		`ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, epoch = excluded.epoch, expires_at = excluded.expires_at`
	sqlLeaseRenew = `UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ? AND epoch = ?`

	sqlCheckpointSave = `INSERT INTO checkpoints (name, position, taken_at, state) VALUES (?, ?, ?, ?) ` +
		`ON CONFLICT (name, position) DO UPDATE SET taken_at = excluded.taken_at, state = excluded.state`
	sqlCheckpointLoad = `SELECT position, taken_at, state FROM checkpoints WHERE name = ? AND position <= ? ORDER BY position DESC LIMIT 1`
)

// Options tune a Store. The zero value is usable.
type Options struct {
	// Clock stamps recorded_at and judges lease expiry. Default time.Now.
	Clock func() time.Time
	// PollInterval is how often subscriptions look for appends made by other
	// processes sharing the file. Default 100 ms.
	PollInterval time.Duration
}

// Store is the event log in one SQLite file.
type Store struct {
	db     *sql.DB
	path   string
	clock  func() time.Time
	poll   time.Duration
	notify *events.Notifier
	// writeMu serializes this process's writers; other processes wait on
	// SQLite's lock (busy_timeout).
	writeMu sync.Mutex
	closed  atomic.Bool
}

var _ events.Store = (*Store)(nil)

// Open opens (creating if needed) the log at path and applies its migrations.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: sqlite path: must not be empty", events.ErrInvalid)
	}
	path = strings.TrimPrefix(path, "sqlite://")
	q := url.Values{}
	// WAL lets readers (subscriptions) run beside the writer; FULL makes an
	// acknowledged append survive a power loss, not only a crash.
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	// Migrations get their own handle: the migrator closes it when done.
	mdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: opening %s: %w", path, err)
	}
	if err := mdb.PingContext(ctx); err != nil {
		mdb.Close()
		return nil, fmt.Errorf("sqlitestore: opening %s: %w", path, err)
	}
	if err := migrations.UpSQLite(mdb); err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: opening %s: %w", path, err)
	}
	s := &Store{db: db, path: path, clock: opts.Clock, poll: opts.PollInterval, notify: events.NewNotifier()}
	if s.clock == nil {
		s.clock = time.Now
	}
	return s, nil
}

// Path is the file the log lives in.
func (s *Store) Path() string { return s.path }

// Close closes the database. Subscriptions fail with ErrClosed afterwards.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.notify.Notify()
	return s.db.Close()
}

func (s *Store) write(ctx context.Context, fn func(*sql.Tx) error) error {
	if s.closed.Load() {
		return events.ErrClosed
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: see _txlock
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Append writes the request's events in one transaction.
func (s *Store) Append(ctx context.Context, req events.AppendRequest) (events.AppendResult, error) {
	res, err := s.AppendMany(ctx, []events.AppendRequest{req})
	if err != nil {
		return events.AppendResult{}, err
	}
	return res[0], nil
}

// AppendMany writes several requests in one transaction.
func (s *Store) AppendMany(ctx context.Context, reqs []events.AppendRequest) ([]events.AppendResult, error) {
	b, err := events.ValidateBatch(reqs)
	if err != nil {
		return nil, err
	}
	rows := b.Rows
	var res []events.AppendResult
	duplicate := false
	err = s.write(ctx, func(tx *sql.Tx) error {
		var epoch int64
		if err := tx.QueryRowContext(ctx, sqlLeaseEpoch, events.LeaderLease).Scan(&epoch); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		for _, key := range b.Keys() {
			seen := events.Request{Key: key}
			err := tx.QueryRowContext(ctx, sqlRequest, key).Scan(&seen.First, &seen.Last, &seen.Fingerprint)
			if err == nil {
				var seenErr error
				res, seenErr = b.Seen(seen)
				duplicate = seenErr == nil
				return seenErr
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		var head, lastRecordedUS int64
		if err := tx.QueryRowContext(ctx, sqlTail).Scan(&head, &lastRecordedUS); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := events.CheckAppend(&b.Reqs[0], head, epoch); err != nil {
			return err
		}
		streams := events.Streams(rows)
		versions := make(map[string]int64, len(streams))
		vstmt, err := tx.PrepareContext(ctx, sqlStreamVersion)
		if err != nil {
			return err
		}
		defer vstmt.Close()
		for _, st := range streams {
			var v int64
			if err := vstmt.QueryRowContext(ctx, st).Scan(&v); err != nil {
				return err
			}
			versions[st] = v
		}
		events.AssignRows(rows, head, versions, events.RecordedAt(s.clock(), time.UnixMicro(lastRecordedUS)))
		ins, err := tx.PrepareContext(ctx, sqlInsertEvent)
		if err != nil {
			return err
		}
		defer ins.Close()
		for i := range rows {
			r := &rows[i]
			if _, err := ins.ExecContext(ctx, r.Position, r.Stream, r.StreamVersion, r.Type, r.SchemaVersion,
				r.OccurredAt.UnixMicro(), r.RecordedAt.UnixMicro(), r.Actor, r.CausationID, r.CorrelationID,
				r.IdempotencyKey, r.Payload); err != nil {
				return err
			}
		}
		res = b.Results()
		for _, r := range b.Requests() {
			if _, err := tx.ExecContext(ctx, sqlInsertRequest, r.Key, r.First, r.Last, r.Fingerprint); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: append: %w", err)
	}
	if !duplicate {
		s.notify.Notify()
	}
	return res, nil
}

// Read returns up to limit events from position `from` on. A long read is
// split into two position ranges scanned on two connections at once:
// scanning rows is most of the cost, and positions have no gaps, so the
// halves meet exactly. If the first half stops short of its range (it
// reached the head), the second half is dropped, so a concurrent append can
// never show up as a gap.
func (s *Store) Read(ctx context.Context, from int64, limit int) ([]events.Event, error) {
	if s.closed.Load() {
		return nil, events.ErrClosed
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit: must be positive", events.ErrInvalid)
	}
	if limit < 2*splitRead {
		return s.readRange(ctx, from, from+int64(limit), limit)
	}
	mid := from + int64(limit/2)
	var second []events.Event
	var secondErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		second, secondErr = s.readRange(ctx, mid, from+int64(limit), limit-limit/2)
	}()
	first, err := s.readRange(ctx, from, mid, limit/2)
	<-done
	if err != nil {
		return nil, err
	}
	if int64(len(first)) < mid-from {
		return first, nil
	}
	if secondErr != nil {
		return nil, secondErr
	}
	return append(first, second...), nil
}

// splitRead is the smallest half worth a second connection.
const splitRead = 1000

func (s *Store) readRange(ctx context.Context, from, to int64, limit int) ([]events.Event, error) {
	rows, err := s.db.QueryContext(ctx, sqlReadRange, from, to, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: read from %d: %w", from, err)
	}
	return scanEvents(rows, limit)
}

// ReadStream returns every event of one stream.
func (s *Store) ReadStream(ctx context.Context, stream string) ([]events.Event, error) {
	if s.closed.Load() {
		return nil, events.ErrClosed
	}
	rows, err := s.db.QueryContext(ctx, sqlReadStream, stream)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: read stream %q: %w", stream, err)
	}
	return scanEvents(rows, 16)
}

func scanEvents(rows *sql.Rows, capHint int) ([]events.Event, error) {
	defer rows.Close()
	out := make([]events.Event, 0, capHint)
	raws := make([][]byte, 0, capHint)
	var occurred, recorded int64
	for rows.Next() {
		var raw []byte
		var e events.Event
		if err := rows.Scan(&e.Position, &e.Stream, &e.StreamVersion, &e.Type, &e.SchemaVersion,
			&occurred, &recorded, &e.Actor, &e.CausationID, &e.CorrelationID, &e.IdempotencyKey, &raw); err != nil {
			return nil, fmt.Errorf("sqlitestore: scanning event: %w", err)
		}
		e.OccurredAt, e.RecordedAt = time.UnixMicro(occurred).UTC(), time.UnixMicro(recorded).UTC()
		out = append(out, e)
		raws = append(raws, raw)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: reading events: %w", err)
	}
	if err := events.DecodeAll(out, raws); err != nil {
		return nil, err
	}
	return out, nil
}

// Head returns the last committed position.
func (s *Store) Head(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, events.ErrClosed
	}
	var head int64
	if err := s.db.QueryRowContext(ctx, sqlHead).Scan(&head); err != nil {
		return 0, fmt.Errorf("sqlitestore: head: %w", err)
	}
	return head, nil
}

// Subscribe tails the log after position `after`.
func (s *Store) Subscribe(after int64) *events.Subscription {
	return events.NewSubscription(s, s.notify, after, 1000, s.poll)
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getLease(ctx context.Context, q queryRower, name string) (events.Lease, bool, error) {
	l := events.Lease{Name: name}
	var exp int64
	err := q.QueryRowContext(ctx, sqlLeaseGet, name).Scan(&l.Holder, &l.Epoch, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return events.Lease{}, false, nil
	}
	if err != nil {
		return events.Lease{}, false, err
	}
	l.ExpiresAt = time.UnixMicro(exp).UTC()
	return l, true, nil
}

// AcquireLease takes the named lease for holder.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (events.Lease, error) {
	var out events.Lease
	err := s.write(ctx, func(tx *sql.Tx) error {
		stored, found, err := getLease(ctx, tx, name)
		if err != nil {
			return err
		}
		next, err := events.DecideAcquire(stored, found, name, holder, s.clock(), ttl)
		out = next
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, sqlLeaseUpsert, name, holder, next.Epoch, next.ExpiresAt.UnixMicro())
		return err
	})
	if err != nil {
		return out, fmt.Errorf("sqlitestore: acquire lease: %w", err)
	}
	return out, nil
}

// RenewLease extends a lease its holder still has.
func (s *Store) RenewLease(ctx context.Context, l events.Lease, ttl time.Duration) (events.Lease, error) {
	l.ExpiresAt = events.LeaseExpiry(s.clock(), ttl)
	return l, s.setExpiry(ctx, l)
}

// ReleaseLease ends a lease at once.
func (s *Store) ReleaseLease(ctx context.Context, l events.Lease) error {
	l.ExpiresAt = events.ReleasedExpiry()
	return s.setExpiry(ctx, l)
}

func (s *Store) setExpiry(ctx context.Context, l events.Lease) error {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, sqlLeaseRenew, l.ExpiresAt.UnixMicro(), l.Name, l.Holder, l.Epoch)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: lease %q: %w", l.Name, err)
	}
	if n == 0 {
		return events.LeaseLost(l)
	}
	return nil
}

// Request returns what the store keeps of a keyed request.
func (s *Store) Request(ctx context.Context, key string) (events.Request, bool, error) {
	if s.closed.Load() {
		return events.Request{}, false, events.ErrClosed
	}
	r := events.Request{Key: key}
	err := s.db.QueryRowContext(ctx, sqlRequest, key).Scan(&r.First, &r.Last, &r.Fingerprint)
	if errors.Is(err, sql.ErrNoRows) {
		return events.Request{}, false, nil
	}
	if err != nil {
		return events.Request{}, false, fmt.Errorf("sqlitestore: request %q: %w", key, err)
	}
	return r, true, nil
}

// CurrentLease returns the named lease as stored.
func (s *Store) CurrentLease(ctx context.Context, name string) (events.Lease, bool, error) {
	if s.closed.Load() {
		return events.Lease{}, false, events.ErrClosed
	}
	l, ok, err := getLease(ctx, s.db, name)
	if err != nil {
		return l, ok, fmt.Errorf("sqlitestore: lease %q: %w", name, err)
	}
	return l, ok, nil
}

// SaveCheckpoint stores a projection snapshot.
func (s *Store) SaveCheckpoint(ctx context.Context, c events.Checkpoint) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, sqlCheckpointSave, c.Name, c.Position, c.TakenAt.UnixMicro(), c.State)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: save checkpoint %q at %d: %w", c.Name, c.Position, err)
	}
	return nil
}

// LoadCheckpoint returns the newest snapshot of name at or before a position.
func (s *Store) LoadCheckpoint(ctx context.Context, name string, atOrBefore int64) (events.Checkpoint, bool, error) {
	if s.closed.Load() {
		return events.Checkpoint{}, false, events.ErrClosed
	}
	c := events.Checkpoint{Name: name}
	var taken int64
	err := s.db.QueryRowContext(ctx, sqlCheckpointLoad, name, atOrBefore).Scan(&c.Position, &taken, &c.State)
	if errors.Is(err, sql.ErrNoRows) {
		return events.Checkpoint{}, false, nil
	}
	if err != nil {
		return events.Checkpoint{}, false, fmt.Errorf("sqlitestore: load checkpoint %q: %w", name, err)
	}
	c.TakenAt = time.UnixMicro(taken).UTC()
	return c, true, nil
}

// ExecForTest runs a statement on the file directly, bypassing the log's
// rules. Tests use it to damage rows on purpose; nothing else may.
func (s *Store) ExecForTest(query string, args ...any) error {
	_, err := s.db.Exec(query, args...)
	return err
}
