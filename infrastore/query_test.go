package infrastore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
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

	const (
		refused   = "refused"   // ErrQueryRefused before or while binding
		cancelled = "cancelled" // ErrQueryTimeout, or DuckDB gave up first (out of memory)
		failed    = "failed"    // DuckDB could not run it: the thing it names does not exist here
	)
	for _, c := range []struct {
		query, want, mention string
	}{
		{`DROP TABLE events`, refused, "DROP"},
		{`DELETE FROM events`, refused, "DELETE"},
		{`UPDATE ingest_state SET position = 0`, refused, "UPDATE"},
		{`INSERT INTO events SELECT * FROM events`, refused, "INSERT"},
		{`CREATE TABLE stolen AS SELECT * FROM events`, refused, "CREATE"},
		{`CREATE TEMP MACRO f(x) AS x + 1`, refused, "CREATE"},
		{`ALTER TABLE events RENAME TO gone`, refused, "ALTER"},
		{`TRUNCATE task_usage`, refused, "TRUNCATE"},
		{`WITH x AS (SELECT 1) DELETE FROM events`, refused, "WITH"},
		{`SELECT 1; DROP TABLE events`, refused, "several statements"},
		{`EXPLAIN ANALYZE DELETE FROM events`, refused, "EXPLAIN of DELETE"},
		{`/* hide */ EXPLAIN /* it */ ANALYZE UPDATE tasks SET state = 'x'`, refused, "EXPLAIN of UPDATE"},
		{`EXPLAIN (FORMAT json) INSERT INTO events SELECT * FROM events`, refused, "EXPLAIN of INSERT"},
		{`COPY events TO '/tmp/infrastore-stolen.csv'`, refused, "COPY"},
		{`COPY events FROM '/etc/passwd'`, refused, "COPY"},
		{`COPY (SELECT 1) TO '/dev/stdout'`, refused, "COPY"},
		{`EXPORT DATABASE '/tmp/infrastore-dump'`, refused, ""},
		{`IMPORT DATABASE '/tmp'`, refused, ""},
		{`SELECT * FROM read_csv('/etc/passwd')`, refused, "read_csv may not be called"},
		{`SELECT * FROM read_text('/etc/hostname')`, refused, "read_text"},
		{`SELECT * FROM glob('/*')`, refused, "glob"},
		{`SELECT * FROM read_parquet('https://example.com/x.parquet')`, refused, "read_parquet"},
		{`SELECT * FROM '/etc/passwd'`, failed, "does not exist"},
		{`SELECT * FROM query('DROP TABLE events')`, refused, "query may not be called"},
		{`SELECT * FROM sqlite_scan('/tmp/x.db', 't')`, refused, "sqlite_scan"},
		{`INSTALL httpfs`, refused, "INSTALL"},
		{`LOAD httpfs`, refused, "LOAD"},
		{`ATTACH '/tmp/other.duckdb' AS other`, refused, "ATTACH"},
		{`DETACH infra`, refused, "DETACH"},
		{`USE memory`, refused, "USE"},
		{`SET enable_external_access = true`, refused, "SET"},
		{`RESET lock_configuration`, refused, "SET"},
		{`SET VARIABLE secret = 1`, refused, "SET"},
		{`PRAGMA enable_profiling`, refused, "PRAGMA"},
		{`CALL pragma_version()`, refused, "CALL"},
		{`CHECKPOINT`, refused, "CHECKPOINT"},
		{`VACUUM events`, refused, "VACUUM"},
		{`BEGIN TRANSACTION`, refused, "BEGIN"},
		{`COMMIT`, refused, "COMMIT"},
		{`PREPARE p AS DELETE FROM events`, refused, "PREPARE"},
		{`CREATE SECRET (TYPE s3, KEY_ID 'x', SECRET 'y')`, refused, "CREATE"},
		// Functions with effects, called from a SELECT, and the EXPLAIN
		// whose options hide what it runs.
		{`SELECT * FROM enable_logging()`, refused, "enable_logging may not be called"},
		{`SELECT enable_logging()`, refused, "enable_logging"},
		{`SELECT * FROM checkpoint()`, refused, "checkpoint may not be called"},
		{`SELECT * FROM (SELECT 1) a, force_checkpoint()`, refused, "force_checkpoint"},
		{`WITH x AS (SELECT * FROM duckdb_logs()) SELECT * FROM x`, refused, "duckdb_logs"},
		{`SELECT (SELECT count(*) FROM duckdb_secrets())`, refused, "duckdb_secrets"},
		{`SELECT * FROM tasks WHERE missing_column = 1`, failed, "missing_column"},
		{`SELECT count(*) FROM range(1000000000000) a, range(1000000000000) b`, cancelled, "time limit"},
		{`WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r`, cancelled, ""},
		{`SELECT list(i) FROM range(10000000000) t(i)`, cancelled, ""},
	} {
		t.Run(c.query, func(t *testing.T) {
			res, err := s.Query(ctx, c.query, time.Second)
			if err == nil {
				t.Fatalf("accepted; returned %d rows", len(res.Rows))
			}
			msg := err.Error()
			switch c.want {
			case refused:
				if !errors.Is(err, ErrQueryRefused) {
					t.Errorf("error %q is not a refusal", msg)
				}
			case cancelled:
				if !errors.Is(err, ErrQueryTimeout) && !strings.Contains(msg, "Out of Memory") {
					t.Errorf("error %q is neither a timeout nor out of memory", msg)
				}
			case failed:
				if errors.Is(err, ErrQueryRefused) || errors.Is(err, ErrQueryTimeout) {
					t.Errorf("error %q: want a plain failure", msg)
				}
			}
			if !strings.Contains(msg, c.mention) {
				t.Errorf("error %q does not mention %q", msg, c.mention)
			}
			t.Log(msg)
		})
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
		_, err := s.Query(ctx, c.query, c.timeout)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Query(%.20q, %v) = %v, want ErrInvalid naming %q", c.query, c.timeout, err, c.field)
		}
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
	var table, csv, js bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteCSV(&csv); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	wantTable := ` n | s                     |    f |     d | l     | st         | ts                    | j
---+-----------------------+------+-------+-------+------------+-----------------------+--------
 1 | plain                 | NULL |  1.50 | [1,2] | {"k":"v"}  | 2026-03-01 12:30:00   | {"a":1}
22 | line\nbreak, "quoted" |  2.5 | -0.25 | []    | {"k":null} | 2026-03-02 00:00:00.5 | []
(2 rows shown; more were dropped)
`
	wantCSV := `n,s,f,d,l,st,ts,j
1,plain,,1.50,"[1,2]","{""k"":""v""}",2026-03-01 12:30:00,"{""a"":1}"
22,"line
break, ""quoted""",2.5,-0.25,[],"{""k"":null}",2026-03-02 00:00:00.5,[]
`
	wantJSON := `[
  {"n":1,"s":"plain","f":null,"d":1.50,"l":[1,2],"st":{"k":"v"},"ts":"2026-03-01T12:30:00Z","j":{"a":1}},
  {"n":22,"s":"line\nbreak, \"quoted\"","f":2.5,"d":-0.25,"l":[],"st":{"k":null},"ts":"2026-03-02T00:00:00.5Z","j":[]}
]
`
	for _, c := range []struct{ name, got, want string }{
		{"table", table.String(), wantTable}, {"csv", csv.String(), wantCSV}, {"json", js.String(), wantJSON},
	} {
		if c.got != c.want {
			t.Errorf("%s:\n%s\nwant:\n%s", c.name, c.got, c.want)
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
