package commands

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"time"
)

var decimalRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// ParseMilli reads a CPU or GPU quantity in thousandths: "500m" is 500,
// "0.5" and "1.5" are cores (500, 1500). Finer than a thousandth is an error.
func ParseMilli(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if err := notNegative(s); err != nil {
		return 0, err
	}
	if num, ok := strings.CutSuffix(s, "m"); ok {
		return scaled(num, 1, "millicores like 500m or cores like 0.5")
	}
	return scaled(s, 1000, "millicores like 500m or cores like 0.5")
}

// byteUnits are the suffixes ParseBytes accepts, lowercased; the binary ones
// (Ki, KiB) are powers of 1024, the others powers of 1000.
var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12, "p": 1e15, "pb": 1e15,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30,
	"ti": 1 << 40, "tib": 1 << 40, "pi": 1 << 50, "pib": 1 << 50,
}

// ParseBytes reads a memory or disk quantity: "2GiB", "512Mi", "1.5G",
// "1000000". A lone lowercase "m" is refused: in Kubernetes it means milli.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if err := notNegative(s); err != nil {
		return 0, err
	}
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = strings.TrimSpace(s[:i]), strings.TrimSpace(s[i:])
	}
	if unit == "m" {
		return 0, fmt.Errorf("%q: unit m means milli; write Mi (MiB) or M (MB)", s)
	}
	mult, ok := byteUnits[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q; use B, KiB, MiB, GiB, TiB or KB, MB, GB, TB", s, unit)
	}
	return scaled(num, mult, "bytes or a quantity like 2GiB")
}

// notNegative refuses a quantity with a minus sign, saying so rather than
// taking the sign for an unknown unit.
func notNegative(s string) error {
	if strings.HasPrefix(s, "-") {
		return fmt.Errorf("%q is negative: a quantity must be positive", s)
	}
	return nil
}

// scaled returns num * mult when num is a plain decimal and the product is
// a whole number that fits in an int64.
func scaled(num string, mult int64, want string) (int64, error) {
	if !decimalRE.MatchString(num) {
		return 0, fmt.Errorf("%q is not a quantity: want %s", num, want)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%q is not a quantity: want %s", num, want)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("%q is finer than the unit allows", num)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("%q is too large", num)
	}
	return r.Num().Int64(), nil
}

// ParseDurationMS reads "10s", "1m30s" or a whole number of milliseconds.
func ParseDurationMS(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if err := notNegative(s); err != nil {
		return 0, err
	}
	if decimalRE.MatchString(s) && !strings.Contains(s, ".") {
		return scaled(s, 1, "a duration like 10s")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration like 10s or 1m30s", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("%q is finer than a millisecond", s)
	}
	return int64(d / time.Millisecond), nil
}

// FormatMilli prints thousandths the way ParseMilli reads them back.
func FormatMilli(v int64) string { return fmt.Sprintf("%dm", v) }
