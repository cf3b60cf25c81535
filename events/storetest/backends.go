package storetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/memstore"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/internal/pgtest"
)

// Named is a backend with the name its subtest runs under.
type Named struct {
	Name string
	Backend
}

// Backends are the stores corral ships, each opened fresh for every test:
// the simulation's in-memory log, a SQLite file in the test's directory
// and a database of the test binary's own PostgreSQL server
// (internal/pgtest). A decorator of events.Store runs the suite over each
// through Decorated.
func Backends() []Named {
	return []Named{{"memory", Memory}, {"sqlite", SQLite}, {"postgres", Postgres}}
}

// Memory opens fresh in-memory logs (events/memstore).
var Memory = Backend{
	New: func(t testing.TB, clock func() time.Time) func() events.Store {
		l := memstore.NewLog()
		return func() events.Store { return l.Open(clock) }
	},
	Corrupt: func(t testing.TB, s events.Store, position int64, typ string, payload []byte) {
		s.(*memstore.Store).Log().Corrupt(position, typ, payload)
	},
}

// SQLite opens fresh SQLite files (events/sqlitestore).
var SQLite = Backend{
	New: func(t testing.TB, clock func() time.Time) func() events.Store {
		path := filepath.Join(t.TempDir(), "events.db")
		return func() events.Store {
			s, err := sqlitestore.Open(context.Background(), path, sqlitestore.Options{Clock: clock, PollInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	},
	Corrupt: func(t testing.TB, s events.Store, position int64, typ string, payload []byte) {
		if err := s.(*sqlitestore.Store).ExecForTest(`UPDATE events SET type = ?, payload = ? WHERE position = ?`, typ, payload, position); err != nil {
			t.Fatal(err)
		}
	},
}

// Postgres opens fresh PostgreSQL databases (events/pgstore), migrated on
// the first open.
var Postgres = Backend{
	New: func(t testing.TB, clock func() time.Time) func() events.Store {
		url := pgtest.NewDatabase(t)
		migrated := false
		return func() events.Store {
			ctx := context.Background()
			s, err := pgstore.Open(ctx, url, pgstore.Options{Clock: clock, PollInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if !migrated {
				if err := s.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
				migrated = true
			}
			return s
		}
	},
	Corrupt: func(t testing.TB, s events.Store, position int64, typ string, payload []byte) {
		_, err := s.(*pgstore.Store).Pool().Exec(context.Background(),
			`UPDATE events SET type = $1, payload = $2 WHERE position = $3`, typ, payload, position)
		if err != nil {
			t.Fatal(err)
		}
	},
}

// Decorated is b with every store it opens wrapped by wrap. The decorator
// must offer Unwrap() events.Store, through which Corrupt reaches the
// backend's own store.
func Decorated(b Backend, wrap func(events.Store) events.Store) Backend {
	return Backend{
		New: func(t testing.TB, clock func() time.Time) func() events.Store {
			open := b.New(t, clock)
			return func() events.Store { return wrap(open()) }
		},
		Corrupt: func(t testing.TB, s events.Store, position int64, typ string, payload []byte) {
			u, ok := s.(interface{ Unwrap() events.Store })
			if !ok {
				t.Fatalf("storetest: %T decorates a store but has no Unwrap", s)
			}
			b.Corrupt(t, u.Unwrap(), position, typ, payload)
		},
	}
}
