package infrastore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzQueryGuard sends arbitrary text to Query: it never panics, whatever
// it answers, and the tables are the same afterwards, so nothing a user can
// type through `corral sql` changes the Infrastore. A refusal is
// ErrQueryRefused or ErrInvalid; anything else that fails is DuckDB's own
// error or the time limit. The seed corpus in testdata/fuzz/FuzzQueryGuard
// holds the hostile statements of TestHostileQueries and some good ones.
func FuzzQueryGuard(f *testing.F) {
	for _, q := range []string{
		`SELECT count(*) FROM events`, `DROP TABLE events`, `SELECT 1; DROP TABLE events`,
		`EXPLAIN ANALYZE DELETE FROM events`, `COPY events TO '/tmp/x.csv'`, `ATTACH '/tmp/x.duckdb' AS x`,
		`SET enable_external_access = true`, `WITH x AS (SELECT 1) DELETE FROM events`,
	} {
		f.Add(q)
	}
	ctx := context.Background()
	store := newSQLiteLog(f, cellHistory(3, 80))
	s := openStore(f, Options{MemoryLimit: "256MB", Threads: 1, MaxRows: 100})
	if _, err := s.CatchUp(ctx, store); err != nil {
		f.Fatal(err)
	}
	before := digestOf(s)
	f.Fuzz(func(t *testing.T, q string) {
		_, err := s.Query(ctx, q, 200*time.Millisecond)
		if err != nil && (errors.Is(err, ErrClosed) || err.Error() == "") {
			t.Fatalf("query %q: %v", q, err)
		}
		if err == nil && !utf8.ValidString(q) {
			t.Logf("accepted a query that is not UTF-8: %q", q)
		}
		if got := digestOf(s); got != before {
			t.Fatalf("query %q (err %v) changed the tables:\n%s\nwas\n%s", q, err, got, before)
		}
	})
}

// digestOf is digest without a testing.T: the fuzz target may not call
// the F's helpers.
func digestOf(s *Infrastore) string {
	out := ""
	for _, tb := range append([]struct{ name, ddl string }{{"ingest_state", ""}}, tables...) {
		d, err := tableDigest(s, tb.name)
		if err != nil {
			return tb.name + ": " + err.Error()
		}
		out += tb.name + " " + d + "\n"
	}
	var tablesNow int64
	if err := s.db.QueryRow(`SELECT count(*) FROM duckdb_tables()`).Scan(&tablesNow); err != nil {
		return err.Error()
	}
	return out + fmt.Sprintf("%d tables", tablesNow)
}
