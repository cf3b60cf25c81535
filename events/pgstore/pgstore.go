package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/cockroach-go/v2/crdb"
	"github.com/cockroachdb/cockroach-go/v2/crdb/crdbpgxv5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/migrations"
)

// The SQL this store sends, every statement valid for CockroachDB and
// PostgreSQL alike (Statements lists them for the parser test).
const (
	sqlVersion = `SELECT version()`

	sqlLeaseEpoch = `SELECT epoch FROM leases WHERE name = $1`
	sqlRequest    = `SELECT idempotency_key, first_position, last_position, fingerprint FROM requests WHERE idempotency_key = ANY($1::TEXT[]) LIMIT 1`
	sqlRequestGet = `SELECT first_position, last_position, fingerprint FROM requests WHERE idempotency_key = $1`
	// max() over the primary key reads one index entry on both databases.
	sqlHead = `SELECT COALESCE(max(position), 0) FROM events`
	// The tail's position and recorded time, for an append.
	sqlTail = `SELECT position, recorded_at FROM events ORDER BY position DESC LIMIT 1`
	// One index probe per stream: a GROUP BY would scan every version.
	sqlStreamVersions = `SELECT s.stream, COALESCE((SELECT e.stream_version FROM events AS e WHERE e.stream = s.stream ORDER BY e.stream_version DESC LIMIT 1), 0) FROM unnest($1::TEXT[]) AS s (stream)`
	sqlInsertEvents   = `INSERT INTO events (position, stream, stream_version, type, schema_version, occurred_at, recorded_at, actor, causation_id, correlation_id, idempotency_key, payload) ` +
		`SELECT * FROM unnest($1::INT8[], $2::TEXT[], $3::INT8[], $4::TEXT[], $5::INT4[], $6::TIMESTAMPTZ[], $7::TIMESTAMPTZ[], $8::TEXT[], $9::TEXT[], $10::TEXT[], $11::TEXT[], $12::BYTEA[])`
	sqlInsertRequest = `INSERT INTO requests (idempotency_key, first_position, last_position, fingerprint) SELECT * FROM unnest($1::TEXT[], $2::INT8[], $3::INT8[], $4::TEXT[])`

	sqlColumns    = `position, stream, stream_version, type, schema_version, occurred_at, recorded_at, actor, causation_id, correlation_id, idempotency_key, payload`
	sqlRead       = `SELECT ` + sqlColumns + ` FROM events WHERE position >= $1 ORDER BY position LIMIT $2`
	sqlReadStream = `SELECT ` + sqlColumns + ` FROM events WHERE stream = $1 ORDER BY stream_version`

	sqlLeaseGet    = `SELECT holder, epoch, expires_at FROM leases WHERE name = $1`
	sqlLeaseUpsert = `INSERT INTO leases (name, holder, epoch, expires_at) VALUES ($1, $2, $3, $4) ` +
		`ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, epoch = excluded.epoch, expires_at = excluded.expires_at`
	sqlLeaseRenew = `UPDATE leases SET expires_at = $4 WHERE name = $1 AND holder = $2 AND epoch = $3`

	sqlCheckpointSave = `INSERT INTO checkpoints (name, position, taken_at, state) VALUES ($1, $2, $3, $4) ` +
		`ON CONFLICT (name, position) DO UPDATE SET taken_at = excluded.taken_at, state = excluded.state`
	sqlCheckpointLoad = `SELECT position, taken_at, state FROM checkpoints WHERE name = $1 AND position <= $2 ORDER BY position DESC LIMIT 1`
)

// Statements returns every SQL statement the store sends.
func Statements() []string {
	return []string{
		sqlVersion, sqlLeaseEpoch, sqlRequest, sqlRequestGet, sqlHead, sqlTail, sqlStreamVersions, sqlInsertEvents,
		sqlInsertRequest, sqlRead, sqlReadStream, sqlLeaseGet, sqlLeaseUpsert, sqlLeaseRenew,
		sqlCheckpointSave, sqlCheckpointLoad,
	}
}

// Options tune a Store. The zero value is usable.
type Options struct {
	// Clock stamps recorded_at and judges lease expiry. Default time.Now.
	Clock func() time.Time
	// PollInterval is how often subscriptions look for appends made by other
	// processes. Default 100 ms.
	PollInterval time.Duration
	// MaxConns bounds the connection pool. Default: pgxpool's.
	MaxConns int32
}

// Store is the event log on CockroachDB or PostgreSQL.
type Store struct {
	pool      *pgxpool.Pool
	cockroach bool
	clock     func() time.Time
	poll      time.Duration
	notify    *events.Notifier
	closed    atomic.Bool
}

var _ events.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// or postgresql:// URL;
// cockroachdb:// is accepted as an alias). It does not migrate: see Migrate.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(normalizeURL(url))
	if err != nil {
		return nil, fmt.Errorf("pgstore: store URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	// A writer that stalls inside a transaction (a paused or partitioned
	// master) must not hold the lease row or the log's tail locked forever:
	// the server ends such a session after a while, and nobody waits on a
	// lock without bound. Both settings exist on CockroachDB too. A URL that
	// sets them wins.
	for k, v := range map[string]string{"idle_in_transaction_session_timeout": "5000", "lock_timeout": "10000"} {
		if _, ok := cfg.ConnConfig.RuntimeParams[k]; !ok {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connecting: %w", err)
	}
	var version string
	if err := pool.QueryRow(ctx, sqlVersion).Scan(&version); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: connecting to %s: %w", redact(cfg.ConnConfig), err)
	}
	s := &Store{
		pool:      pool,
		cockroach: strings.Contains(version, "CockroachDB"),
		clock:     opts.Clock,
		poll:      opts.PollInterval,
		notify:    events.NewNotifier(),
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	return s, nil
}

func normalizeURL(url string) string {
	if rest, ok := strings.CutPrefix(url, "cockroachdb://"); ok {
		return "postgresql://" + rest
	}
	return url
}

func redact(c *pgx.ConnConfig) string {
	return fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
}

// Migrate applies the event log's migrations.
func (s *Store) Migrate(ctx context.Context) error {
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	return migrations.UpPostgres(db, s.cockroach)
}

// Pool exposes the connection pool to packages that keep their own tables in
// the same database (none may touch the event log's tables).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close releases the pool. Subscriptions fail with ErrClosed afterwards.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.pool.Close()
		s.notify.Notify()
	}
	return nil
}

// retryable marks an error for the retry loop: a unique violation on the
// log's keys means a concurrent appender won the race, which PostgreSQL may
// report as 23505 instead of a serialization failure.
type retryable struct{ err error }

func (r retryable) Error() string    { return r.err.Error() }
func (r retryable) Unwrap() error    { return r.err }
func (r retryable) SQLState() string { return "40001" }

// readWrite runs fn in a SERIALIZABLE transaction and retries it on
// serialization failures. On CockroachDB this is crdbpgx.ExecuteTx, whose
// savepoint protocol is CockroachDB's own. On PostgreSQL that protocol is
// unsafe (RELEASE SAVEPOINT does not commit there, the COMMIT's error would be
// ignored, and a retry would reuse the failed snapshot), so the same library's
// crdb.ExecuteCtx retries whole transactions instead and COMMIT errors surface.
func (s *Store) readWrite(ctx context.Context, fn func(pgx.Tx) error) error {
	if s.closed.Load() {
		return events.ErrClosed
	}
	opts := pgx.TxOptions{IsoLevel: pgx.Serializable}
	attempt := 0
	wrapped := func(tx pgx.Tx) error {
		if attempt > 0 {
			// Jitter so that racing appenders do not collide again in step.
			time.Sleep(time.Duration(rand.IntN(200*attempt)) * time.Microsecond)
		}
		attempt++
		err := fn(tx)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return retryable{err}
		}
		return err
	}
	if s.cockroach {
		return crdbpgx.ExecuteTx(ctx, s.pool, opts, wrapped)
	}
	return crdb.ExecuteCtx(ctx, func(ctx context.Context, _ ...interface{}) error {
		tx, err := s.pool.BeginTx(ctx, opts)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := wrapped(tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
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
	var res []events.AppendResult
	duplicate := false
	err = s.readWrite(ctx, func(tx pgx.Tx) error {
		var err error
		res, duplicate, err = s.appendBatch(ctx, tx, b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: append: %w", err)
	}
	if !duplicate {
		s.notify.Notify()
	}
	return res, nil
}

// appendBatch appends b in tx, or returns the results of its first
// appending when its key was seen (duplicate).
func (s *Store) appendBatch(ctx context.Context, tx pgx.Tx, b *events.Batch) (res []events.AppendResult, duplicate bool, err error) {
	rows, keys, streams := b.Rows, b.Keys(), events.Streams(b.Rows)
	st, err := readAppendState(ctx, tx, keys, streams)
	if err != nil {
		return nil, false, err
	}
	if st.seen != nil {
		res, err := b.Seen(*st.seen)
		return res, err == nil, err
	}
	if err := events.CheckAppend(&b.Reqs[0], st.head, st.epoch); err != nil {
		return nil, false, err
	}
	events.AssignRows(rows, st.head, st.versions, events.RecordedAt(s.clock(), st.lastRecorded))
	if err := insertRows(ctx, tx, rows); err != nil {
		return nil, false, err
	}
	if len(keys) > 0 {
		if err := insertRequests(ctx, tx, b.Requests()); err != nil {
			return nil, false, err
		}
	}
	return b.Results(), false, nil
}

// appendState is what an append's decision needs of the store: the
// leader's epoch, the request stored under the batch's key if any, the
// log's head and the versions of the streams appended to.
type appendState struct {
	epoch, head  int64
	lastRecorded time.Time
	seen         *events.Request
	versions     map[string]int64
}

// readAppendState reads the append's state in one round trip.
func readAppendState(ctx context.Context, tx pgx.Tx, keys, streams []string) (appendState, error) {
	var st appendState
	batch := &pgx.Batch{}
	batch.Queue(sqlLeaseEpoch, events.LeaderLease)
	if len(keys) > 0 {
		batch.Queue(sqlRequest, keys)
	}
	batch.Queue(sqlTail)
	batch.Queue(sqlStreamVersions, streams)
	br := tx.SendBatch(ctx, batch)
	defer br.Close()

	if err := br.QueryRow().Scan(&st.epoch); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return st, err
	}
	if len(keys) > 0 {
		var seen events.Request
		err := br.QueryRow().Scan(&seen.Key, &seen.First, &seen.Last, &seen.Fingerprint)
		if err == nil {
			st.seen = &seen
			return st, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return st, err
		}
	}
	if err := br.QueryRow().Scan(&st.head, &st.lastRecorded); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return st, err
	}
	st.versions = make(map[string]int64, len(streams))
	vr, err := br.Query()
	if err != nil {
		return st, err
	}
	for vr.Next() {
		var stream string
		var v int64
		if err := vr.Scan(&stream, &v); err != nil {
			vr.Close()
			return st, err
		}
		st.versions[stream] = v
	}
	vr.Close()
	if err := vr.Err(); err != nil {
		return st, err
	}
	return st, br.Close()
}

// insertRequests keeps the batch's keyed requests, so that a resubmission
// gets the same results.
func insertRequests(ctx context.Context, tx pgx.Tx, reqs []events.Request) error {
	var ks, fps []string
	var firsts, lasts []int64
	for _, r := range reqs {
		ks, fps = append(ks, r.Key), append(fps, r.Fingerprint)
		firsts, lasts = append(firsts, r.First), append(lasts, r.Last)
	}
	_, err := tx.Exec(ctx, sqlInsertRequest, ks, firsts, lasts, fps)
	return err
}

func insertRows(ctx context.Context, tx pgx.Tx, rows []events.Row) error {
	n := len(rows)
	var (
		pos, ver           = make([]int64, n), make([]int64, n)
		stream, typ, actor = make([]string, n), make([]string, n), make([]string, n)
		cause, corr, key   = make([]string, n), make([]string, n), make([]string, n)
		schema             = make([]int32, n)
		occurred, recorded = make([]time.Time, n), make([]time.Time, n)
		payload            = make([][]byte, n)
	)
	for i := range rows {
		r := &rows[i]
		pos[i], stream[i], ver[i], typ[i], schema[i] = r.Position, r.Stream, r.StreamVersion, r.Type, r.SchemaVersion
		occurred[i], recorded[i], actor[i] = r.OccurredAt, r.RecordedAt, r.Actor
		cause[i], corr[i], key[i], payload[i] = r.CausationID, r.CorrelationID, r.IdempotencyKey, r.Payload
	}
	_, err := tx.Exec(ctx, sqlInsertEvents, pos, stream, ver, typ, schema, occurred, recorded, actor, cause, corr, key, payload)
	return err
}

// Read returns up to limit events from position `from` on.
func (s *Store) Read(ctx context.Context, from int64, limit int) ([]events.Event, error) {
	if s.closed.Load() {
		return nil, events.ErrClosed
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit: must be positive", events.ErrInvalid)
	}
	rows, err := s.pool.Query(ctx, sqlRead, from, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: read from %d: %w", from, err)
	}
	return scanEvents(rows, limit)
}

// ReadStream returns every event of one stream.
func (s *Store) ReadStream(ctx context.Context, stream string) ([]events.Event, error) {
	if s.closed.Load() {
		return nil, events.ErrClosed
	}
	rows, err := s.pool.Query(ctx, sqlReadStream, stream)
	if err != nil {
		return nil, fmt.Errorf("pgstore: read stream %q: %w", stream, err)
	}
	return scanEvents(rows, 16)
}

func scanEvents(rows pgx.Rows, capHint int) ([]events.Event, error) {
	defer rows.Close()
	out := make([]events.Event, 0, capHint)
	raws := make([][]byte, 0, capHint)
	for rows.Next() {
		var raw []byte
		var e events.Event
		if err := rows.Scan(&e.Position, &e.Stream, &e.StreamVersion, &e.Type, &e.SchemaVersion,
			&e.OccurredAt, &e.RecordedAt, &e.Actor, &e.CausationID, &e.CorrelationID, &e.IdempotencyKey, &raw); err != nil {
			return nil, fmt.Errorf("pgstore: scanning event: %w", err)
		}
		e.OccurredAt, e.RecordedAt = e.OccurredAt.UTC(), e.RecordedAt.UTC()
		out = append(out, e)
		raws = append(raws, raw)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: reading events: %w", err)
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
	if err := s.pool.QueryRow(ctx, sqlHead).Scan(&head); err != nil {
		return 0, fmt.Errorf("pgstore: head: %w", err)
	}
	return head, nil
}

// Subscribe tails the log after position `after`.
func (s *Store) Subscribe(after int64) *events.Subscription {
	return events.NewSubscription(s, s.notify, after, 1000, s.poll)
}

func (s *Store) getLease(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, name string) (events.Lease, bool, error) {
	l := events.Lease{Name: name}
	err := q.QueryRow(ctx, sqlLeaseGet, name).Scan(&l.Holder, &l.Epoch, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return events.Lease{}, false, nil
	}
	if err != nil {
		return events.Lease{}, false, err
	}
	return l, true, nil
}

// AcquireLease takes the named lease for holder.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (events.Lease, error) {
	var out events.Lease
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		stored, found, err := s.getLease(ctx, tx, name)
		if err != nil {
			return err
		}
		next, err := events.DecideAcquire(stored, found, name, holder, s.clock(), ttl)
		if err != nil {
			out = next
			return err
		}
		_, err = tx.Exec(ctx, sqlLeaseUpsert, name, holder, next.Epoch, next.ExpiresAt)
		out = next
		return err
	})
	if err != nil {
		return out, fmt.Errorf("pgstore: acquire lease: %w", err)
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
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sqlLeaseRenew, l.Name, l.Holder, l.Epoch, l.ExpiresAt)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: lease %q: %w", l.Name, err)
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
	err := s.pool.QueryRow(ctx, sqlRequestGet, key).Scan(&r.First, &r.Last, &r.Fingerprint)
	if errors.Is(err, pgx.ErrNoRows) {
		return events.Request{}, false, nil
	}
	if err != nil {
		return events.Request{}, false, fmt.Errorf("pgstore: request %q: %w", key, err)
	}
	return r, true, nil
}

// CurrentLease returns the named lease as stored.
func (s *Store) CurrentLease(ctx context.Context, name string) (events.Lease, bool, error) {
	if s.closed.Load() {
		return events.Lease{}, false, events.ErrClosed
	}
	l, ok, err := s.getLease(ctx, s.pool, name)
	if err != nil {
		return l, ok, fmt.Errorf("pgstore: lease %q: %w", name, err)
	}
	l.ExpiresAt = l.ExpiresAt.UTC()
	return l, ok, nil
}

// SaveCheckpoint stores a projection snapshot.
func (s *Store) SaveCheckpoint(ctx context.Context, c events.Checkpoint) error {
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sqlCheckpointSave, c.Name, c.Position, c.TakenAt, c.State)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: save checkpoint %q at %d: %w", c.Name, c.Position, err)
	}
	return nil
}

// LoadCheckpoint returns the newest snapshot of name at or before a position.
func (s *Store) LoadCheckpoint(ctx context.Context, name string, atOrBefore int64) (events.Checkpoint, bool, error) {
	if s.closed.Load() {
		return events.Checkpoint{}, false, events.ErrClosed
	}
	c := events.Checkpoint{Name: name}
	err := s.pool.QueryRow(ctx, sqlCheckpointLoad, name, atOrBefore).Scan(&c.Position, &c.TakenAt, &c.State)
	if errors.Is(err, pgx.ErrNoRows) {
		return events.Checkpoint{}, false, nil
	}
	if err != nil {
		return events.Checkpoint{}, false, fmt.Errorf("pgstore: load checkpoint %q: %w", name, err)
	}
	c.TakenAt = c.TakenAt.UTC()
	return c, true, nil
}
