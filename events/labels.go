package events

// Label keys and values: the syntax of job labels, machine attributes and
// the keys constraints and selectors name. Vocabulary of the log, like the
// bands: commands validate with it, the projections' selectors parse with
// it, and the Infrastore checks the label a cost report groups by with it.

// ValidLabelKey reports whether k is a label key: 1-63 characters of [A-Za-z0-9._/-], starting and ending
// with a letter or digit.
func ValidLabelKey(k string) bool {
	return k != "" && validLabelText(k)
}

// ValidLabelValue reports whether v is a label value: empty, or like a
// key.
func ValidLabelValue(v string) bool {
	return v == "" || validLabelText(v)
}

func validLabelText(s string) bool {
	if len(s) > 63 || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !alnum(c) && c != '-' && c != '_' && c != '.' && c != '/' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
