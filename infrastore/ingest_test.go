package infrastore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/internal/pgtest"
	"github.com/corralhq/corral/internal/testkit"
)

// expected holds the figures a correct ingestion of evs must produce.
type expected struct {
	events     int64
	taskEvents int64
	jobEvents  int64
	machineEvs int64
	usageRows  int64
	decisions  int64
	jobSpecs   int64
	codes      map[int64]int32 // position -> trace code of task events
}

func expect(evs []events.Event) expected {
	x := expected{events: int64(len(evs)), codes: map[int64]int32{}}
	for i, e := range evs {
		pos := int64(i + 1)
		switch p := e.Data.(type) {
		case *events.TaskSubmitted, *events.TaskScheduled, *events.TaskEvicted, *events.TaskFailed,
			*events.TaskFinished, *events.TaskKilled, *events.TaskLost, *events.TaskUpdated:
			x.taskEvents++
			x.codes[pos] = int32(events.TraceCodeOf(p))
			if _, ok := p.(*events.TaskScheduled); ok {
				x.decisions++
			}
		case *events.JobSubmitted, *events.JobUpdated, *events.JobKilled, *events.JobFinished:
			x.jobEvents++
			if _, ok := p.(*events.JobKilled); !ok {
				if _, ok := p.(*events.JobFinished); !ok {
					x.jobSpecs++
				}
			}
		case *events.JobUpdateRolledBack:
			x.jobSpecs++
		case *events.MachineRegistered, *events.MachineUpdated, *events.MachineDrainSet, *events.MachineDown,
			*events.MachineUp, *events.MachineRemoved:
			x.machineEvs++
		case *events.UsageReported:
			x.usageRows += int64(len(p.Tasks))
		}
	}
	return x
}

// checkIngested verifies that every event is present exactly once and every
// derived table has the rows the events call for.
func checkIngested(t *testing.T, s *Infrastore, evs []events.Event) {
	t.Helper()
	x := expect(evs)
	n := int64(len(evs))
	if got := queryInt(t, s, `SELECT count(*) FROM events`); got != n {
		t.Errorf("events: %d rows, want %d", got, n)
	}
	if got := queryInt(t, s, `SELECT count(DISTINCT position) FROM events WHERE position BETWEEN 1 AND ?`, n); got != n {
		t.Errorf("events: %d distinct positions in 1..%d, want %d", got, n, n)
	}
	for i, c := range []struct {
		table string
		want  int64
	}{
		{"task_events", x.taskEvents}, {"job_events", x.jobEvents}, {"machine_events", x.machineEvs},
		{"task_usage", x.usageRows}, {"scheduling_decisions", x.decisions}, {"job_specs", x.jobSpecs},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := queryInt(t, s, `SELECT count(*) FROM `+c.table+` WHERE position IS NOT NULL AND (`+sourceFilter(c.table)+`)`); got != c.want {
				t.Errorf("%s: %d rows, want %d", c.table, got, c.want)
			}
		})
	}
	if got := queryInt(t, s, `SELECT position FROM ingest_state`); got != n {
		t.Errorf("ingest_state.position = %d, want %d", got, n)
	}
	// Every task event row carries the code events.TraceCodeOf gives.
	rows, err := s.db.Query(`SELECT position, event_type FROM task_events WHERE source = 'log'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var pos int64
		var code int32
		if err := rows.Scan(&pos, &code); err != nil {
			t.Fatal(err)
		}
		if want, ok := x.codes[pos]; !ok || want != code {
			t.Errorf("task_events position %d: event_type %d, want %d (present %v)", pos, code, want, ok)
		}
	}
}

func sourceFilter(table string) string {
	switch table {
	case "task_events", "job_events", "machine_events", "task_usage":
		return "source = 'log'"
	}
	return "true"
}

// digest returns an order-independent fingerprint of every derived table, to
// compare two ingestions of the same log.
func digest(t *testing.T, s *Infrastore) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, tb := range append([]struct{ name, ddl string }{{"ingest_state", ""}}, tables...) {
		if tb.name == "fold_checkpoint" {
			// A cache of the fold, written where a run's batches fell due.
			continue
		}
		d, err := tableDigest(s, tb.name)
		if err != nil {
			t.Fatal(err)
		}
		out[tb.name] = d
	}
	return out
}

// tableDigest is a table's row count and the sum of its rows' hashes, with
// every MAP's entries in key order first: DuckDB keeps a MAP's entries in
// the order they were appended, and the driver appends a Go map's in no
// order, so two ingests of one log may hold {a, b} and {b, a}, which look
// up alike but hash apart.
//
// The hourly rollup is digested as the sums it and the unrolled tail give
// per key: where the ingester cut its rolls depends on the batches, the
// sums do not.
func tableDigest(s *Infrastore, table string) (string, error) {
	if table == "usage_hours" {
		table = fmt.Sprintf(`(SELECT hour, user, job, spec_position, band, priority, sum(cpu_limit), sum(cpu_reservation), sum(cpu_usage),
			sum(memory_limit), sum(memory_reservation), sum(memory_usage), sum(disk_usage), sum(gpu_limit),
			min(pfirst), max(plast), sum(windows)
		FROM (SELECT * FROM usage_hours UNION ALL
			SELECT start_time // %[1]d * %[1]d, user, job, spec_position, coalesce(band, 'unknown'), priority,
				cpu_limit_core_hours, cpu_reservation_core_hours, cpu_usage_core_hours,
				memory_limit_gib_hours, memory_reservation_gib_hours, memory_usage_gib_hours,
				disk_usage_gib_hours, coalesce(gpu_limit_hours, 0), position, position, 1
			FROM task_usage WHERE source = 'log' AND position > (SELECT coalesce(max(plast), 0) FROM usage_hours))
		GROUP BY ALL) AS usage_hours_summed`, hourUS)
		var n int64
		var h string
		err := s.db.QueryRow(`SELECT count(*), coalesce(sum(hash(usage_hours_summed))::VARCHAR, '') FROM `+table).Scan(&n, &h)
		return fmt.Sprintf("%d keys, %s", n, h), err
	}
	rows, err := s.db.Query(`SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index`, table)
	if err != nil {
		return "", err
	}
	var cols []string
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			rows.Close()
			return "", err
		}
		col := `"` + name + `"`
		if strings.HasPrefix(typ, "MAP(") {
			col = fmt.Sprintf("map_from_entries(list_sort(map_entries(%s)))", col)
		}
		cols = append(cols, col)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", err
	}
	q := fmt.Sprintf(`SELECT count(*), coalesce(sum(hash(%s))::VARCHAR, '') FROM %s`, strings.Join(cols, ", "), table)
	var n int64
	var h string
	if err := s.db.QueryRow(q).Scan(&n, &h); err != nil {
		return "", fmt.Errorf("%s: %w", q, err)
	}
	return fmt.Sprintf("%d rows, %s", n, h), nil
}

func compareDigests(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("table %s: %s, want %s", k, got[k], w)
		}
	}
}

func TestIngestSQLite(t *testing.T) {
	ctx := context.Background()
	evs := cellHistory(1, 2400)
	store := newSQLiteLog(t, evs)
	s := openStore(t, Options{BatchSize: 97}) // odd size: batches split streams
	pos, err := s.CatchUp(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if pos != int64(len(evs)) {
		t.Fatalf("CatchUp reached %d, want %d", pos, len(evs))
	}
	checkIngested(t, s, evs)

	// Reopening resumes from the stored position: nothing is applied twice.
	path := s.Path()
	want := digest(t, s)
	s.Close()
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if pos, err := s.CatchUp(ctx, store); err != nil || pos != int64(len(evs)) {
		t.Fatalf("CatchUp after reopen = %d, %v", pos, err)
	}
	compareDigests(t, digest(t, s), want)

	// The payload is JSON with proto field names.
	var first string
	for _, e := range evs {
		if js, ok := e.Data.(*events.JobSubmitted); ok {
			first = js.Spec.GetUser()
			break
		}
	}
	var user string
	if err := s.db.QueryRow(`SELECT payload->>'$.spec.user' FROM events WHERE type = 'JobSubmitted' ORDER BY position LIMIT 1`).Scan(&user); err != nil || user != first || first == "" {
		t.Errorf("payload spec.user = %q, %v; want %q", user, err, first)
	}
}

func TestIngestPostgres(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	store, err := pgstore.Open(ctx, url, pgstore.Options{Clock: func() time.Time { return t0 }, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	evs := cellHistory(2, 1000)
	appendEvents(t, ctx, store, evs[:len(evs)/2])
	s := openStore(t, Options{})

	// Run tails the log: events appended while it runs arrive too.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx, store) }()
	defer func() { cancel(); <-done }() // before the store closes
	appendEvents(t, ctx, store, evs[len(evs)/2:])
	waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
	defer waitCancel()
	if err := s.WaitPosition(waitCtx, int64(len(evs))); err != nil {
		t.Fatal(err)
	}
	checkIngested(t, s, evs)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	done <- nil
}

func TestRunIsExclusive(t *testing.T) {
	ctx := context.Background()
	store := newSQLiteLog(t, cellHistory(3, 80))
	s := openStore(t, Options{})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx, store) }()
	if err := s.WaitPosition(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CatchUp(ctx, store); !errors.Is(err, ErrBusy) {
		t.Errorf("second ingester: %v, want ErrBusy", err)
	}
	cancel()
	<-done
}

func TestReadOnlyOpen(t *testing.T) {
	ctx := context.Background()
	evs := cellHistory(10, 200)
	store := newSQLiteLog(t, evs)
	s := openStore(t, Options{})
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	s.Close()

	ro, err := Open(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if p, err := ro.Position(ctx); err != nil || p != int64(len(evs)) {
		t.Errorf("Position = %d, %v; want %d", p, err, len(evs))
	}
	res, err := ro.Query(ctx, `SELECT count(*) FROM events`, 0)
	if err != nil || fmt.Sprint(res.Rows[0][0]) != fmt.Sprint(len(evs)) {
		t.Errorf("query on a read-only file: %v, %v", res, err)
	}
	if _, err := ro.Bill(ctx, BillRequest{From: t0, To: t0.Add(time.Hour)}); err != nil {
		t.Errorf("bill on a read-only file: %v", err)
	}
	if _, err := ro.CatchUp(ctx, store); !errors.Is(err, ErrReadOnly) {
		t.Errorf("CatchUp: %v, want ErrReadOnly", err)
	}
	if _, err := ro.ImportGoogleTrace(ctx, t.TempDir()); !errors.Is(err, ErrReadOnly) {
		t.Errorf("ImportGoogleTrace: %v, want ErrReadOnly", err)
	}
}

func TestOpenInvalid(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		path string
		opts Options
		want string
	}{
		{"", Options{}, "path: must not be empty"},
		{":memory:", Options{}, "path: \":memory:\" must name a file"},
		{"x.duckdb?access_mode=READ_WRITE", Options{}, "must name a file"},
		{"x.duckdb", Options{Threads: -1}, "threads: must not be negative"},
	} {
		t.Run(c.path, func(t *testing.T) {
			if _, err := Open(ctx, c.path, c.opts); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open(%q) = %v, want ErrInvalid with %q", c.path, err, c.want)
			}
		})
	}
}

// reopenedAtOldSchema ingests evs into a new file, marks it as written by
// an older schema version and opens it again. It returns the log, the
// reopened store and the digest of the file before the change.
func reopenedAtOldSchema(t *testing.T, evs []events.Event) (*sqlitestore.Store, *Infrastore, map[string]string) {
	ctx := context.Background()
	store := newSQLiteLog(t, evs)
	s := openStore(t, Options{})
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	want := digest(t, s)
	if _, err := s.db.ExecContext(ctx, `UPDATE ingest_state SET schema_version = 0`); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	s.Close()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return store, s, want
}

// TestSchemaChangeNeedsRebuild stores an older schema version: the ingester
// refuses to run until Rebuild re-derives the file.
func TestSchemaChangeNeedsRebuild(t *testing.T) {
	ctx := context.Background()
	store, s, want := reopenedAtOldSchema(t, cellHistory(11, 200))
	defer s.Close()
	if _, err := s.CatchUp(ctx, store); !errors.Is(err, ErrRebuildNeeded) {
		t.Fatalf("CatchUp on an old schema: %v, want ErrRebuildNeeded", err)
	}
	if _, err := s.Rebuild(ctx, store); err != nil {
		t.Fatal(err)
	}
	compareDigests(t, digest(t, s), want)
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Errorf("CatchUp after rebuild: %v", err)
	}
}

// TestRunRebuildsAnOldSchema: the one tail, as the corral command runs it,
// meets a file of another schema version by rebuilding it from the log,
// then follows the log.
func TestRunRebuildsAnOldSchema(t *testing.T) {
	ctx := context.Background()
	evs := cellHistory(12, 200)
	store, s, want := reopenedAtOldSchema(t, evs)
	defer s.Close()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx, store) }()
	// The stale file already stands at the head: wait for the rebuilt one.
	testkit.Eventually(t, 30*time.Second, "Run rebuilds the file to the head", func() (bool, string) {
		var version int32
		var pos int64
		if err := s.db.QueryRowContext(ctx, `SELECT schema_version, position FROM ingest_state`).Scan(&version, &pos); err != nil {
			t.Fatal(err)
		}
		return version == schemaVersion && pos == int64(len(evs)),
			fmt.Sprintf("schema version %d at position %d, want %d at %d", version, pos, schemaVersion, len(evs))
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	compareDigests(t, digest(t, s), want)
}

// TestIngestIsIndependentOfBatches: the tables do not depend on where
// batches begin and end. A task's current row is written at the end of its
// batch; it once took the spec of a job of the same name submitted later in
// the batch, so a history where names are reused (as the master allows once
// a job has ended) gave different tables for different batch sizes.
func TestIngestIsIndependentOfBatches(t *testing.T) {
	ctx := context.Background()
	// Batches of one make the catch-up per event: -short keeps it to a
	// history a quarter the size, which still crosses every event type.
	n := int64(2000)
	if testing.Short() {
		n = 500
	}
	store := newSQLiteLog(t, cellHistory(4, n))
	var want map[string]string
	for _, size := range []int{1000, 1, 7, 97} {
		s := openStore(t, Options{BatchSize: size})
		if _, err := s.CatchUp(ctx, store); err != nil {
			t.Fatal(err)
		}
		got := digest(t, s)
		if want == nil {
			want = got
			continue
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("batches of %d: table %s: %s, batches of 1000: %s", size, k, got[k], w)
			}
		}
	}
}
