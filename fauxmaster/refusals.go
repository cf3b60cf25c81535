package fauxmaster

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// refusalsPerCommand is how many kinds of refusal a report keeps for each
// command: the most frequent, so a long replay's report stays short.
const refusalsPerCommand = 4

// refusal is a kind of refusal: a command, and the field its error names
// (the word before the first ": ", as most commands' errors start), so
// that "name: job u0/j3 exists" and "name: job u1/j0 exists" are one kind
// and a quota refusal is another; an error naming no field is a kind of
// its own.
type refusal struct{ command, field string }

// refusalCount is how often a kind of refusal happened, with one of its
// messages: the least in sort order, so a report is the same every run.
type refusalCount struct {
	n       int
	example string
}

func countRefusal(m map[refusal]*refusalCount, command, reason string) {
	field, _, ok := strings.Cut(reason, ": ")
	if !ok || strings.Contains(field, " ") {
		field = reason
	}
	k := refusal{command, field}
	c := m[k]
	if c == nil {
		c = &refusalCount{example: reason}
		m[k] = c
	}
	c.n++
	c.example = min(c.example, reason)
}

// Refusal is why the simulated cell refused requests of one command: the
// command's own error, as the real cell would have answered it, for Count
// refusals of that kind.
type Refusal struct {
	Command string `json:"command"`
	Reason  string `json:"reason"` // one of the kind's messages
	Count   int    `json:"count"`
	// Others counts the command's refusals of kinds not listed, on its
	// last Refusal.
	Others int `json:"others,omitempty"`
}

func (r Refusal) String() string {
	s := fmt.Sprintf("%s %d: %s", r.Command, r.Count, r.Reason)
	if r.Count > 1 {
		s = fmt.Sprintf("%s %d, such as: %s", r.Command, r.Count, r.Reason)
	}
	if r.Others > 0 {
		s += fmt.Sprintf(" (and %d for other reasons)", r.Others)
	}
	return s
}

// refusals orders the refusals by command, then most frequent kind first,
// keeping refusalsPerCommand kinds of each.
func refusals(m map[refusal]*refusalCount) []Refusal {
	all := make([]Refusal, 0, len(m))
	for k, c := range m {
		all = append(all, Refusal{Command: k.command, Reason: c.example, Count: c.n})
	}
	slices.SortFunc(all, func(a, b Refusal) int {
		return cmp.Or(cmp.Compare(a.Command, b.Command), cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason))
	})
	var out []Refusal
	kept := 0
	for i, r := range all {
		if i > 0 && all[i-1].Command != r.Command {
			kept = 0
		}
		if kept < refusalsPerCommand {
			out = append(out, r)
			kept++
			continue
		}
		out[len(out)-1].Others += r.Count
	}
	return out
}
