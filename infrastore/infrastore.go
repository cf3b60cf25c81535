package infrastore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// Errors of the package; test with errors.Is.
var (
	// ErrInvalid: bad input to the API; the message names the field.
	ErrInvalid = errors.New("infrastore: invalid input")
	// ErrNotFound: what was asked for (a bill's row) does not exist.
	ErrNotFound = errors.New("infrastore: not found")
	// ErrBusy: another ingester (Run, CatchUp, Rebuild) is running on this store.
	ErrBusy = errors.New("infrastore: an ingester is already running")
	// ErrReadOnly: the store was opened read-only.
	ErrReadOnly = errors.New("infrastore: opened read-only")
	// ErrRebuildNeeded: the file was written by another schema version; run
	// Rebuild (corral infrastore rebuild) to re-derive it from the log.
	ErrRebuildNeeded = errors.New("infrastore: schema version changed, rebuild needed")
	// ErrLogGap: the event source skipped or repeated a position.
	ErrLogGap = errors.New("infrastore: the log is not contiguous")
	// ErrQueryRefused: the statement is not a read-only query.
	ErrQueryRefused = errors.New("infrastore: query refused")
	// ErrQueryTimeout: the query ran past its time limit and was cancelled.
	ErrQueryTimeout = errors.New("infrastore: query cancelled")
	// ErrQueryTooBig: the query needed more memory than the limit.
	ErrQueryTooBig = errors.New("infrastore: query too big")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("infrastore: closed")
)

// Options tune an Infrastore. The zero value is usable.
type Options struct {
	// ReadOnly opens the file read-only: queries and bills only, for
	// `corral sql --db PATH` on a file no master holds.
	ReadOnly bool
	// BatchSize is the most events applied in one transaction while
	// catching up. Default 50,000: big batches let DuckDB write whole row
	// groups and pay for fewer commits.
	BatchSize int
	// QueryTimeout is the time limit of a query given none. Default 30 s.
	QueryTimeout time.Duration
	// MaxRows is the most rows a query returns; Result.Truncated reports
	// the rest were dropped. Default 100,000.
	MaxRows int
	// MaxResultBytes bounds the values a query returns, about as held in
	// memory; past it the result is truncated like past MaxRows. Default
	// 64 MiB.
	MaxResultBytes int64
	// MemoryLimit is DuckDB's memory_limit, e.g. "4GB". Default DuckDB's
	// (80% of RAM).
	MemoryLimit string
	// Threads is DuckDB's worker threads. Default: one per core.
	Threads int
	// MemoryBudget is the memory the process may hold (its cgroup's
	// limit): past 85% of it (at least 128 MiB below it), running queries
	// that grew it are interrupted (memwatch.go). Default none: only
	// MemoryLimit bounds a query.
	MemoryBudget int64
}

func (o *Options) defaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = 50_000
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = 30 * time.Second
	}
	if o.MaxRows <= 0 {
		o.MaxRows = 100_000
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = 64 << 20
	}
}

// Infrastore is a cell's analytical store in one DuckDB file. Its methods
// are safe for concurrent use; one ingester runs at a time.
type Infrastore struct {
	path      string
	opts      Options
	connector *duckdb.Connector
	db        *sql.DB

	// memory interrupts queries when the process nears its budget.
	memory *memoryWatch

	// tableFunctions names every table function, table macro and pragma
	// the database knows (checkQuery).
	tableFunctions map[string]bool
	// refusedViews names DuckDB's views over table functions a query may
	// not call (checkQuery).
	refusedViews map[string]bool

	// writeMu serializes write transactions: batches, imports, resets.
	writeMu sync.Mutex
	// m is the ingester's model, matching pos; nil when it must be
	// (re)loaded, e.g. after a batch that did not commit.
	m     *model
	stale bool // stored schema version differs from schemaVersion

	// The hourly rollup's pace (rollup.go), kept by the writer: windows
	// appended since the last roll, and the log's time at it.
	unrolled int
	lastRoll time.Time
	// hook, set by tests, is called at each step of a batch so that a test
	// can crash the ingester between any two of them.
	hook func(point string)

	ingesting atomic.Bool
	closed    atomic.Bool

	posMu sync.Mutex
	pos   int64
	posCh chan struct{} // closed and replaced at every commit
}

// Open opens (creating if needed) the store in the DuckDB file at path.
//
// The database is locked down for every connection: no access to files or
// the network (enable_external_access=false), no extension installs or
// loads, and a locked configuration. Queries run on top of that in
// read-only transactions; see Query.
func Open(ctx context.Context, path string, opts Options) (*Infrastore, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: path: must not be empty", ErrInvalid)
	}
	if strings.ContainsAny(path, "?#") || path == ":memory:" {
		return nil, fmt.Errorf("%w: path: %q must name a file (no '?', '#' or :memory:)", ErrInvalid, path)
	}
	if opts.Threads < 0 {
		return nil, fmt.Errorf("%w: threads: must not be negative", ErrInvalid)
	}
	if opts.MemoryBudget < 0 {
		return nil, fmt.Errorf("%w: memory budget: must not be negative", ErrInvalid)
	}
	opts.defaults()
	cfg := url.Values{}
	cfg.Set("enable_external_access", "false")
	cfg.Set("autoinstall_known_extensions", "false")
	cfg.Set("autoload_known_extensions", "false")
	cfg.Set("allow_community_extensions", "false")
	cfg.Set("allow_unsigned_extensions", "false")
	// Checkpoints compress and rewrite what the WAL holds; at DuckDB's
	// default (16 MB) a busy ingester would checkpoint every few batches.
	cfg.Set("checkpoint_threshold", "256MB")
	// The allocator gives back what a query freed within about two
	// seconds, not never: after a query stopped at its memory (340 MiB),
	// the process otherwise keeps it all, and the memory watch
	// (memwatch.go) would stop the next queries that grow.
	cfg.Set("allocator_background_threads", "true")
	cfg.Set("lock_configuration", "true")
	if opts.ReadOnly {
		cfg.Set("access_mode", "READ_ONLY")
	}
	if opts.MemoryLimit != "" {
		cfg.Set("memory_limit", opts.MemoryLimit)
	}
	if opts.Threads > 0 {
		cfg.Set("threads", strconv.Itoa(opts.Threads))
	}
	connector, err := duckdb.NewConnector(path+"?"+cfg.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("infrastore: opening %s: %w", path, err)
	}
	s := &Infrastore{path: path, opts: opts, connector: connector, db: sql.OpenDB(connector), posCh: make(chan struct{}),
		memory: newMemoryWatch(opts.MemoryBudget)}
	if err := s.init(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("infrastore: opening %s: %w", path, err)
	}
	return s, nil
}

// init creates the schema (when writable) and reads the stored position.
func (s *Infrastore) init(ctx context.Context) error {
	if !s.opts.ReadOnly {
		s.sweepExports()
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := inTx(ctx, conn, func() error { return createSchema(ctx, conn) }); err != nil {
			return fmt.Errorf("creating the schema: %w", err)
		}
	}
	var version int32
	err := s.db.QueryRowContext(ctx, `SELECT schema_version, position FROM ingest_state`).Scan(&version, &s.pos)
	if err != nil {
		return fmt.Errorf("reading ingest_state: %w", err)
	}
	s.stale = version != schemaVersion
	if s.tableFunctions, err = loadTableFunctions(ctx, s.db); err != nil {
		return fmt.Errorf("reading the catalog's table functions: %w", err)
	}
	if s.refusedViews, err = s.loadRefusedViews(ctx); err != nil {
		return fmt.Errorf("reading the catalog's views: %w", err)
	}
	return nil
}

// createSchema creates what is missing; it is idempotent.
func createSchema(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, ddlIngestState); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, ddlCell); err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := conn.ExecContext(ctx, t.ddl); err != nil {
			return fmt.Errorf("table %s: %w", t.name, err)
		}
	}
	if _, err := conn.ExecContext(ctx, ddlMacros); err != nil {
		return fmt.Errorf("macros: %w", err)
	}
	if _, err := conn.ExecContext(ctx, ddlPricing); err != nil {
		return fmt.Errorf("pricing views: %w", err)
	}
	if _, err := conn.ExecContext(ctx, ddlWaits); err != nil {
		return fmt.Errorf("pending_reasons: %w", err)
	}
	if _, err := conn.ExecContext(ctx, ddlAsOf); err != nil {
		return fmt.Errorf("state-at-time macros: %w", err)
	}
	_, err := conn.ExecContext(ctx, `INSERT INTO ingest_state SELECT ?, 0 WHERE NOT EXISTS (SELECT 1 FROM ingest_state)`, schemaVersion)
	return err
}

// inTx runs fn inside BEGIN/COMMIT on conn, rolling back when fn fails or
// panics.
func inTx(ctx context.Context, conn *sql.Conn, fn func() error) (err error) {
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			// Background: the rollback must run even when ctx ended.
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	if err := fn(); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return err
	}
	committed = true
	return nil
}

// Path is the DuckDB file.
func (s *Infrastore) Path() string { return s.path }

// Close closes the database. A batch in flight is rolled back.
func (s *Infrastore) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	return errors.Join(s.db.Close(), s.connector.Close())
}

// Position returns the last log position applied.
func (s *Infrastore) Position(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.opts.ReadOnly {
		var p int64
		err := s.db.QueryRowContext(ctx, `SELECT position FROM ingest_state`).Scan(&p)
		return p, err
	}
	s.posMu.Lock()
	defer s.posMu.Unlock()
	return s.pos, nil
}

// WaitPosition blocks until the position applied is at least p, so that a
// client can read its own writes: a command's reply carries the position
// of its events.
func (s *Infrastore) WaitPosition(ctx context.Context, p int64) error {
	for {
		s.posMu.Lock()
		pos, ch := s.pos, s.posCh
		s.posMu.Unlock()
		if pos >= p {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("infrastore: waiting for position %d (at %d): %w", p, pos, ctx.Err())
		case <-ch:
		}
	}
}

func (s *Infrastore) setPosition(p int64) {
	s.posMu.Lock()
	s.pos = p
	close(s.posCh)
	s.posCh = make(chan struct{})
	s.posMu.Unlock()
}

func (s *Infrastore) position() int64 {
	s.posMu.Lock()
	defer s.posMu.Unlock()
	return s.pos
}

// claim marks an ingester as running; release ends the claim.
func (s *Infrastore) claim() (release func(), err error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if !s.ingesting.CompareAndSwap(false, true) {
		return nil, ErrBusy
	}
	return func() { s.ingesting.Store(false) }, nil
}
