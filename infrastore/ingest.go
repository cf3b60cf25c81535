package infrastore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/feed"
)

// Run ingests the log in store until ctx ends (it then returns ctx.Err())
// or an error occurs: it catches up in large batches from the position
// stored in the file, then follows new events through the event feed (a
// watermill router with retries and a poison queue, events/feed). A file
// written by another schema version is rebuilt from the log first: it is
// derived data. Calling Run again resumes where the last committed batch
// ended, whatever moment the previous run stopped at. It is the one tail:
// the corral command's Infrastore process runs it.
func (s *Infrastore) Run(ctx context.Context, store events.Tailer) error {
	release, err := s.claim()
	if err != nil {
		return err
	}
	defer release()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		if s.stale {
			if err := s.rebuild(ctx, conn, store); err != nil {
				return fmt.Errorf("rebuilding the Infrastore for its new schema: %w", err)
			}
		}
		err := s.catchUp(ctx, conn, store)
		if err == nil {
			var f *feed.Feed
			if f, err = feed.New(store, feed.Options{}, feedConsumer{s, conn}); err == nil {
				err = f.Run(ctx)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, ErrRebuildNeeded) {
			return err
		}
	}
}

// feedConsumer is the Infrastore as Run's consumer of the event feed, on
// Run's connection and claim: its position is stored in the file in the
// same transaction as what it applied.
type feedConsumer struct {
	s    *Infrastore
	conn *sql.Conn
}

func (feedConsumer) Name() string { return "infrastore" }

func (c feedConsumer) Position(context.Context) (int64, error) { return c.s.position(), nil }

func (c feedConsumer) Apply(ctx context.Context, evs []events.Event) error {
	return c.s.applyEvents(ctx, c.conn, evs)
}

// CatchUp applies every event up to the log's head and returns the position
// reached. It is Run without the wait at the end.
func (s *Infrastore) CatchUp(ctx context.Context, store events.Reader) (int64, error) {
	release, err := s.claim()
	if err != nil {
		return 0, err
	}
	defer release()
	if s.stale {
		return 0, ErrRebuildNeeded
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	err = s.catchUp(ctx, conn, store)
	return s.position(), err
}

// Apply applies events that follow Position without a gap, storing them and
// the new position in one transaction: the entry point for a consumer of
// the event feed (events/feed), which delivers committed batches once.
func (s *Infrastore) Apply(ctx context.Context, evs []events.Event) error {
	release, err := s.claim()
	if err != nil {
		return err
	}
	defer release()
	if s.stale {
		return ErrRebuildNeeded
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return s.applyEvents(ctx, conn, evs)
}

// Rebuild re-derives every table from the log: it drops and recreates the
// tables with the current schema (rows imported from a trace are kept), then
// replays the log from position 1. Until it finishes, queries see a partial
// history; if it stops early, Run or CatchUp goes on from where it stopped.
func (s *Infrastore) Rebuild(ctx context.Context, store events.Reader) (int64, error) {
	release, err := s.claim()
	if err != nil {
		return 0, err
	}
	defer release()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	err = s.rebuild(ctx, conn, store)
	return s.position(), err
}

// rebuild is Rebuild under the caller's claim, on its connection.
func (s *Infrastore) rebuild(ctx context.Context, conn *sql.Conn, store events.Reader) error {
	if err := s.reset(ctx, conn); err != nil {
		return fmt.Errorf("infrastore: rebuild: %w", err)
	}
	if err := s.catchUp(ctx, conn, store); err != nil {
		return fmt.Errorf("infrastore: rebuild: %w", err)
	}
	// Reclaim the dropped tables' blocks now rather than at some later write.
	if _, err := conn.ExecContext(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("infrastore: rebuild: checkpoint: %w", err)
	}
	return nil
}

// traceTables are the tables that may hold rows of other sources than the
// log; a rebuild keeps those rows.
var traceTables = []string{"task_events", "job_events", "machine_events", "task_usage"}

// reset drops and recreates every table in one transaction, keeping rows
// imported from traces, and sets the position back to 0.
func (s *Infrastore) reset(ctx context.Context, conn *sql.Conn) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	err := inTx(ctx, conn, func() error {
		for _, t := range traceTables {
			// BY NAME on the way back: columns added since keep their default.
			if _, err := conn.ExecContext(ctx, fmt.Sprintf(
				`CREATE OR REPLACE TEMP TABLE keep_%s AS SELECT * FROM %s WHERE source <> '%s'`, t, t, SourceLog)); err != nil {
				return err
			}
		}
		for i := len(tables) - 1; i >= 0; i-- {
			if _, err := conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+tables[i].name); err != nil {
				return err
			}
		}
		if _, err := conn.ExecContext(ctx, "DROP TABLE IF EXISTS ingest_state"); err != nil {
			return err
		}
		if err := dropStaging(ctx, conn); err != nil {
			return err
		}
		if err := createSchema(ctx, conn); err != nil {
			return err
		}
		for _, t := range traceTables {
			if _, err := conn.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s BY NAME SELECT * FROM keep_%s`, t, t)); err != nil {
				return err
			}
			if _, err := conn.ExecContext(ctx, "DROP TABLE keep_"+t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.m, s.stale = newModel(), false
	s.unrolled, s.lastRoll = 0, time.Time{}
	s.setPosition(0)
	return nil
}

// fetched is one batch read ahead of the builder, payloads encoded.
type fetched struct {
	evs      []events.Event
	payloads []string
	err      error
}

// built is one batch ready for the writer.
type built struct {
	b    *batch
	last int64
	err  error
}

// catchUp applies batches until a read returns nothing. Three goroutines
// work on consecutive batches: one reads and encodes payloads, one folds
// them into the model and builds the rows, and this one writes them to
// DuckDB. The builder runs ahead of the commits, so the model it leaves is
// kept only once every batch it built is committed.
func (s *Infrastore) catchUp(ctx context.Context, conn *sql.Conn, r events.Reader) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	m, err := s.takeModel(ctx, conn)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	read := make(chan fetched, 1)
	ready := make(chan built, 1)
	from := s.position() + 1
	wg.Go(func() {
		defer close(read)
		for {
			evs, err := r.Read(ctx, from, s.opts.BatchSize)
			var f fetched
			switch {
			case err != nil:
				f.err = err
			case len(evs) == 0:
				return
			default:
				f.err = contiguous(from, evs)
				f.evs, f.payloads = evs, encodePayloads(evs)
				from = evs[len(evs)-1].Position + 1
			}
			select {
			case read <- f:
			case <-ctx.Done():
				return
			}
			if f.err != nil {
				return
			}
		}
	})
	wg.Go(func() {
		defer close(ready)
		for f := range read {
			var out built
			if out.err = f.err; out.err == nil {
				out.b, out.err = m.build(f.evs, f.payloads)
				out.last = f.evs[len(f.evs)-1].Position
			}
			select {
			case ready <- out:
			case <-ctx.Done():
				return
			}
			if out.err != nil {
				return
			}
		}
	})
	for p := range ready {
		if p.err != nil {
			return p.err
		}
		if err := s.writeBatch(ctx, conn, p.b, s.position(), p.last); err != nil {
			return err
		}
		s.setPosition(p.last)
		s.hookAt("committed")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.m = m
	return nil
}

// contiguous checks that evs continue the log at position from.
func contiguous(from int64, evs []events.Event) error {
	for i := range evs {
		if want := from + int64(i); evs[i].Position != want {
			return fmt.Errorf("%w: expected position %d, read %d", ErrLogGap, want, evs[i].Position)
		}
	}
	return nil
}

func encodePayloads(evs []events.Event) []string {
	out := make([]string, len(evs))
	var buf []byte
	for i := range evs {
		buf = appendPayloadJSON(buf[:0], evs[i].Data)
		out[i] = string(buf)
	}
	return out
}

// takeModel hands the model to an ingester, loading it when needed. Until
// the ingester gives it back, s.m is nil: a batch that does not commit
// leaves the model ahead of the file, and the next one must reload it.
func (s *Infrastore) takeModel(ctx context.Context, conn *sql.Conn) (*model, error) {
	m := s.m
	s.m = nil
	if m != nil {
		return m, nil
	}
	m, err := loadModel(ctx, conn, s.position())
	if err != nil {
		return nil, fmt.Errorf("infrastore: loading the ingester's state: %w", err)
	}
	return m, nil
}

// specJSON is a spec's JSON for the appender of a JSON column.
func specJSON(s *events.JobSpec) json.RawMessage { return json.RawMessage(payloadJSON(s)) }

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

func duckdbMap(m map[any]any) any { return duckdb.Map(m) }

// hookAt lets a test crash the ingester at a named step.
func (s *Infrastore) hookAt(point string) {
	if s.hook != nil {
		s.hook(point)
	}
}

// applyEvents applies one batch, as Run does for each batch it is woken
// with.
func (s *Infrastore) applyEvents(ctx context.Context, conn *sql.Conn, evs []events.Event) error {
	if len(evs) == 0 {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	prev := s.position()
	if err := contiguous(prev+1, evs); err != nil {
		return err
	}
	m, err := s.takeModel(ctx, conn)
	if err != nil {
		return err
	}
	last := evs[len(evs)-1].Position
	b, err := m.build(evs, encodePayloads(evs))
	if err != nil {
		return err
	}
	if err := s.writeBatch(ctx, conn, b, prev, last); err != nil {
		return err
	}
	s.m = m
	s.setPosition(last)
	s.hookAt("committed")
	return nil
}

// writeBatch stores a batch's rows and its last position in one
// transaction: either all of them are stored, or none.
func (s *Infrastore) writeBatch(ctx context.Context, conn *sql.Conn, b *batch, prev, last int64) error {
	s.hookAt("begin")
	err := inTx(ctx, conn, func() error {
		if err := s.appendAll(conn, []tableRows{
			{"events", b.events}, {"job_specs", b.jobSpecs}, {"task_events", b.taskEvents},
			{"job_events", b.jobEvents}, {"machine_events", b.machineEvents},
			{"task_usage", b.taskUsage}, {"scheduling_decisions", b.decisions},
		}); err != nil {
			return err
		}
		if err := s.replaceCurrent(ctx, conn, b); err != nil {
			return err
		}
		if err := writeCheckpoint(ctx, conn, b, last); err != nil {
			return err
		}
		if err := s.rollBatch(ctx, conn, b, last); err != nil {
			return err
		}
		s.hookAt("position")
		res, err := conn.ExecContext(ctx, `UPDATE ingest_state SET position = ? WHERE position = ?`, last, prev)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			// Another writer moved the position: applying would duplicate.
			return fmt.Errorf("%w: stored position is no longer %d", ErrLogGap, prev)
		}
		s.hookAt("commit")
		return nil
	})
	if err != nil {
		return fmt.Errorf("infrastore: applying positions %d-%d: %w", prev+1, last, err)
	}
	return nil
}

type tableRows struct {
	table string
	rows  []row
}

// appendAll appends rows with DuckDB's appender, table by table.
func (s *Infrastore) appendAll(conn *sql.Conn, ts []tableRows) error {
	return conn.Raw(func(dc any) error {
		for _, t := range ts {
			if len(t.rows) == 0 {
				continue
			}
			if err := s.appendTable(dc.(driver.Conn), t); err != nil {
				return err
			}
			s.hookAt("appended:" + t.table)
		}
		return nil
	})
}

// queryAppend appends to a table through DuckDB's query appender: rows
// arrive in a temporary table of the given types, and an INSERT ... SELECT
// fills the table. It is used where that is cheaper than appending every
// column from Go: constant and derived columns are computed in DuckDB, and a
// payload that arrives as VARCHAR is cast to JSON there (the driver's JSON
// path re-encodes every value with encoding/json).
type queryAppend struct {
	insert string
	types  []duckdb.Type
}

const (
	tBigint  = duckdb.TYPE_BIGINT
	tInt     = duckdb.TYPE_INTEGER
	tVarchar = duckdb.TYPE_VARCHAR
	tDouble  = duckdb.TYPE_DOUBLE
	tTS      = duckdb.TYPE_TIMESTAMP
)

// bandSQL is bandOf in SQL, generated from the one definition of the bands.
func bandSQL(priority string) string { return events.BandSQL(priority) }

// tHours marks a DECIMAL(18,9) column: Go computes the unscaled value.
const tHours = duckdb.TYPE_DECIMAL

var queryAppends = map[string]queryAppend{
	"events": {
		insert: `INSERT INTO events SELECT c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12::JSON FROM appended_data`,
		types:  []duckdb.Type{tBigint, tTS, tTS, tVarchar, tInt, tVarchar, tBigint, tVarchar, tVarchar, tVarchar, tVarchar, tVarchar},
	},
	// Rows of the log never miss information, never restrict machines.
	"task_events": {
		insert: `INSERT INTO task_events SELECT c1, NULL, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, false, '` + SourceLog + `',
			c12, c13, c14, c15, c16, c17, c18 FROM appended_data`,
		types: []duckdb.Type{tBigint, tVarchar, tInt, tVarchar, tInt, tVarchar, tInt, tInt, tDouble, tDouble, tDouble,
			tBigint, tVarchar, tVarchar, tBigint, tVarchar, tInt, tVarchar},
	},
	// The band and the byte-seconds of a window are derived here; the
	// hours come from Go (scaledRatio), which divides faster than DuckDB's
	// 128-bit integers.
	"task_usage": {
		insert: `INSERT INTO task_usage SELECT c1, c2, c3, c4, c5, c6, '` + SourceLog + `', c7, c8, c9, c10, ` + bandSQL("c10") + `,
			c11, c12, c13, c14, ((greatest(c12, 0)::HUGEINT * greatest(c2 - c1, 0))::DECIMAL(38,0) * 0.000001::DECIMAL(7,6))::DECIMAL(38,6),
			c15, c16, c17, c18, c19, c20, c21, c22, c23, c24, c25, c26, c27, c28, c29
		FROM appended_data`,
		types: []duckdb.Type{tBigint, tBigint, tVarchar, tInt, tVarchar, tVarchar, tBigint, tBigint, tBigint, tInt,
			tDouble, tBigint, tBigint, tBigint, tBigint, tBigint, tBigint, tBigint, tBigint, tBigint,
			tHours, tHours, tHours, tHours, tHours, tHours, tHours, tBigint, tHours},
	},
}

func newAppender(dc driver.Conn, table string) (*duckdb.Appender, error) {
	qa, ok := queryAppends[table]
	if !ok {
		catalog := ""
		if strings.HasPrefix(table, "staged_") {
			catalog = "temp"
		}
		return duckdb.NewAppender(dc, catalog, "", table)
	}
	types := make([]duckdb.TypeInfo, len(qa.types))
	names := make([]string, len(qa.types))
	for i, t := range qa.types {
		var ti duckdb.TypeInfo
		var err error
		if t == tHours {
			ti, err = duckdb.NewDecimalInfo(18, QuantityScale)
		} else {
			ti, err = duckdb.NewTypeInfo(t)
		}
		if err != nil {
			return nil, err
		}
		types[i], names[i] = ti, fmt.Sprintf("c%d", i+1)
	}
	return duckdb.NewQueryAppender(dc, qa.insert, "", types, names)
}

func (s *Infrastore) appendTable(dc driver.Conn, t tableRows) (err error) {
	a, err := newAppender(dc, t.table)
	if err != nil {
		return fmt.Errorf("appender for %s: %w", t.table, err)
	}
	closed := false
	defer func() {
		if !closed {
			// Also on a panic: free the appender; the transaction it
			// wrote into is rolled back by the caller.
			err = errors.Join(err, a.Close())
		}
	}()
	for i, row := range t.rows {
		if err := a.AppendRow(row...); err != nil {
			return fmt.Errorf("appending to %s: %w", t.table, err)
		}
		if i == len(t.rows)/2 {
			s.hookAt("append:" + t.table)
		}
	}
	closed = true
	if err := a.Close(); err != nil {
		return fmt.Errorf("appending to %s: %w", t.table, err)
	}
	return nil
}

// currentTable is a table of current state, a row per entity, keyed by
// its primary key. kept are the columns a batch leaves NULL when it did
// not change them (facts of the log's events, not of the fold): the
// upsert keeps the stored value.
type currentTable struct {
	name string
	keys []string
	kept []string
}

var currentTables = []currentTable{
	{"jobs", []string{"user", "job"}, []string{"submit_position"}},
	{"tasks", []string{"user", "job", "task_index"}, []string{"event_type", "submit_time"}},
	{"machines", []string{"machine"}, nil},
	{"allocs", []string{"user", "name", "alloc_index"}, nil},
}

// upsertSQL is the statement that writes a table's staged rows over its
// stored ones, built once from the table's columns.
func upsertSQL(ctx context.Context, conn *sql.Conn, t currentTable) (string, error) {
	if q, ok := upserts.Load(t.name); ok {
		return q.(string), nil
	}
	rows, err := conn.QueryContext(ctx, `SELECT column_name FROM duckdb_columns()
		WHERE database_name = current_database() AND schema_name = 'main' AND table_name = ? ORDER BY column_index`, t.name)
	if err != nil {
		return "", err
	}
	var set []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return "", err
		}
		switch {
		case slices.Contains(t.keys, c):
		case slices.Contains(t.kept, c):
			set = append(set, fmt.Sprintf("%[1]s = coalesce(excluded.%[1]s, %[1]s)", c))
		default:
			set = append(set, fmt.Sprintf("%[1]s = excluded.%[1]s", c))
		}
	}
	if err := closeRows(rows); err != nil {
		return "", err
	}
	q := fmt.Sprintf(`INSERT INTO %[1]s SELECT * FROM staged_%[1]s ON CONFLICT (%[2]s) DO UPDATE SET %[3]s`,
		t.name, strings.Join(t.keys, ", "), strings.Join(set, ", "))
	if len(t.kept) == 0 {
		q = fmt.Sprintf(`INSERT OR REPLACE INTO %[1]s SELECT * FROM staged_%[1]s`, t.name)
	}
	upserts.Store(t.name, q)
	return q, nil
}

// upserts caches upsertSQL by table: the schema is the binary's.
var upserts sync.Map

// replaceCurrent writes the new rows of the entities a batch touched over
// their old ones (appended to a staging table of the connection, then one
// upsert by the table's primary key) and deletes the rows of those the
// fold no longer holds, so that the work is the batch's, not the table's (a
// delete of the older rows by a join scanned the whole table each batch:
// 28 ms a batch at a million events, most of the writer's time while
// following a busy log).
func (s *Infrastore) replaceCurrent(ctx context.Context, conn *sql.Conn, b *batch) error {
	gone := [][]row{b.goneJobs, b.goneTasks, b.goneMachines, b.goneAllocs}
	for i, rows := range [][]row{b.jobs, b.tasks, b.machines, b.allocs} {
		t := currentTables[i]
		if err := deleteKeys(ctx, conn, t, gone[i]); err != nil {
			return fmt.Errorf("deleting rows of %s: %w", t.name, err)
		}
		if len(rows) == 0 {
			continue
		}
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(`CREATE TEMP TABLE IF NOT EXISTS staged_%[1]s AS FROM %[1]s LIMIT 0`, t.name)); err != nil {
			return fmt.Errorf("staging rows of %s: %w", t.name, err)
		}
		if err := s.appendAll(conn, []tableRows{{"staged_" + t.name, rows}}); err != nil {
			return err
		}
		upsert, err := upsertSQL(ctx, conn, t)
		if err != nil {
			return fmt.Errorf("replacing rows of %s: %w", t.name, err)
		}
		for _, q := range []string{upsert, `DELETE FROM staged_` + t.name} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("replacing rows of %s: %w", t.name, err)
			}
		}
		s.hookAt("replaced:" + t.name)
	}
	return nil
}

// deleteKeys deletes the rows of t with the given keys (each in the order
// of t.keys), a few hundred a statement.
func deleteKeys(ctx context.Context, conn *sql.Conn, t currentTable, keys []row) error {
	const perStatement = 500
	for len(keys) > 0 {
		n := min(len(keys), perStatement)
		tuple := "(" + strings.Repeat("?, ", len(t.keys)-1) + "?)"
		var on []string
		for i, k := range t.keys {
			on = append(on, fmt.Sprintf("t.%s = g.k%d", k, i))
		}
		aliases := make([]string, len(t.keys))
		for i := range aliases {
			aliases[i] = fmt.Sprintf("k%d", i)
		}
		q := fmt.Sprintf(`DELETE FROM %s t USING (VALUES %s) g(%s) WHERE %s`, t.name,
			strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", "), strings.Join(aliases, ", "), strings.Join(on, " AND "))
		args := make([]any, 0, n*len(t.keys))
		for _, k := range keys[:n] {
			for _, v := range k {
				args = append(args, v)
			}
		}
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// writeCheckpoint keeps the batch's checkpoint of the fold, if it carries one.
func writeCheckpoint(ctx context.Context, conn *sql.Conn, b *batch, last int64) error {
	if b.checkpoint == nil {
		return nil
	}
	if _, err := conn.ExecContext(ctx, `DELETE FROM fold_checkpoint`); err != nil {
		return fmt.Errorf("checkpoint of the fold: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO fold_checkpoint VALUES (?, ?)`, last, b.checkpoint); err != nil {
		return fmt.Errorf("checkpoint of the fold: %w", err)
	}
	return nil
}

// dropStaging drops the connection's staging tables, made from the tables
// of the schema before a reset.
func dropStaging(ctx context.Context, conn *sql.Conn) error {
	for _, t := range currentTables {
		if _, err := conn.ExecContext(ctx, `DROP TABLE IF EXISTS temp.staged_`+t.name); err != nil {
			return err
		}
	}
	return nil
}
