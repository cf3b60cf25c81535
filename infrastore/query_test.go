package infrastore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// TestHostileQueries sends statements that try to write, read files, load
// extensions, change settings or exhaust the machine. Each must be refused
// or cancelled with a clear message, and the store must be unchanged and
// still ingesting afterwards.
func TestHostileQueries(t *testing.T) {
	ctx := context.Background()
	evs := cellHistory(6, 400)
	store := newSQLiteLog(t, evs[:len(evs)-20])
	s := openStore(t, Options{MemoryLimit: "1GB", Threads: 2})
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	before := digest(t, s)
	for _, c := range hostileQueries {
		t.Run(c.query, func(t *testing.T) { checkHostileQuery(t, s, c) })
	}

	// The EXPLAIN whose options hide a CHECKPOINT runs EXPLAIN of the
	// SELECT the guard checked, and nothing else.
	if res, err := s.Query(ctx, `EXPLAIN (/* ) SELECT 1 -- */ ANALYZE) CHECKPOINT`, time.Second); err != nil && !errors.Is(err, ErrQueryRefused) {
		t.Errorf("EXPLAIN trick: %v", err)
	} else if err == nil && strings.Contains(strings.ToUpper(fmt.Sprint(res.Rows)), "CHECKPOINT") {
		t.Errorf("EXPLAIN trick explained a CHECKPOINT: %v", res.Rows)
	}

	compareDigests(t, digest(t, s), before)
	// Still answering, and still ingesting.
	for _, q := range []string{`SELECT count(*) FROM events`, `DESCRIBE events`, `SHOW TABLES`, `SUMMARIZE jobs`,
		`EXPLAIN SELECT * FROM tasks`, `FROM tasks_at('2026-03-01 01:00:00') LIMIT 3`} {
		if _, err := s.Query(ctx, q, 0); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	appendEvents(t, ctx, store, evs[len(evs)-20:])
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	checkIngested(t, s, evs)
}

// How Query must fail a hostile query.
const (
	queryRefused   = "refused"   // ErrQueryRefused before or while binding
	queryCancelled = "cancelled" // ErrQueryTimeout, or DuckDB gave up first (out of memory)
	queryFailed    = "failed"    // DuckDB could not run it: the thing it names does not exist here
)

type hostileQuery struct {
	query, want, mention string
}

// hostileQueries are statements Query must fail, each how it must and
// with an error that mentions what.
var hostileQueries = []hostileQuery{
	{`DROP TABLE events`, queryRefused, "DROP"},
	{`DELETE FROM events`, queryRefused, "DELETE"},
	{`UPDATE ingest_state SET position = 0`, queryRefused, "UPDATE"},
	{`INSERT INTO events SELECT * FROM events`, queryRefused, "INSERT"},
	{`CREATE TABLE stolen AS SELECT * FROM events`, queryRefused, "CREATE"},
	{`CREATE TEMP MACRO f(x) AS x + 1`, queryRefused, "CREATE"},
	{`ALTER TABLE events RENAME TO gone`, queryRefused, "ALTER"},
	{`TRUNCATE task_usage`, queryRefused, "TRUNCATE"},
	{`WITH x AS (SELECT 1) DELETE FROM events`, queryRefused, "WITH"},
	{`SELECT 1; DROP TABLE events`, queryRefused, "several statements"},
	{`EXPLAIN ANALYZE DELETE FROM events`, queryRefused, "EXPLAIN of DELETE"},
	{`/* hide */ EXPLAIN /* it */ ANALYZE UPDATE tasks SET state = 'x'`, queryRefused, "EXPLAIN of UPDATE"},
	{`EXPLAIN (FORMAT json) INSERT INTO events SELECT * FROM events`, queryRefused, "EXPLAIN of INSERT"},
	{`COPY events TO '/tmp/infrastore-stolen.csv'`, queryRefused, "COPY"},
	{`COPY events FROM '/etc/passwd'`, queryRefused, "COPY"},
	{`COPY (SELECT 1) TO '/dev/stdout'`, queryRefused, "COPY"},
	{`EXPORT DATABASE '/tmp/infrastore-dump'`, queryRefused, ""},
	{`IMPORT DATABASE '/tmp'`, queryRefused, ""},
	{`SELECT * FROM read_csv('/etc/passwd')`, queryRefused, "read_csv may not be called"},
	{`SELECT * FROM read_text('/etc/hostname')`, queryRefused, "read_text"},
	{`SELECT * FROM glob('/*')`, queryRefused, "glob"},
	{`SELECT * FROM read_parquet('https://example.com/x.parquet')`, queryRefused, "read_parquet"},
	{`SELECT * FROM '/etc/passwd'`, queryFailed, "does not exist"},
	{`SELECT * FROM query('DROP TABLE events')`, queryRefused, "query may not be called"},
	{`SELECT * FROM sqlite_scan('/tmp/x.db', 't')`, queryRefused, "sqlite_scan"},
	{`INSTALL httpfs`, queryRefused, "INSTALL"},
	{`LOAD httpfs`, queryRefused, "LOAD"},
	{`ATTACH '/tmp/other.duckdb' AS other`, queryRefused, "ATTACH"},
	{`DETACH infra`, queryRefused, "DETACH"},
	{`USE memory`, queryRefused, "USE"},
	{`SET enable_external_access = true`, queryRefused, "SET"},
	{`RESET lock_configuration`, queryRefused, "SET"},
	{`SET VARIABLE secret = 1`, queryRefused, "SET"},
	{`PRAGMA enable_profiling`, queryRefused, "PRAGMA"},
	{`CALL pragma_version()`, queryRefused, "CALL"},
	{`CHECKPOINT`, queryRefused, "CHECKPOINT"},
	{`VACUUM events`, queryRefused, "VACUUM"},
	{`BEGIN TRANSACTION`, queryRefused, "BEGIN"},
	{`COMMIT`, queryRefused, "COMMIT"},
	{`PREPARE p AS DELETE FROM events`, queryRefused, "PREPARE"},
	{`CREATE SECRET (TYPE s3, KEY_ID 'x', SECRET 'y')`, queryRefused, "CREATE"},
	// Functions with effects, called from a SELECT, and the EXPLAIN
	// whose options hide what it runs.
	{`SELECT * FROM enable_logging()`, queryRefused, "enable_logging may not be called"},
	{`SELECT enable_logging()`, queryRefused, "enable_logging"},
	{`SELECT * FROM checkpoint()`, queryRefused, "checkpoint may not be called"},
	{`SELECT * FROM (SELECT 1) a, force_checkpoint()`, queryRefused, "force_checkpoint"},
	{`WITH x AS (SELECT * FROM duckdb_logs()) SELECT * FROM x`, queryRefused, "duckdb_logs"},
	{`SELECT (SELECT count(*) FROM duckdb_secrets())`, queryRefused, "duckdb_secrets"},
	{`SELECT * FROM tasks WHERE missing_column = 1`, queryFailed, "missing_column"},
	{`SELECT count(*) FROM range(1000000000000) a, range(1000000000000) b`, queryCancelled, "time limit"},
	{`WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r`, queryCancelled, ""},
	{`SELECT list(i) FROM range(10000000000) t(i)`, queryCancelled, ""},
	// What shows the server's paths: its settings and the file's
	// path, through functions and through DuckDB's views over them.
	{`SELECT current_setting('temp_directory')`, queryRefused, "current_setting"},
	{`SELECT upper(current_setting('home_directory')) AS h`, queryRefused, "current_setting"},
	{`SELECT * FROM duckdb_settings()`, queryRefused, "duckdb_settings"},
	{`SELECT path FROM duckdb_databases()`, queryRefused, "duckdb_databases"},
	{`SELECT path FROM duckdb_databases`, queryRefused, "duckdb_databases"},
	{`SELECT * FROM main.pragma_database_list`, queryRefused, "pragma_database_list"},
	{`SELECT setting FROM pg_catalog.pg_settings WHERE name = 'temp_directory'`, queryRefused, "pg_settings"},
	{`SELECT * FROM duckdb_extensions()`, queryRefused, "duckdb_extensions"},
}

func checkHostileQuery(t *testing.T, s *Infrastore, c hostileQuery) {
	res, err := s.Query(context.Background(), c.query, time.Second)
	if err == nil {
		t.Fatalf("accepted; returned %d rows", len(res.Rows))
	}
	msg := err.Error()
	switch c.want {
	case queryRefused:
		if !errors.Is(err, ErrQueryRefused) {
			t.Errorf("error %q is not a refusal", msg)
		}
	case queryCancelled:
		if !errors.Is(err, ErrQueryTimeout) && !strings.Contains(msg, "Out of Memory") {
			t.Errorf("error %q is neither a timeout nor out of memory", msg)
		}
	case queryFailed:
		if errors.Is(err, ErrQueryRefused) || errors.Is(err, ErrQueryTimeout) {
			t.Errorf("error %q: want a plain failure", msg)
		}
	}
	if !strings.Contains(msg, c.mention) {
		t.Errorf("error %q does not mention %q", msg, c.mention)
	}
	t.Log(msg)
}

func TestQueryInvalidInput(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	for _, c := range []struct {
		query   string
		timeout time.Duration
		field   string
	}{
		{"", 0, "query: must not be empty"},
		{"   \n", 0, "query: must not be empty"},
		{"SELECT 1", -time.Second, "timeout: must not be negative"},
		{"SELECT '" + strings.Repeat("x", MaxQueryBytes) + "'", 0, "query: longer than"},
	} {
		t.Run(c.query, func(t *testing.T) {
			_, err := s.Query(ctx, c.query, c.timeout)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("Query(%.20q, %v) = %v, want ErrInvalid naming %q", c.query, c.timeout, err, c.field)
			}
		})
	}
	if _, err := s.Query(ctx, "SELEC 1", 0); err == nil || !strings.Contains(err.Error(), "syntax error") {
		t.Errorf("syntax error: %v", err)
	}
}

func TestQueryFormats(t *testing.T) {
	s := openStore(t, Options{MaxRows: 2})
	res, err := s.Query(context.Background(), `SELECT * FROM (VALUES
		(1, 'plain', NULL, 1.50::DECIMAL(10,2), [1, 2], {'k': 'v'}, TIMESTAMP '2026-03-01 12:30:00', '{"a":1}'::JSON),
		(22, 'line
break, "quoted"', 2.5, -0.25::DECIMAL(10,2), [], {'k': NULL}, TIMESTAMP '2026-03-02 00:00:00.5', '[]'::JSON),
		(333, 'dropped', 0, 0, [], NULL, NULL, NULL)
	) t(n, s, f, d, l, st, ts, j) ORDER BY n`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Rows) != 2 {
		t.Fatalf("truncated=%v rows=%d, want the first 2 rows and truncated", res.Truncated, len(res.Rows))
	}
	// Each cell as the API sends it: text, and NULL apart from the empty
	// string.
	want := [][]string{
		{"1", "plain", "NULL", "1.50", "[1,2]", `{"k":"v"}`, "2026-03-01 12:30:00", `{"a":1}`},
		{"22", "line\nbreak, \"quoted\"", "2.5", "-0.25", "[]", `{"k":null}`, "2026-03-02 00:00:00.5", "[]"},
	}
	for i, row := range want {
		for j, w := range row {
			text, null := res.Cell(i, j)
			if null {
				text = "NULL"
			}
			if text != w {
				t.Errorf("row %d, %s: %q, want %q", i, res.Columns[j], text, w)
			}
		}
	}
}

// NULL, the empty string and every kind of value come back as they are;
// a result too big in bytes is cut and says so; a refused CREATE SECRET
// leaves the database answering.
func TestQueryValuesAndLimits(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{MaxResultBytes: 1 << 20})
	for _, c := range []struct {
		query string
		text  string
		null  bool
	}{
		{`SELECT NULL`, "", true},
		{`SELECT ''`, "", false},
		{`SELECT max(position) FROM events WHERE type = 'NoSuchType'`, "", true},
		{`SELECT 'a,b"c'`, `a,b"c`, false},
		{`SELECT 1.5::DECIMAL(4,2)`, "1.50", false},
		{`SELECT [1, NULL, 3]`, "[1,null,3]", false},
	} {
		t.Run(c.query, func(t *testing.T) {
			res, err := s.Query(ctx, c.query, 0)
			if err != nil {
				t.Fatalf("%s: %v", c.query, err)
			}
			if len(res.Rows) != 1 {
				t.Fatalf("%s: %d rows", c.query, len(res.Rows))
			}
			if text, null := res.Cell(0, 0); text != c.text || null != c.null {
				t.Errorf("%s: cell %q null %v, want %q null %v", c.query, text, null, c.text, c.null)
			}
		})
	}
	res, err := s.Query(ctx, `SELECT repeat('x', 100000) FROM range(1000)`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Rows) > 11 || !strings.Contains(res.TruncatedBy, "byte limit") {
		t.Fatalf("a 100 MB result: %d rows, truncated %v by %q", len(res.Rows), res.Truncated, res.TruncatedBy)
	}
	for range 3 {
		if _, err := s.Query(ctx, `CREATE SECRET (TYPE s3, KEY_ID 'x', SECRET 'y')`, 0); !errors.Is(err, ErrQueryRefused) {
			t.Fatalf("CREATE SECRET: %v", err)
		}
		if _, err := s.Query(ctx, `SELECT count(*) FROM events`, 0); err != nil {
			t.Fatalf("after a refused CREATE SECRET: %v", err)
		}
	}
	if _, err := s.Query(ctx, `SELECT * FROM nowhere`, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a query naming no table is a mistake of the query: %v", err)
	}
}

// No view DuckDB offers a query answers with a path of the server: every
// internal view is either refused or free of the file's directory, and so
// are the catalog's table functions a query may call.
func TestQueryShowsNoServerPath(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "infra.duckdb"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT schema_name, view_name FROM duckdb_views() WHERE internal ORDER BY ALL`)
	if err != nil {
		t.Fatal(err)
	}
	var queries []string
	for rows.Next() {
		var schema, view string
		if err := rows.Scan(&schema, &view); err != nil {
			t.Fatal(err)
		}
		queries = append(queries, fmt.Sprintf(`SELECT * FROM %s.%s`, schema, view))
	}
	rows.Close()
	for _, f := range []string{"duckdb_tables", "duckdb_columns", "duckdb_views", "duckdb_schemas", "duckdb_types",
		"duckdb_functions", "duckdb_constraints", "duckdb_indexes"} {
		queries = append(queries, `SELECT * FROM `+f+`()`)
	}
	queries = append(queries, `SHOW DATABASES`, `SHOW ALL TABLES`, `SELECT current_database(), current_schema()`)
	if len(queries) < 20 {
		t.Fatalf("only %d views and functions to try", len(queries))
	}
	refused := 0
	for _, q := range queries {
		res, err := s.Query(ctx, q, 0)
		if errors.Is(err, ErrQueryRefused) {
			refused++
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		for i := range res.Rows {
			for j := range res.Columns {
				if text, _ := res.Cell(i, j); strings.Contains(text, dir) || strings.Contains(text, "infra.duckdb") {
					t.Errorf("%s: column %s shows the server's path: %.200s", q, res.Columns[j], text)
				}
			}
		}
	}
	if refused < 3 {
		t.Errorf("%d views refused, want at least duckdb_databases, pragma_database_list and pg_settings", refused)
	}
}

// peakMemory resets the process's peak resident set (VmHWM) and returns a
// function that reads how far above the start it went.
func peakMemory(t *testing.T) func() int64 {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak resident set: %v", err)
	}
	start := testkit.ProcStatusKB(t, 0, "VmHWM:")
	return func() int64 { return (testkit.ProcStatusKB(t, 0, "VmHWM:") - start) << 10 }
}

// The limits apply while the query runs: results that would be a
// gigabyte, or a hundred billion rows, stop at the limits in DuckDB's plan,
// so the process never holds them, and the query ends as soon as the
// limit is reached rather than at its time limit.
func TestQueryBoundedWhileItRuns(t *testing.T) {
	ctx := context.Background()
	const maxBytes = 16 << 20
	s := openStore(t, Options{MemoryLimit: "256MB", Threads: 2, MaxRows: 10_000, MaxResultBytes: maxBytes})
	for _, c := range []struct {
		query, by string
		rows      int // the rows that fit, -1 for any
	}{
		// 16 values of 1,000,000 bytes (and 8 each) fit in 16 MiB.
		{`SELECT repeat('x', 1000000) FROM range(1000)`, "byte limit", 16},
		{`SELECT repeat('x', 1000000)::BLOB AS b FROM range(1000)`, "byte limit", 16},
		{`SELECT [repeat('x', 20000)] AS l, i FROM range(100000000) t(i)`, "byte limit", -1},
		{`SELECT {'s': repeat('x', 20000)} AS st FROM range(100000000)`, "byte limit", -1},
		{`SELECT i, repeat('y', 100) AS s FROM range(100000000000) t(i)`, "row limit", 10_000},
		{`SELECT i FROM range(100000) t(i) ORDER BY i DESC`, "row limit", 10_000},
		{`SELECT 'a' AS x; -- the end`, "", 1},
		{`SELECT 'a;--' AS x, $$;$$ AS y /* end */ ;  `, "", 1},
	} {
		t.Run(c.query, func(t *testing.T) {
			peak := peakMemory(t)
			start := time.Now()
			res, err := s.Query(ctx, c.query, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			took, grew := time.Since(start), peak()
			t.Logf("%d rows, cut by %q, %s, peak +%d MiB", len(res.Rows), res.TruncatedBy, took.Round(time.Millisecond), grew>>20)
			if c.by == "" && res.Truncated || c.by != "" && !strings.Contains(res.TruncatedBy, c.by) {
				t.Errorf("cut by %q, want %q", res.TruncatedBy, c.by)
			}
			if c.rows >= 0 && len(res.Rows) != c.rows {
				t.Errorf("%d rows, want %d", len(res.Rows), c.rows)
			}
			if strings.Contains(c.query, "DESC") && fmt.Sprint(res.Rows[0]) != "[99999]" {
				t.Errorf("first row %v: the query's order was lost", res.Rows[0])
			}
			if grew > 8*maxBytes {
				t.Errorf("the process's peak grew by %d MiB for a result limited to %d MiB", grew>>20, maxBytes>>20)
			}
			if took > 10*time.Second {
				t.Errorf("took %s: the limit did not stop the query", took)
			}
		})
	}
	// The query's own column names and order come back, duplicates too.
	res, err := s.Query(ctx, `SELECT 2 AS a, 1 AS a, 'z' AS "#1" ORDER BY 1`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Columns, res.Types, res.Rows); got != `[a a #1] [INTEGER INTEGER VARCHAR] [[2 1 z]]` {
		t.Errorf("columns, types and rows: %s", got)
	}
}

// Every type DuckDB has comes back: the ones the driver cannot read
// (BIGNUM, BIT) as their text; one nested where it cannot be read is a
// clear mistake of the query naming the column, not a server failure.
func TestQueryAllTypes(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	res, err := s.Query(ctx, `SELECT * FROM test_all_types()`, 0)
	if err != nil {
		t.Fatalf("test_all_types(): %v", err)
	}
	if len(res.Rows) != 3 || len(res.Columns) < 40 {
		t.Fatalf("test_all_types(): %d rows of %d columns", len(res.Rows), len(res.Columns))
	}
	for j, c := range res.Columns {
		if c == "bignum" || c == "bit" {
			if text, _ := res.Cell(0, j); text == "" {
				t.Errorf("column %s: empty", c)
			}
		}
	}
	_, err = s.Query(ctx, `SELECT [1::BIGNUM] AS nested`, 0)
	if err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"nested"`)) {
		t.Errorf("a list of BIGNUM: %v, want a mistake of the query naming the column", err)
	}
}

// A query stops when its caller leaves, at once, not at its time limit.
func TestQueryCancelledWhenTheCallerLeaves(t *testing.T) {
	s := openStore(t, Options{Threads: 2})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := s.Query(ctx, `SELECT count(*) FROM range(1000000000000) a, range(1000000000000) b`, time.Minute)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %s after its caller left", took)
	}
	if _, err := s.Query(context.Background(), `SELECT 1`, 0); err != nil {
		t.Fatalf("after a cancelled query: %v", err)
	}
}

// A query whose memory is outside DuckDB's memory_limit (an aggregate's
// state) is interrupted by the memory watch before the process passes its
// budget, with a clear error; the store answers the next query.
func TestQueryMemoryWatch(t *testing.T) {
	ctx := context.Background()
	held, err := residentAnonymous()
	if err != nil {
		t.Fatal(err)
	}
	budget := held + 600<<20
	s := openStore(t, Options{MemoryLimit: "2GB", Threads: 2, MemoryBudget: budget})
	peak := peakMemory(t)
	start := time.Now()
	_, err = s.Query(ctx, `SELECT length(list(repeat(i::VARCHAR, 2000))) FROM range(10000000) t(i)`, time.Minute)
	grew := peak()
	t.Logf("%v after %s; peak +%d MiB", err, time.Since(start).Round(time.Millisecond), grew>>20)
	if !errors.Is(err, ErrQueryTooBig) || !strings.Contains(err.Error(), "memory budget") {
		t.Fatalf("err %v, want ErrQueryTooBig naming the memory budget", err)
	}
	if grew > 600<<20 {
		t.Errorf("the process grew by %d MiB, past its budget of %d MiB above the start", grew>>20, 600)
	}
	if _, err := s.Query(ctx, `SELECT 1`, 0); err != nil {
		t.Fatalf("after the watch stopped a query: %v", err)
	}
	// The allocator gives the memory back, so the next query that needs
	// some is not stopped for what the last one held.
	released := time.Now()
	testkit.Eventually(t, 10*time.Second, "the process gives back what the stopped query held", func() (bool, string) {
		now, err := residentAnonymous()
		if err != nil {
			t.Fatal(err)
		}
		return now < held+100<<20, fmt.Sprintf("%d MiB above its start", (now-held)>>20)
	})
	t.Logf("back under 100 MiB above the start after %s", time.Since(released).Round(time.Millisecond))
	if _, err := s.Query(ctx, `SELECT length(list(repeat('x', 2000))) FROM range(20000)`, 0); err != nil {
		t.Fatalf("a query of 40 MB after the watch stopped one: %v", err)
	}
	if _, err := Open(ctx, filepath.Join(t.TempDir(), "x.duckdb"), Options{MemoryBudget: -1}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "memory budget") {
		t.Errorf("a negative memory budget: %v", err)
	}
}
