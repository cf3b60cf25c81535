package commands

import (
	"testing"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// FuzzDecodeSpec feeds the decoder and validator arbitrary bytes: they never
// panic, a refusal is an *Error, and a spec they accept is one SubmitJob
// either accepts or refuses without emitting anything. The seed corpus in
// testdata/fuzz/FuzzDecodeSpec runs in every go test.
func FuzzDecodeSpec(f *testing.F) {
	f.Add([]byte(fullSpecYAML))
	f.Add([]byte(`{"name":"j","count":1,"command":"x","resources":{"cpu":1,"memory":"1Gi"}}`))
	s := projections.New()
	for _, e := range mustDecide(f, s, RegisterMachine{Meta: root, Machine: "m0", Address: "a:1",
		Capacity: projections.Resources{CPUMilli: 64000, MemoryBytes: 256 << 30, Ports: 1000}}) {
		if err := projections.Apply(s, e); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := decodeYAML(data, "alice")
		if err != nil {
			if CodeOf(err) != InvalidArgument {
				t.Fatalf("refusal %v has code %v", err, CodeOf(err))
			}
			if spec != nil {
				t.Fatal("a refused spec was returned")
			}
			return
		}
		if spec.User != "alice" {
			t.Fatalf("user %q, not the caller", spec.User)
		}
		if err := ValidateSpec(spec); err != nil {
			t.Fatalf("decoded spec does not validate: %v", err)
		}
		evs, err := Decide(s, SubmitJob{Meta: alice, Spec: spec}, FixedClock(t0))
		if err != nil && len(evs) != 0 {
			t.Fatalf("refused with %d events", len(evs))
		}
	})
}

func mustDecide(tb testing.TB, s *projections.State, cmd Command) []events.Event {
	tb.Helper()
	evs, err := Decide(s, cmd, FixedClock(t0))
	if err != nil {
		tb.Fatal(err)
	}
	return evs
}
