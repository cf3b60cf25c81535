package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/events/storetest"
	"github.com/corralhq/corral/internal/pgtest"
)

// Backend opens fresh PostgreSQL databases for the conformance suite.
var Backend = storetest.Backend{
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

func TestConformance(t *testing.T) {
	storetest.Run(t, Backend)
}

func TestMigrateTwiceIsHarmless(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		s, err := pgstore.Open(ctx, url, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("migration run %d: %v", i+1, err)
		}
		s.Close()
	}
}

func TestOpenUnreachableNamesTheServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := pgstore.Open(ctx, "postgres://nobody@127.0.0.1:1/corral?sslmode=disable&connect_timeout=2", pgstore.Options{})
	if err == nil {
		t.Fatal("open of an unreachable server succeeded")
	}
}
