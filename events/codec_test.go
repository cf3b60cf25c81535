package events

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func TestEveryTypeRoundTrips(t *testing.T) {
	if len(Types()) < 29 {
		t.Fatalf("catalogue lists %d types", len(Types()))
	}
	for _, typ := range Types() {
		k, _ := Lookup(typ)
		p := k.New()
		if TypeOf(p) != typ {
			t.Fatalf("kind %s makes a %s", typ, TypeOf(p))
		}
		raw, err := Encode(p)
		if err != nil {
			t.Fatalf("%s: encode: %v", typ, err)
		}
		back, err := Decode(1, typ, k.SchemaVersion, raw)
		if err != nil || !proto.Equal(back, p) {
			t.Fatalf("%s: decode: %v", typ, err)
		}
	}
}

func TestTraceCodes(t *testing.T) {
	for i, tc := range []struct {
		p    Payload
		want TraceCode
	}{
		{&TaskSubmitted{}, TraceSubmit},
		{&TaskScheduled{}, TraceSchedule},
		{&TaskEvicted{}, TraceEvict},
		{&TaskFailed{}, TraceFail},
		{&TaskFinished{}, TraceFinish},
		{&TaskKilled{}, TraceKill},
		{&TaskLost{}, TraceLost},
		{&TaskUpdated{}, TraceUpdatePending},
		{&TaskUpdated{Running: true}, TraceUpdateRunning},
		{&TaskStarted{}, NoTraceCode},
		{&MachineRegistered{}, NoTraceCode},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := TraceCodeOf(tc.p); got != tc.want {
				t.Errorf("%s: trace code %v, want %v", TypeOf(tc.p), got, tc.want)
			}
		})
	}
}

func TestDecodeErrorsNamePositionAndType(t *testing.T) {
	_, err := Decode(42, "NoSuchThing", 1, nil)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "position 42") || !strings.Contains(err.Error(), "NoSuchThing") {
		t.Fatalf("unknown type: %v", err)
	}
	_, err = Decode(7, "TaskFailed", 1, []byte{0x0a, 0xff})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "position 7") || !strings.Contains(err.Error(), "TaskFailed") {
		t.Fatalf("truncated payload: %v", err)
	}
	_, err = Decode(9, "TaskFailed", 99, nil)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "schema version 99") {
		t.Fatalf("future schema version: %v", err)
	}
}

// TestUpcasting shows how an old schema version is read: a version-1
// MachineDown stored the reason in field 2 as a number; version 2 keeps a
// string. The upcaster rewrites the stored bytes before decoding.
func TestUpcasting(t *testing.T) {
	k := kinds["MachineDown"]
	saved, savedUp := k.SchemaVersion, k.upcasters
	k.upcasters = map[int32]Upcaster{}
	defer func() { k.SchemaVersion, k.upcasters = saved, savedUp }()

	var v1 []byte
	v1 = protowire.AppendTag(v1, 1, protowire.BytesType)
	v1 = protowire.AppendString(v1, "m7")
	v1 = protowire.AppendTag(v1, 2, protowire.VarintType)
	v1 = protowire.AppendVarint(v1, 3) // reason code 3: "missed polls"

	RegisterUpcaster("MachineDown", 2, func(old []byte) ([]byte, error) {
		var out []byte
		for len(old) > 0 {
			num, typ, n := protowire.ConsumeTag(old)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			old = old[n:]
			if num == 2 && typ == protowire.VarintType {
				code, m := protowire.ConsumeVarint(old)
				if m < 0 {
					return nil, protowire.ParseError(m)
				}
				old = old[m:]
				out = protowire.AppendTag(out, 2, protowire.BytesType)
				out = protowire.AppendString(out, map[uint64]string{3: "missed polls"}[code])
				continue
			}
			m := protowire.ConsumeFieldValue(num, typ, old)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			out = protowire.AppendTag(out, num, typ)
			out = append(out, old[:m]...)
			old = old[m:]
		}
		return out, nil
	})
	if New("machine/m7", time.Unix(1, 0), &MachineDown{}).SchemaVersion != 2 {
		t.Fatal("new events are not written with the bumped version")
	}
	p, err := Decode(3, "MachineDown", 1, v1)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(*MachineDown); got.Machine != "m7" || got.Reason != "missed polls" {
		t.Fatalf("upcast = %+v", got)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	ok := New("machine/m1", time.Unix(1, 0), &MachineUp{Machine: "m1"})
	for _, tc := range []struct {
		mutate func(*Event)
		want   string
	}{
		{func(e *Event) { e.Stream = "" }, "events[0].stream"},
		{func(e *Event) { e.Data = nil }, "events[0].data"},
		{func(e *Event) { e.OccurredAt = time.Time{} }, "events[0].occurred_at"},
		{func(e *Event) { e.Type = "MachineDown" }, "events[0].type"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			e := ok
			tc.mutate(&e)
			_, err := ValidateAppend(&AppendRequest{Events: []Event{e}})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v", tc.want, err)
			}
		})
	}
	if _, err := ValidateAppend(&AppendRequest{}); !errors.Is(err, ErrEmptyAppend) {
		t.Errorf("empty: %v", err)
	}
}

func TestDecideAcquire(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	held := Lease{Name: "leader", Holder: "a", Epoch: 4, ExpiresAt: now.Add(time.Second)}
	if l, err := DecideAcquire(Lease{}, false, "leader", "a", now, time.Second); err != nil || l.Epoch != 1 {
		t.Fatalf("first: %+v %v", l, err)
	}
	// Every acquisition is a new term: the holder taking its own live
	// lease again fences what it appended under the earlier one.
	if l, err := DecideAcquire(held, true, "leader", "a", now, time.Second); err != nil || l.Epoch != 5 {
		t.Fatalf("re-acquire by holder: %+v %v", l, err)
	}
	// Another incarnation of the same replica is another holder.
	if _, err := DecideAcquire(held, true, "leader", "a#2", now, time.Second); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("same name, new incarnation, live lease: %v", err)
	}
	if _, err := DecideAcquire(held, true, "leader", "b", now, time.Second); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("held by other: %v", err)
	}
	if l, err := DecideAcquire(held, true, "leader", "b", now.Add(time.Second), time.Second); err != nil || l.Epoch != 5 {
		t.Fatalf("takeover at expiry: %+v %v", l, err)
	}
	if l, err := DecideAcquire(held, true, "leader", "a", now.Add(2*time.Second), time.Second); err != nil || l.Epoch != 5 {
		t.Fatalf("lapsed holder comes back: %+v %v", l, err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, typ := range []string{"TaskScheduled", "JobSubmitted", "UsageReported"} {
		k, _ := Lookup(typ)
		raw, _ := Encode(k.New())
		f.Add(typ, raw)
	}
	spec, _ := Encode(&JobSubmitted{Spec: &JobSpec{Name: "web", User: "alice", TaskCount: 3, Env: map[string]string{"A": "b"}}})
	f.Add("JobSubmitted", spec)
	f.Add("NoSuchThing", []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, typ string, raw []byte) {
		p, err := Decode(1, typ, 1, raw)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error is not ErrCorrupt: %v", err)
			}
			return
		}
		// What decodes re-encodes and decodes to the same message.
		again, err := Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(1, typ, 1, again)
		if err != nil || !proto.Equal(back, p) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}
