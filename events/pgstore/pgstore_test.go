package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/events/storetest"
	"github.com/corralhq/corral/internal/pgtest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Postgres)
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
