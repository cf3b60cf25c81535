package projections

import (
	"strings"
	"testing"
)

func TestSelectors(t *testing.T) {
	labels := map[string]string{"team": "web", "tier": "prod", "gpu": ""}
	for _, tc := range []struct {
		sel   string
		match bool
		text  string
	}{
		{"", true, ""},
		{"team=web", true, "team=web"},
		{"team==web", true, "team=web"},
		{"team=web,tier!=canary", true, "team=web,tier!=canary"},
		{" team = web , tier != prod ", false, "team=web,tier!=prod"},
		{"tier in (prod, staging)", true, "tier in (prod,staging)"},
		{"tier notin (prod)", false, "tier notin (prod)"},
		{"zone notin (a,b)", true, "zone notin (a,b)"},
		{"zone!=a", true, "zone!=a"},
		{"gpu", true, "gpu"},
		{"!gpu", false, "!gpu"},
		{"!zone,team", true, "!zone,team"},
		{"zone in (a)", false, "zone in (a)"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			s, err := ParseSelector(tc.sel)
			if err != nil {
				t.Fatalf("%q: %v", tc.sel, err)
			}
			if s.Matches(labels) != tc.match || s.String() != tc.text {
				t.Errorf("%q: matches %v (want %v), prints %q (want %q)", tc.sel, s.Matches(labels), tc.match, s.String(), tc.text)
			}
		})
	}
	for _, tc := range []struct{ sel, err string }{
		{"team=web,,tier=prod", "empty term"},
		{"tier in prod", "values must be in parentheses"},
		{"tier in (a", "'(' without ')'"},
		{"tier in (a))", "')' without '('"},
		{"-team=web", `"-team" is not a label key`},
		{"team=w eb", `"w eb" is not a label value`},
		{"tier like (a)", "expected =, !=, in or notin"},
		{"tier in (a,,b)", `"" is not a label value`},
	} {
		t.Run(tc.sel, func(t *testing.T) {
			if _, err := ParseSelector(tc.sel); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.sel, err, tc.err)
			}
		})
	}
}
