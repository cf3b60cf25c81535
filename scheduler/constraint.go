package scheduler

import "strconv"

// compiledConstraint is a Constraint with its numeric operand parsed once per
// class rather than once per machine.
type compiledConstraint struct {
	Constraint
	num    float64
	numOK  bool
	values map[string]struct{} // for "in" with many values
}

func compileConstraint(c Constraint) compiledConstraint {
	cc := compiledConstraint{Constraint: c}
	if (c.Op == OpLt || c.Op == OpGt) && len(c.Values) == 1 {
		cc.num, cc.numOK = parseNum(c.Values[0])
	}
	if c.Op == OpIn && len(c.Values) > 4 {
		cc.values = make(map[string]struct{}, len(c.Values))
		for _, v := range c.Values {
			cc.values[v] = struct{}{}
		}
	}
	return cc
}

func parseNum(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// Matches reports whether a machine's attributes satisfy c: the one
// constraint matcher of the pass (which compiles c once per class) and of
// PlaceTasks. "<" and ">" compare as numbers when both sides parse as
// numbers, else as strings; a missing attribute satisfies only "!=".
func (c Constraint) Matches(attrs map[string]string) bool {
	cc := compileConstraint(c)
	return cc.matches(attrs)
}

// FirstUnmet returns the first hard constraint of cs that attrs do not
// satisfy, and false; or true when they satisfy every hard one.
func FirstUnmet(attrs map[string]string, cs []Constraint) (Constraint, bool) {
	for _, c := range cs {
		if !c.Soft && !c.Matches(attrs) {
			return c, false
		}
	}
	return Constraint{}, true
}

// matches reports whether the machine's attributes satisfy the constraint.
// A missing attribute satisfies only "!=".
func (c *compiledConstraint) matches(attrs map[string]string) bool {
	v, ok := attrs[c.Attribute]
	one := "" // validation makes it present; a bad constraint matches nothing rather than crash
	if len(c.Values) > 0 {
		one = c.Values[0]
	}
	switch c.Op {
	case OpExists:
		return ok
	case OpNe:
		return !ok || v != one
	}
	if !ok {
		return false
	}
	switch c.Op {
	case OpEq:
		return v == one
	case OpIn:
		if c.values != nil {
			_, in := c.values[v]
			return in
		}
		for _, w := range c.Values {
			if v == w {
				return true
			}
		}
		return false
	case OpLt, OpGt:
		if c.numOK {
			if f, fok := parseNum(v); fok {
				if c.Op == OpLt {
					return f < c.num
				}
				return f > c.num
			}
		}
		if c.Op == OpLt {
			return v < one
		}
		return v > one
	}
	return false
}
