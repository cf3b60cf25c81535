package storeopen_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/events/storeopen"
	"github.com/corralhq/corral/internal/pgtest"
)

func TestOpenPicksTheBackend(t *testing.T) {
	ctx := context.Background()
	pg, err := storeopen.Open(ctx, pgtest.NewDatabase(t), storeopen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if _, ok := pg.(*pgstore.Store); !ok {
		t.Fatalf("postgres URL opened a %T", pg)
	}
	// Migrated: an append works at once.
	if _, err := pg.Append(ctx, events.AppendRequest{Events: []events.Event{events.New("machine/m1", time.Unix(1700000000, 0), &events.MachineUp{Machine: "m1"})}}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{filepath.Join(t.TempDir(), "a.db"), "sqlite://" + filepath.Join(t.TempDir(), "b.db")} {
		s, err := storeopen.Open(ctx, u, storeopen.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.(*sqlitestore.Store); !ok {
			t.Fatalf("%s opened a %T", u, s)
		}
		s.Close()
	}
	if _, err := storeopen.Open(ctx, "mysql://x", storeopen.Options{}); err == nil || !strings.Contains(err.Error(), "mysql") {
		t.Fatalf("unsupported scheme: %v", err)
	}
	if _, err := storeopen.Open(ctx, "", storeopen.Options{}); err == nil {
		t.Fatal("empty URL accepted")
	}
}

// A reader pointed at a directory with no log gets an error, and the
// directory stays empty.
func TestReaderDoesNotCreateALog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "events.db")
	if _, err := storeopen.Open(ctx, missing, storeopen.Options{NoMigrate: true}); err == nil || !strings.Contains(err.Error(), "no log at") {
		t.Fatalf("opening a missing log to read: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the reader left %d files behind", len(ents))
	}
	s, err := storeopen.Open(ctx, missing, storeopen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = storeopen.Open(ctx, missing, storeopen.Options{NoMigrate: true}); err != nil {
		t.Fatalf("opening an existing log to read: %v", err)
	}
	s.Close()
}
