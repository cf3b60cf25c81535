package projections_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/golden"
	"github.com/corralhq/corral/events/memstore"
	"github.com/corralhq/corral/projections"
)

// goldenHistory is the first n events of the golden history of seed
// (testdata/histories, written by internal/history: events the master
// could have written).
func goldenHistory(t testing.TB, seed uint64, n int) []events.Event {
	t.Helper()
	evs, err := golden.ReadFile(fmt.Sprintf("testdata/histories/small-%d.jsonl.gz", seed))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < n {
		t.Fatalf("the golden history of seed %d has %d events, the test wants %d", seed, len(evs), n)
	}
	return evs[:n]
}

// history stores the first n events of a golden history in a memstore
// with their recorded_at, checkpointing every `every` events. It returns
// the store and the encoded state after every position.
func history(t testing.TB, seed uint64, n int64, every int64) (*memstore.Store, [][]byte) {
	t.Helper()
	ctx := context.Background()
	log := goldenHistory(t, seed, int(n))
	var clock time.Time
	store := memstore.NewLog().Open(func() time.Time { return clock })
	cp := projections.NewCheckpointer(store, projections.CheckpointPolicy{EveryEvents: every}, func() time.Time { return clock }, 0)
	s := projections.New()
	encoded := [][]byte{projections.Encode(s)}
	for _, e := range log {
		clock = e.RecordedAt
		e.Position = 0
		if _, err := store.Append(ctx, events.AppendRequest{ExpectedPosition: s.Position, Events: []events.Event{e}}); err != nil {
			t.Fatal(err)
		}
		read, err := store.Read(ctx, s.Position+1, 1)
		if err != nil || len(read) != 1 {
			t.Fatal(err)
		}
		if err := projections.Apply(s, read[0]); err != nil {
			t.Fatal(err)
		}
		if _, _, err := cp.Maybe(ctx, s); err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, projections.Encode(s))
		if s.Position%500 == 0 {
			if err := s.CheckIndexes(); err != nil {
				t.Fatalf("position %d: %v", s.Position, err)
			}
		}
	}
	if s.Skipped != 0 {
		t.Fatalf("%d events skipped", s.Skipped)
	}
	return store, encoded
}

// For random valid histories: checkpoint + tail equals full replay, and the
// state at every position equals the fold of the prefix.
func TestPropertyCheckpointsAndStateAt(t *testing.T) {
	ctx := context.Background()
	seeds, n := uint64(3), int64(2500)
	if testing.Short() {
		seeds, n = 1, 1000
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			store, encoded := history(t, seed, n, 97)
			head, _ := store.Head(ctx)
			if store.Log().Checkpoints(projections.CheckpointName) != int(head/97) {
				t.Fatalf("%d checkpoints for %d events", store.Log().Checkpoints(projections.CheckpointName), head)
			}

			loaded, err := projections.Load(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			full := projections.New()
			if err := projections.Replay(ctx, store, full, head); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(projections.Encode(loaded), projections.Encode(full)) || !bytes.Equal(projections.Encode(full), encoded[head]) {
				t.Fatal("checkpoint + tail differs from the full replay")
			}
			if err := loaded.CheckIndexes(); err != nil {
				t.Fatal(err)
			}

			for p := int64(0); p <= head; p++ {
				s, err := projections.StateAt(ctx, store, p)
				if err != nil {
					t.Fatalf("StateAt(%d): %v", p, err)
				}
				if !bytes.Equal(projections.Encode(s), encoded[p]) {
					t.Fatalf("StateAt(%d) differs from the fold of the prefix", p)
				}
			}
			if _, err := projections.StateAt(ctx, store, head+1); err == nil {
				t.Fatal("StateAt beyond the head succeeded")
			}

			// StateAtTime: the last event recorded at or before t.
			evs, _ := store.Read(ctx, 1, int(head))
			rng := rand.New(rand.NewPCG(seed, 1))
			first, last := evs[0].RecordedAt, evs[len(evs)-1].RecordedAt
			for range 40 {
				at := first.Add(time.Duration(rng.Int64N(int64(last.Sub(first))+int64(2*time.Second))) - time.Second)
				want := int64(0)
				for _, e := range evs {
					if !e.RecordedAt.After(at) {
						want = e.Position
					}
				}
				s, pos, err := projections.StateAtTime(ctx, store, at)
				if err != nil {
					t.Fatal(err)
				}
				if pos != want || !bytes.Equal(projections.Encode(s), encoded[want]) {
					t.Fatalf("StateAtTime(%v) at position %d, want %d", at, pos, want)
				}
			}
		})
	}
}

// Replaying an event already applied changes nothing, and a gap is refused.
func TestApplyIsIdempotentAndRefusesGaps(t *testing.T) {
	log := goldenHistory(t, 8, 800)
	s := projections.New()
	for i, e := range log {
		if err := projections.Apply(s, e); err != nil {
			t.Fatal(err)
		}
		before := projections.Encode(s)
		for _, old := range log[max(0, i-3) : i+1] {
			if err := projections.Apply(s, old); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(before, projections.Encode(s)) {
			t.Fatalf("re-applying events up to %d changed the state", e.Position)
		}
	}
	gap := log[0]
	gap.Position = s.Position + 2
	if err := projections.Apply(s, gap); err == nil {
		t.Fatal("gap accepted")
	}
}
