package projections

import (
	"slices"
	"strconv"

	"github.com/corralhq/corral/events"
)

// MatchesConstraint reports whether a machine's attributes satisfy c.
// "<" and ">" compare as numbers when both sides parse as numbers, else as
// strings; "!=" holds on machines without the attribute.
func MatchesConstraint(attrs map[string]string, c *events.Constraint) bool {
	val, ok := attrs[c.GetAttribute()]
	one := ""
	if len(c.GetValues()) > 0 {
		one = c.Values[0]
	}
	switch c.GetOp() {
	case "exists":
		return ok
	case "=":
		return ok && val == one
	case "!=":
		return !ok || val != one
	case "in":
		return ok && slices.Contains(c.Values, val)
	case "<", ">":
		if !ok {
			return false
		}
		cmp := compareValues(val, one)
		if c.GetOp() == "<" {
			return cmp < 0
		}
		return cmp > 0
	}
	return false
}

func compareValues(a, b string) int {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	if err1 == nil && err2 == nil {
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// MeetsHardConstraints reports whether attrs satisfy every hard constraint,
// and names the first that fails.
func MeetsHardConstraints(attrs map[string]string, cs []*events.Constraint) (*events.Constraint, bool) {
	for _, c := range cs {
		if !c.GetSoft() && !MatchesConstraint(attrs, c) {
			return c, false
		}
	}
	return nil, true
}
