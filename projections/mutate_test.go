package projections_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// mutate changes a few fields of a payload to values that often name
// something else, or nothing: other tasks, machines, users, versions,
// negative indexes, cleared nested messages.
func mutate(rng *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		if rng.IntN(3) != 0 {
			continue
		}
		switch {
		case f.IsList() && f.Message() != nil:
			l := m.Mutable(f).List()
			for k := 0; k < l.Len(); k++ {
				if depth < 3 {
					mutate(rng, l.Get(k).Message(), depth+1)
				}
			}
		case f.IsList() || f.IsMap():
			m.Clear(f)
		case f.Message() != nil:
			if rng.IntN(2) == 0 || depth >= 3 {
				m.Clear(f)
			} else {
				mutate(rng, m.Mutable(f).Message(), depth+1)
			}
		case f.Kind() == protoreflect.StringKind:
			m.Set(f, protoreflect.ValueOfString([]string{"", "u0", "u1", "j1", "j2", "m00001", "m00003", "pool", "production", "x"}[rng.IntN(10)]))
		case f.Kind() == protoreflect.Int32Kind:
			m.Set(f, protoreflect.ValueOfInt32([]int32{-1, 0, 1, 2, 3, 11, 1 << 30}[rng.IntN(7)]))
		case f.Kind() == protoreflect.Int64Kind:
			m.Set(f, protoreflect.ValueOfInt64([]int64{-1, 0, 1, 2, 3, 1 << 40}[rng.IntN(6)]))
		case f.Kind() == protoreflect.BoolKind:
			m.Set(f, protoreflect.ValueOfBool(!m.Get(f).Bool()))
		}
	}
}

// Events that do not fit the state (a writer's bug, a hand-made event) must
// neither panic Apply nor break the state's indexes and sums.
func TestApplyMutatedHistories(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			s := projections.New()
			for i, e := range goldenHistory(t, seed, 3000) {
				if rng.IntN(10) == 0 {
					p := proto.Clone(e.Data)
					mutate(rng, p.ProtoReflect(), 0)
					e.Data = p
				}
				if err := projections.Apply(s, e); err != nil {
					t.Fatal(err)
				}
				if i%250 == 0 {
					if err := s.CheckIndexes(); err != nil {
						t.Fatalf("after event %d: %v", e.Position, err)
					}
				}
			}
			if err := s.CheckIndexes(); err != nil {
				t.Fatal(err)
			}
			if s.Skipped == 0 {
				t.Fatal("no mutated event was skipped; the mutations are too gentle")
			}
		})
	}
	// Nil nested messages.
	s := projections.New()
	for _, p := range []events.Payload{
		&events.UsageReported{Machine: "m", Tasks: []*events.TaskUsage{nil}},
		&events.ReservationEstimated{Machine: "m", Tasks: []*events.TaskReservation{nil}},
		&events.JobSubmitted{Spec: &events.JobSpec{Name: "j", User: "u", TaskCount: 1, Overrides: map[int32]*events.TaskOverride{0: nil}}},
		&events.TaskSubmitted{User: "u", Job: "j", Index: 0},
		&events.AllocSetCreated{User: "u", Name: "a", Count: 1, Constraints: []*events.Constraint{nil}},
	} {
		if err := projections.Apply(s, events.Event{Data: p}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CheckIndexes(); err != nil {
		t.Fatal(err)
	}
}
