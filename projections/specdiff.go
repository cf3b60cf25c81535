package projections

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/corralhq/corral/events"
)

// SpecChanges lists the fields that differ between two specs, by their
// path in the spec's JSON form, in path order: "args: [...] -> [...]",
// "- args: [...]" (only in a), "+ args: [...]" (only in b). It shows what it
// is given: pass specs through the API's redaction where secrets matter.
func SpecChanges(a, b *events.JobSpec) []string {
	fa, fb := flatSpec(a), flatSpec(b)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	}) {
		va, inA := fa[k]
		vb, inB := fb[k]
		switch {
		case inA && inB && va == vb:
		case inA && inB:
			out = append(out, fmt.Sprintf("%s: %s -> %s", k, va, vb))
		case inA:
			out = append(out, fmt.Sprintf("- %s: %s", k, va))
		default:
			out = append(out, fmt.Sprintf("+ %s: %s", k, vb))
		}
	}
	return out
}

// flatSpec is a spec as path -> JSON value of its leaves (lists whole).
func flatSpec(s *events.JobSpec) map[string]string {
	out := map[string]string{}
	if s == nil {
		return out
	}
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(s)
	if err != nil {
		return out
	}
	var m map[string]any
	if json.Unmarshal(js, &m) != nil {
		return out
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if obj, ok := v.(map[string]any); ok && len(obj) > 0 {
			for k, x := range obj {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, x)
			}
			return
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // args hold shell, not HTML
		_ = enc.Encode(v)
		out[prefix] = strings.TrimSpace(b.String())
	}
	walk("", m)
	return out
}
