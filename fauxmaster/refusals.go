package fauxmaster

import (
	"cmp"
	"fmt"
	"slices"
)

// refusalsPerCommand is how many distinct reasons a report keeps for each
// command: the most frequent, so a long replay's report stays short.
const refusalsPerCommand = 3

// refusal is a command refused, for one reason.
type refusal struct{ command, reason string }

// Refusal is why the simulated cell refused requests of one command: the
// command's own error, as the real cell would have answered it.
type Refusal struct {
	Command string `json:"command"`
	Reason  string `json:"reason"`
	Count   int    `json:"count"`
	// Others counts the command's refusals for reasons not listed, on its
	// last Refusal.
	Others int `json:"others,omitempty"`
}

func (r Refusal) String() string {
	s := fmt.Sprintf("%s %d: %s", r.Command, r.Count, r.Reason)
	if r.Others > 0 {
		s += fmt.Sprintf(" (and %d for other reasons)", r.Others)
	}
	return s
}

// refusals orders the refusals by command, then most frequent first,
// keeping refusalsPerCommand reasons of each.
func refusals(m map[refusal]int) []Refusal {
	all := make([]Refusal, 0, len(m))
	for k, n := range m {
		all = append(all, Refusal{Command: k.command, Reason: k.reason, Count: n})
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
