package projections_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/memstore"
	"github.com/corralhq/corral/projections"
)

func TestCheckpointerPolicy(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store := memstore.NewLog().Open(clock)
	cp := projections.NewCheckpointer(store, projections.CheckpointPolicy{EveryEvents: 10, Every: time.Minute}, clock, 0)
	s := projections.New()
	apply := func(n int) {
		for range n {
			if err := projections.Apply(s, events.Event{OccurredAt: now, Data: &events.LeaderElected{Holder: "m", Epoch: s.Position}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(9)
	if _, ok, _ := cp.Maybe(ctx, s); ok {
		t.Fatal("checkpoint after 9 events")
	}
	apply(1)
	if c, ok, err := cp.Maybe(ctx, s); !ok || err != nil || c.Position != 10 || !c.TakenAt.Equal(now) {
		t.Fatalf("no checkpoint after 10 events: %v %v", c.Position, err)
	}
	// By time: a minute later, any new event is worth a checkpoint.
	apply(1)
	now = now.Add(59 * time.Second)
	if cp.Due(s) {
		t.Fatal("due before a minute")
	}
	now = now.Add(time.Second)
	if _, ok, _ := cp.Maybe(ctx, s); !ok {
		t.Fatal("no checkpoint after a minute")
	}
	// Nothing new: nothing to write, however long it has been.
	now = now.Add(time.Hour)
	if cp.Due(s) {
		t.Fatal("due without new events")
	}
	if n := store.Log().Checkpoints(projections.CheckpointName); n != 2 {
		t.Fatalf("%d checkpoints", n)
	}
}

// A checkpoint that cannot be read costs a longer replay, not an error.
func TestLoadSkipsUnreadableCheckpoints(t *testing.T) {
	ctx := context.Background()
	store, encoded := history(t, 4, 600, 100)
	for _, pos := range []int64{500, 600} {
		if err := store.SaveCheckpoint(ctx, events.Checkpoint{Name: projections.CheckpointName, Position: pos, State: []byte("garbage")}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := projections.Load(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(projections.Encode(s), encoded[len(encoded)-1]) {
		t.Fatal("load after bad checkpoints differs")
	}
}

func TestCodecRoundTrip(t *testing.T) {
	log := goldenHistory(t, 5, 3500)
	s := projections.New()
	if err := projections.ApplyAll(s, log[:3000]); err != nil {
		t.Fatal(err)
	}
	enc := projections.Encode(s)
	d, err := projections.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(projections.Encode(d), enc) {
		t.Fatal("decode(encode(s)) encodes differently")
	}
	// The decoded state moves on like the original.
	if err := projections.ApplyAll(s, log[3000:]); err != nil {
		t.Fatal(err)
	}
	if err := projections.ApplyAll(d, log[3000:]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(projections.Encode(d), projections.Encode(s)) {
		t.Fatal("a decoded state folds the next events differently")
	}
	for i, bad := range [][]byte{nil, []byte("crst"), append([]byte("crst"), 9), enc[:len(enc)/2], append(append([]byte{}, enc...), 0)} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if _, err := projections.Decode(bad); err == nil {
				t.Fatalf("decoded %d bad bytes", len(bad))
			}
		})
	}
}

// FuzzDecodeState: corrupt checkpoints never panic the decoder.
func FuzzDecodeState(f *testing.F) {
	s := projections.New()
	if err := projections.ApplyAll(s, goldenHistory(f, 6, 300)); err != nil {
		f.Fatal(err)
	}
	f.Add(projections.Encode(s))
	f.Add(projections.Encode(projections.New()))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := projections.Decode(b)
		if err != nil {
			return
		}
		again, err := projections.Decode(projections.Encode(s))
		if err != nil || !bytes.Equal(projections.Encode(s), projections.Encode(again)) {
			t.Fatalf("a decoded state does not round-trip: %v", err)
		}
	})
}
