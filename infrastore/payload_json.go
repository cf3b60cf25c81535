package infrastore

import (
	"cmp"
	"encoding/base64"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/corralhq/corral/events"
)

// A payload's JSON, as events.payload and job_specs.spec store it: the text
// protojson writes with proto field names, without the space it may put
// after a comma. protojson took a sixth of the ingester's CPU (its generic
// field ordering and encoder state per value); this writes the same bytes
// from each message type's fields, listed once. TestPayloadJSONIsProtojson
// holds it to protojson over every payload of a simulated cell and over
// random values of every message of the catalogue.

// payloadJSON renders a payload's JSON.
func payloadJSON(p events.Payload) string { return string(appendPayloadJSON(nil, p)) }

// appendPayloadJSON is payloadJSON appending to buf, so that one buffer
// serves a whole batch. Like protojson, a string that is not UTF-8 makes
// the whole payload unwritable: it is stored as null.
func appendPayloadJSON(buf []byte, p events.Payload) []byte {
	if p == nil {
		return append(buf, "null"...)
	}
	start := len(buf)
	out, ok := appendMessageJSON(buf, p.ProtoReflect())
	if !ok {
		return append(buf[:start], "null"...)
	}
	return out
}

// messageFields are a message type's fields in declaration order (the
// order protojson writes them in), each with its name as JSON, quoted and
// followed by the colon.
type messageFields struct {
	fields []protoreflect.FieldDescriptor
	names  [][]byte
}

var fieldsByMessage sync.Map // protoreflect.MessageDescriptor -> *messageFields

func fieldsOf(md protoreflect.MessageDescriptor) *messageFields {
	if f, ok := fieldsByMessage.Load(md); ok {
		return f.(*messageFields)
	}
	fds := md.Fields()
	f := &messageFields{}
	for i := range fds.Len() {
		fd := fds.Get(i)
		name, _ := appendJSONString(nil, fd.TextName())
		f.fields = append(f.fields, fd)
		f.names = append(f.names, append(name, ':'))
	}
	fieldsByMessage.Store(md, f)
	return f
}

func appendMessageJSON(buf []byte, m protoreflect.Message) ([]byte, bool) {
	f := fieldsOf(m.Descriptor())
	buf = append(buf, '{')
	first := true
	for i, fd := range f.fields {
		if !m.Has(fd) {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, f.names[i]...)
		var ok bool
		v := m.Get(fd)
		switch {
		case fd.IsList():
			buf, ok = appendListJSON(buf, v.List(), fd)
		case fd.IsMap():
			buf, ok = appendMapJSON(buf, v.Map(), fd)
		default:
			buf, ok = appendSingularJSON(buf, v, fd)
		}
		if !ok {
			return buf, false
		}
	}
	return append(buf, '}'), true
}

func appendListJSON(buf []byte, l protoreflect.List, fd protoreflect.FieldDescriptor) ([]byte, bool) {
	buf = append(buf, '[')
	for i := range l.Len() {
		if i > 0 {
			buf = append(buf, ',')
		}
		var ok bool
		if buf, ok = appendSingularJSON(buf, l.Get(i), fd); !ok {
			return buf, false
		}
	}
	return append(buf, ']'), true
}

// appendMapJSON writes a map's entries ordered by key, as protojson does:
// strings lexically, integers by value, false before true.
func appendMapJSON(buf []byte, m protoreflect.Map, fd protoreflect.FieldDescriptor) ([]byte, bool) {
	keys := make([]protoreflect.MapKey, 0, m.Len())
	m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.SortFunc(keys, compareMapKeys)
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		var ok bool
		if buf, ok = appendJSONString(buf, k.String()); !ok {
			return buf, false
		}
		buf = append(buf, ':')
		if buf, ok = appendSingularJSON(buf, m.Get(k), fd.MapValue()); !ok {
			return buf, false
		}
	}
	return append(buf, '}'), true
}

func compareMapKeys(a, b protoreflect.MapKey) int {
	switch x := a.Interface().(type) {
	case string:
		return cmp.Compare(x, b.String())
	case bool:
		switch {
		case x == b.Bool():
			return 0
		case !x:
			return -1
		}
		return 1
	case int32, int64:
		return cmp.Compare(a.Int(), b.Int())
	default:
		return cmp.Compare(a.Uint(), b.Uint())
	}
}

func appendSingularJSON(buf []byte, v protoreflect.Value, fd protoreflect.FieldDescriptor) ([]byte, bool) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(buf, v.Bool()), true
	case protoreflect.StringKind:
		return appendJSONString(buf, v.String())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(buf, v.Int(), 10), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(buf, v.Uint(), 10), true
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		// 64-bit integers are strings in JSON (a double cannot hold them).
		buf = append(buf, '"')
		return append(strconv.AppendInt(buf, v.Int(), 10), '"'), true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		buf = append(buf, '"')
		return append(strconv.AppendUint(buf, v.Uint(), 10), '"'), true
	case protoreflect.FloatKind:
		return appendJSONFloat(buf, v.Float(), 32), true
	case protoreflect.DoubleKind:
		return appendJSONFloat(buf, v.Float(), 64), true
	case protoreflect.BytesKind:
		buf = append(buf, '"')
		return append(base64.StdEncoding.AppendEncode(buf, v.Bytes()), '"'), true
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return appendJSONString(buf, string(ev.Name()))
		}
		return strconv.AppendInt(buf, int64(v.Enum()), 10), true
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return appendMessageJSON(buf, v.Message())
	}
	return buf, false
}

// appendJSONFloat writes a float as protojson does: the shortest text that
// reads back to it, in exponent form below 1e-6 and from 1e21 on (with a
// one-digit negative exponent as e-7, not e-07), and NaN and the
// infinities as strings.
func appendJSONFloat(buf []byte, f float64, bitSize int) []byte {
	switch {
	case math.IsNaN(f):
		return append(buf, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(buf, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(buf, `"-Infinity"`...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bitSize == 64 && (abs < 1e-6 || abs >= 1e21) ||
			bitSize == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	buf = strconv.AppendFloat(buf, f, format, -1, bitSize)
	if format == 'e' {
		n := len(buf)
		if n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf
}

// appendJSONString writes s as a JSON string, escaping the quote, the
// backslash and control characters as protojson does; ok is false when s
// is not UTF-8.
func appendJSONString(buf []byte, s string) ([]byte, bool) {
	buf = append(buf, '"')
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] >= ' ' && s[i] != '"' && s[i] != '\\' && s[i] < utf8.RuneSelf {
			i++
		}
		buf, s = append(buf, s[:i]...), s[i:]
		if len(s) == 0 {
			break
		}
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			return buf, false
		case r == '"' || r == '\\':
			buf = append(buf, '\\', byte(r))
		case r < ' ':
			buf = append(buf, '\\')
			switch r {
			case '\b':
				buf = append(buf, 'b')
			case '\f':
				buf = append(buf, 'f')
			case '\n':
				buf = append(buf, 'n')
			case '\r':
				buf = append(buf, 'r')
			case '\t':
				buf = append(buf, 't')
			default:
				buf = append(buf, 'u')
				buf = append(buf, "0000"[1+(bits.Len32(uint32(r))-1)/4:]...)
				buf = strconv.AppendUint(buf, uint64(r), 16)
			}
		default:
			buf = append(buf, s[:n]...)
		}
		s = s[n:]
	}
	return append(buf, '"'), true
}
