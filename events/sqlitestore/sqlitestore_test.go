package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/events/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.SQLite)
}

func TestTwoStoresOnOneFile(t *testing.T) {
	// Two processes' stores on one file: appends by one are seen by the
	// other's subscription through polling, and positions stay gap-free.
	path := filepath.Join(t.TempDir(), "events.db")
	ctx := context.Background()
	a, err := sqlitestore.Open(ctx, path, sqlitestore.Options{PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlitestore.Open(ctx, path, sqlitestore.Options{PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sub := b.Subscribe(0)
	for i := 0; i < 5; i++ {
		s := a
		if i%2 == 1 {
			s = b
		}
		if _, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: int64(i), Events: []events.Event{storetest.Machine(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var got []int64
	for len(got) < 5 {
		evs, err := sub.Next(wait)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			got = append(got, e.Position)
		}
	}
	for i, p := range got {
		if p != int64(i+1) {
			t.Fatalf("positions %v are not 1..5", got)
		}
	}
}
