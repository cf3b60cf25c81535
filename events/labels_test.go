package events

import (
	"strings"
	"testing"
)

func TestLabelSyntax(t *testing.T) {
	for _, tc := range []struct {
		s          string
		key, value bool
	}{
		{"", false, true},
		{"rack", true, true},
		{"corral.dev/zone-1_a", true, true},
		{"-rack", false, false},
		{"rack.", false, false},
		{"a b", false, false},
		{strings.Repeat("x", 63), true, true},
		{strings.Repeat("x", 64), false, false},
	} {
		t.Run(tc.s, func(t *testing.T) {
			if got := ValidLabelKey(tc.s); got != tc.key {
				t.Errorf("ValidLabelKey(%q) = %v, want %v", tc.s, got, tc.key)
			}
			if got := ValidLabelValue(tc.s); got != tc.value {
				t.Errorf("ValidLabelValue(%q) = %v, want %v", tc.s, got, tc.value)
			}
		})
	}
}
