package infrastore

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/projections"
)

// The log read back from the events table is the log: every event's
// fields and payload, and the state folded from it.
func TestLogReadBackIsTheLog(t *testing.T) {
	defer func(n int64) { checkpointEvery = n }(checkpointEvery)
	checkpointEvery = 1000 // so that replays start from the ingester's checkpoint
	ctx := context.Background()
	evs := cellHistory(4, 3000)
	store := newSQLiteLog(t, evs)
	s := openStore(t, Options{BatchSize: 701})
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	log := s.Log()
	head, err := log.Head(ctx)
	if err != nil || head != int64(len(evs)) {
		t.Fatalf("Head = %d, %v; want %d", head, err, len(evs))
	}
	for from := int64(1); from <= head; from += 997 {
		want, err := store.Read(ctx, from, 997)
		if err != nil {
			t.Fatal(err)
		}
		got, err := log.Read(ctx, from, 997)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("Read(%d): %d events, want %d", from, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if !proto.Equal(g.Data, w.Data) {
				t.Fatalf("position %d (%s): payload %v, want %v", w.Position, w.Type, g.Data, w.Data)
			}
			g.Data, w.Data = nil, nil
			if !g.OccurredAt.Equal(w.OccurredAt) || !g.RecordedAt.Equal(w.RecordedAt) {
				t.Fatalf("position %d: times %v/%v, want %v/%v", w.Position, g.OccurredAt, g.RecordedAt, w.OccurredAt, w.RecordedAt)
			}
			// Equal instants, perhaps in other locations.
			g.OccurredAt, g.RecordedAt = w.OccurredAt, w.RecordedAt
			if g != w {
				t.Fatalf("position %d:\n got %+v\nwant %+v", w.Position, g, w)
			}
		}
	}
	if got, err := log.Read(ctx, head+1, 10); err != nil || len(got) != 0 {
		t.Errorf("Read past the head = %d events, %v", len(got), err)
	}

	cp, ok, err := log.LoadCheckpoint(ctx, projections.CheckpointName, head)
	if err != nil || !ok || cp.Position < head-1000 || cp.Position > head {
		t.Fatalf("LoadCheckpoint(%d) = position %d, %v, %v; want the fold's checkpoint within 1000 events", head, cp.Position, ok, err)
	}
	// The state a replay starts from, folded from either (the Infrastore's
	// from its checkpoint where one precedes), is the same.
	for _, at := range []int64{1, head / 3, cp.Position, head} {
		a, err := projections.StateAt(ctx, store, at)
		if err != nil {
			t.Fatal(err)
		}
		b, err := projections.StateAt(ctx, log, at)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(projections.Encode(a), projections.Encode(b)) {
			t.Fatalf("the state at %d folded from the Infrastore differs from the store's", at)
		}
	}
}

// A payload stored as null (protojson refused it) cannot be read back:
// the reader says which event, rather than hand back an empty one.
func TestLogReadBackRefusesANullPayload(t *testing.T) {
	ctx := context.Background()
	evs := cellHistory(4, 50)
	store := newSQLiteLog(t, evs)
	s := openStore(t, Options{})
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE events SET payload = NULL WHERE position = 7`); err != nil {
		t.Fatal(err)
	}
	_, err := s.Log().Read(ctx, 1, 50)
	if err == nil || !strings.Contains(err.Error(), "position 7") {
		t.Fatalf("Read over a null payload: %v, want an error naming position 7", err)
	}
	if _, err := s.Log().Read(ctx, 8, 5); err != nil {
		t.Fatalf("Read after it: %v", err)
	}
}
