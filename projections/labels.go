package projections

import (
	"fmt"
	"slices"
	"strings"

	"github.com/corralhq/corral/events"
)

// SelectorOp is the operator of one requirement of a label selector.
type SelectorOp int8

const (
	OpEquals    SelectorOp = iota // key=value, key==value
	OpNotEquals                   // key!=value (also true when key is absent)
	OpIn                          // key in (a,b)
	OpNotIn                       // key notin (a,b) (also true when key is absent)
	OpExists                      // key
	OpNotExists                   // !key
)

// Requirement is one comma-separated term of a selector.
type Requirement struct {
	Key    string
	Op     SelectorOp
	Values []string // one for = and !=, one or more for in and notin, none otherwise
}

// Selector is a Kubernetes-style label selector: requirements that must all
// hold. The zero Selector matches everything.
type Selector struct {
	Reqs []Requirement
}

// Matches reports whether labels satisfy every requirement.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s.Reqs {
		v, ok := labels[r.Key]
		switch r.Op {
		case OpEquals:
			if !ok || v != r.Values[0] {
				return false
			}
		case OpNotEquals:
			if ok && v == r.Values[0] {
				return false
			}
		case OpIn:
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case OpNotIn:
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		case OpExists:
			if !ok {
				return false
			}
		case OpNotExists:
			if ok {
				return false
			}
		}
	}
	return true
}

// String prints the selector in the syntax ParseSelector reads.
func (s Selector) String() string {
	parts := make([]string, len(s.Reqs))
	for i, r := range s.Reqs {
		switch r.Op {
		case OpEquals:
			parts[i] = r.Key + "=" + r.Values[0]
		case OpNotEquals:
			parts[i] = r.Key + "!=" + r.Values[0]
		case OpIn:
			parts[i] = r.Key + " in (" + strings.Join(r.Values, ",") + ")"
		case OpNotIn:
			parts[i] = r.Key + " notin (" + strings.Join(r.Values, ",") + ")"
		case OpExists:
			parts[i] = r.Key
		case OpNotExists:
			parts[i] = "!" + r.Key
		}
	}
	return strings.Join(parts, ",")
}

// ParseSelector reads `team=web,tier!=canary`, `env in (prod,staging)`,
// `env notin (dev)`, `gpu` (key exists) and `!gpu` (key absent). Whitespace
// around terms is ignored. The error names the term and what is wrong.
func ParseSelector(text string) (Selector, error) {
	var sel Selector
	text = strings.TrimSpace(text)
	if text == "" {
		return sel, nil
	}
	terms, err := splitTerms(text)
	if err != nil {
		return Selector{}, err
	}
	for _, term := range terms {
		r, err := parseRequirement(strings.TrimSpace(term))
		if err != nil {
			return Selector{}, err
		}
		sel.Reqs = append(sel.Reqs, r)
	}
	return sel, nil
}

// splitTerms splits on commas outside parentheses.
func splitTerms(text string) ([]string, error) {
	var terms []string
	depth, start := 0, 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '(':
			depth++
			if depth > 1 {
				return nil, fmt.Errorf("selector %q: nested parentheses", text)
			}
		case ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("selector %q: ')' without '('", text)
			}
		case ',':
			if depth == 0 {
				terms = append(terms, text[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("selector %q: '(' without ')'", text)
	}
	return append(terms, text[start:]), nil
}

func parseRequirement(term string) (Requirement, error) {
	if term == "" {
		return Requirement{}, fmt.Errorf("selector: empty term (two commas in a row?)")
	}
	if strings.HasPrefix(term, "!") && !strings.Contains(term, "=") {
		key := strings.TrimSpace(term[1:])
		if err := checkKey(term, key); err != nil {
			return Requirement{}, err
		}
		return Requirement{Key: key, Op: OpNotExists}, nil
	}
	if i := strings.Index(term, "!="); i >= 0 {
		return binaryReq(term, term[:i], term[i+2:], OpNotEquals)
	}
	if i := strings.Index(term, "=="); i >= 0 {
		return binaryReq(term, term[:i], term[i+2:], OpEquals)
	}
	if i := strings.Index(term, "="); i >= 0 {
		return binaryReq(term, term[:i], term[i+1:], OpEquals)
	}
	if fields := strings.Fields(term); len(fields) >= 2 {
		key := fields[0]
		rest := strings.TrimSpace(term[len(key):])
		var op SelectorOp
		switch {
		case strings.HasPrefix(rest, "notin"):
			op, rest = OpNotIn, rest[len("notin"):]
		case strings.HasPrefix(rest, "in"):
			op, rest = OpIn, rest[len("in"):]
		default:
			return Requirement{}, fmt.Errorf("selector term %q: expected =, !=, in or notin after %q", term, key)
		}
		if err := checkKey(term, key); err != nil {
			return Requirement{}, err
		}
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
			return Requirement{}, fmt.Errorf("selector term %q: values must be in parentheses, e.g. %s in (a,b)", term, key)
		}
		var vals []string
		for _, v := range strings.Split(rest[1:len(rest)-1], ",") {
			v = strings.TrimSpace(v)
			if !events.ValidLabelValue(v) || v == "" {
				return Requirement{}, fmt.Errorf("selector term %q: %q is not a label value", term, v)
			}
			vals = append(vals, v)
		}
		return Requirement{Key: key, Op: op, Values: vals}, nil
	}
	if err := checkKey(term, term); err != nil {
		return Requirement{}, err
	}
	return Requirement{Key: term, Op: OpExists}, nil
}

func binaryReq(term, key, value string, op SelectorOp) (Requirement, error) {
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	if err := checkKey(term, key); err != nil {
		return Requirement{}, err
	}
	if !events.ValidLabelValue(value) {
		return Requirement{}, fmt.Errorf("selector term %q: %q is not a label value", term, value)
	}
	return Requirement{Key: key, Op: op, Values: []string{value}}, nil
}

func checkKey(term, key string) error {
	if !events.ValidLabelKey(key) {
		return fmt.Errorf("selector term %q: %q is not a label key", term, key)
	}
	return nil
}
