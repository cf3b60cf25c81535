package infrastore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/internal/history"
)

// t0 is the fixed clock every test cell starts at.
var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// h0 is when every generated history begins.
var h0 = history.Start

// cellHistory is a seeded history of a cell spread over hours, n events
// long, that the master could have written: every event comes out of
// commands.Decide against the evolving state (internal/history, the
// generator of the projections' golden histories). Machines come and go,
// jobs of several users and bands are submitted, placed (with stale and
// refused proposals, and preemptions), started, restarted, updated,
// evicted, OOM-killed, finished or killed, with usage windows and
// reservation estimates.
func cellHistory(seed uint64, n int64) []events.Event {
	c := history.New(history.Hours, seed)
	c.Run(n)
	return c.Log[:n]
}

// appendAll appends evs to store in requests of up to 500 events.
func appendEvents(t testing.TB, ctx context.Context, store events.Store, evs []events.Event) {
	t.Helper()
	for len(evs) > 0 {
		n := min(len(evs), 500)
		if _, err := store.Append(ctx, events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: evs[:n]}); err != nil {
			t.Fatalf("append: %v", err)
		}
		evs = evs[n:]
	}
}

// newSQLiteLog opens a fresh SQLite event log holding evs.
func newSQLiteLog(t testing.TB, evs []events.Event) *sqlitestore.Store {
	t.Helper()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "log.sqlite"), sqlitestore.Options{
		Clock:        func() time.Time { return t0 },
		PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	appendEvents(t, ctx, store, evs)
	return store
}

// openStore opens a fresh infrastore file.
func openStore(t testing.TB, opts Options) *Infrastore {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "infra.duckdb"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// queryInt runs a query returning one integer through the internal
// connection (tests only).
func queryInt(t testing.TB, s *Infrastore, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
