package infrastore

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/history"
)

// protojsonText is the reference: protojson with proto field names, the
// random space after its commas (outside strings) taken out, and null
// where it refuses the message.
func protojsonText(m proto.Message) string {
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return "null"
	}
	out := make([]byte, 0, len(raw))
	inString, escaped := false, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		out = append(out, c)
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && c == ',' && i+1 < len(raw) && raw[i+1] == ' ':
			i++
		}
	}
	return string(out)
}

// Every payload of simulated cells is stored as protojson writes it.
func TestPayloadJSONIsProtojson(t *testing.T) {
	c := history.New(history.Large, 7)
	c.Run(60_000)
	h := history.New(history.Hours, 3)
	h.Run(20_000)
	types := map[string]bool{}
	for _, e := range append(c.Log, h.Log...) {
		got, want := payloadJSON(e.Data), protojsonText(e.Data)
		if got != want {
			t.Fatalf("%s at %d:\n got %s\nwant %s", e.Type, e.Position, got, want)
		}
		types[e.Type] = true
	}
	if len(types) < 25 {
		t.Fatalf("only %d event types in the histories", len(types))
	}
}

// Random values of every field of every message of the catalogue: strings
// with quotes, backslashes, control characters, multi-byte runes and
// invalid UTF-8, floats at every formatting boundary, NaN and the
// infinities, extreme integers, maps of several keys, nested messages.
func TestPayloadJSONIsProtojsonOnRandomMessages(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := events.File_catalogue_proto.Messages()
	if msgs.Len() < 30 {
		t.Fatalf("only %d messages in the catalogue", msgs.Len())
	}
	invalid := 0
	for round := range 300 {
		for i := range msgs.Len() {
			md := msgs.Get(i)
			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			if err != nil {
				t.Fatal(err)
			}
			m := mt.New()
			fillRandom(rng, m, 3, round%10 == 0)
			got, want := string(appendPayloadJSON(nil, m.Interface().(events.Payload))), protojsonText(m.Interface())
			if got != want {
				t.Fatalf("%s:\n got %s\nwant %s", md.FullName(), got, want)
			}
			if got == "null" {
				invalid++
			}
		}
	}
	if invalid == 0 {
		t.Fatal("no message carried invalid UTF-8: the refusal was never compared")
	}
}

var randomStrings = []string{"", "a", "team-a", `q"uote`, `back\slash`, "tab\there", "nl\nx", "\x00\x01\x1f", "\x7f", "é", "日本語", "😀", "\u2028\u2029", "<&>", "a,b", "a, b"}

var randomFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21, 1.2345e300, -3.25, math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1), 123456.789}

var randomInts = []int64{0, 1, -1, 42, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, 1 << 53, 1<<53 + 1}

func fillRandom(rng *rand.Rand, m protoreflect.Message, depth int, mayBeInvalid bool) {
	fds := m.Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		if rng.IntN(4) == 0 {
			continue // unpopulated
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range rng.IntN(4) {
				if fd.Kind() == protoreflect.MessageKind {
					if depth > 0 {
						e := l.NewElement()
						fillRandom(rng, e.Message(), depth-1, mayBeInvalid)
						l.Append(e)
					}
					continue
				}
				l.Append(randomScalar(rng, fd, mayBeInvalid))
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range rng.IntN(5) {
				k := randomScalar(rng, fd.MapKey(), false).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					if depth > 0 {
						v := mp.NewValue()
						fillRandom(rng, v.Message(), depth-1, mayBeInvalid)
						mp.Set(k, v)
					}
					continue
				}
				mp.Set(k, randomScalar(rng, fd.MapValue(), mayBeInvalid))
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth > 0 {
				fillRandom(rng, m.Mutable(fd).Message(), depth-1, mayBeInvalid)
			}
		default:
			m.Set(fd, randomScalar(rng, fd, mayBeInvalid))
		}
	}
}

func randomScalar(rng *rand.Rand, fd protoreflect.FieldDescriptor, mayBeInvalid bool) protoreflect.Value {
	n := randomInts[rng.IntN(len(randomInts))]
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(rng.IntN(2) == 0)
	case protoreflect.StringKind:
		s := randomStrings[rng.IntN(len(randomStrings))] + randomStrings[rng.IntN(len(randomStrings))]
		if mayBeInvalid && rng.IntN(20) == 0 {
			s += "\xff"
		}
		return protoreflect.ValueOfString(s)
	case protoreflect.BytesKind:
		b := make([]byte, rng.IntN(7))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return protoreflect.ValueOfBytes(b)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(n)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(randomFloats[rng.IntN(len(randomFloats))]))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(randomFloats[rng.IntN(len(randomFloats))])
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(rng.IntN(3)))
	}
	panic("no random value of kind " + fd.Kind().String())
}

// The stored text does not depend on the order a map was filled in.
func TestPayloadJSONSortsMapKeys(t *testing.T) {
	a := &events.MachineRegistered{Machine: "m", Attributes: map[string]string{"zone": "b", "arch": "x86", "rack": "r1"}}
	got := payloadJSON(a)
	if !bytes.Contains([]byte(got), []byte(`"attributes":{"arch":"x86","rack":"r1","zone":"b"}`)) {
		t.Fatalf("map keys not sorted: %s", got)
	}
}
