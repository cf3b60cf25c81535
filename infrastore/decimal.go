package infrastore

import (
	"encoding/json"
	"fmt"
	"math/big"
	"math/bits"
	"strings"
)

// Decimal is an exact decimal number, Unscaled × 10^-Scale. Bills use it so
// that sums are exact and a closed period prints the same digits every time.
type Decimal struct {
	Unscaled *big.Int // nil reads as zero
	Scale    int32
}

// QuantityScale is the number of decimals of every bill quantity (core-hours,
// GiB-hours) and of task_usage's hour columns: 1e-9 core-hours is 3.6 µs of a
// core, far below what an agent measures.
const QuantityScale = 9

// ChargeScale is the number of decimals of a charge (a millionth of the
// currency unit).
const ChargeScale = 6

func newDecimal(unscaled int64, scale int32) Decimal {
	return Decimal{Unscaled: big.NewInt(unscaled), Scale: scale}
}

func (d Decimal) unscaled() *big.Int {
	if d.Unscaled == nil {
		return new(big.Int)
	}
	return d.Unscaled
}

// String prints every decimal of the scale, e.g. "12.500000000", so that
// columns of a bill line up and a closed period prints identically.
func (d Decimal) String() string {
	u := d.unscaled()
	neg := u.Sign() < 0
	digits := new(big.Int).Abs(u).String()
	if d.Scale <= 0 {
		s := digits + strings.Repeat("0", int(-d.Scale))
		if neg && digits != "0" {
			s = "-" + s
		}
		return s
	}
	if len(digits) <= int(d.Scale) {
		digits = strings.Repeat("0", int(d.Scale)-len(digits)+1) + digits
	}
	cut := len(digits) - int(d.Scale)
	s := digits[:cut] + "." + digits[cut:]
	if neg {
		s = "-" + s
	}
	return s
}

// MarshalJSON writes the decimal as a JSON number with every decimal of its
// scale, never through a float.
func (d Decimal) MarshalJSON() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalJSON reads a JSON number or string with at most QuantityScale
// decimals.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if len(s) >= 2 && s[0] == '"' {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		s = str
	}
	v, err := ParseDecimal(s, QuantityScale)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Float64 returns the nearest float, for display only.
func (d Decimal) Float64() float64 {
	f, _ := new(big.Rat).SetFrac(d.unscaled(), pow10(d.Scale)).Float64()
	return f
}

// Cmp compares two decimals by value.
func (d Decimal) Cmp(o Decimal) int {
	s := max(d.Scale, o.Scale)
	return d.rescale(s).Cmp(o.rescale(s))
}

// Add returns d+o at the larger of the two scales.
func (d Decimal) Add(o Decimal) Decimal {
	s := max(d.Scale, o.Scale)
	return Decimal{Unscaled: new(big.Int).Add(d.rescale(s), o.rescale(s)), Scale: s}
}

// Mul returns the exact product d×o (the scales add up).
func (d Decimal) Mul(o Decimal) Decimal {
	return Decimal{Unscaled: new(big.Int).Mul(d.unscaled(), o.unscaled()), Scale: d.Scale + o.Scale}
}

// Round returns d rounded half away from zero to scale decimals.
func (d Decimal) Round(scale int32) Decimal {
	if scale >= d.Scale {
		return Decimal{Unscaled: d.rescale(scale), Scale: scale}
	}
	div := pow10(d.Scale - scale)
	u := d.unscaled()
	q, r := new(big.Int).QuoRem(u, div, new(big.Int))
	// |r| * 2 >= div rounds away from zero.
	if new(big.Int).Mul(new(big.Int).Abs(r), big.NewInt(2)).Cmp(div) >= 0 {
		if u.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return Decimal{Unscaled: q, Scale: scale}
}

// IsZero reports whether d is zero.
func (d Decimal) IsZero() bool { return d.unscaled().Sign() == 0 }

// rescale returns the unscaled value at a scale >= d.Scale.
func (d Decimal) rescale(s int32) *big.Int {
	u := d.unscaled()
	if s == d.Scale {
		return new(big.Int).Set(u)
	}
	return new(big.Int).Mul(u, pow10(s-d.Scale))
}

func pow10(n int32) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// ParseDecimal reads a plain decimal ("12", "0.05", "-1.5") with at most
// scale decimals; the result has exactly that scale.
func ParseDecimal(s string, scale int32) (Decimal, error) {
	str := strings.TrimSpace(s)
	if str == "" {
		return Decimal{}, fmt.Errorf("%q is not a decimal number", s)
	}
	neg := false
	switch str[0] {
	case '-':
		neg, str = true, str[1:]
	case '+':
		str = str[1:]
	}
	intPart, frac, _ := strings.Cut(str, ".")
	if intPart == "" && frac == "" {
		return Decimal{}, fmt.Errorf("%q is not a decimal number", s)
	}
	for _, r := range intPart + frac {
		if r < '0' || r > '9' {
			return Decimal{}, fmt.Errorf("%q is not a plain decimal number (digits and one point only)", s)
		}
	}
	if len(frac) > int(scale) {
		return Decimal{}, fmt.Errorf("%q has more than %d decimals", s, scale)
	}
	frac += strings.Repeat("0", int(scale)-len(frac))
	u, ok := new(big.Int).SetString(intPart+frac, 10)
	if !ok {
		return Decimal{}, fmt.Errorf("%q is not a decimal number", s)
	}
	if neg {
		u.Neg(u)
	}
	return Decimal{Unscaled: u, Scale: scale}, nil
}

// maxDecimal18 is the largest unscaled value of a DECIMAL(18, s) column.
const maxDecimal18 = 999_999_999_999_999_999

// scaledRatio returns round(a × b × 10^9 / d), rounded half up, for a, b >= 0
// (negatives count as 0) and d > 0, clamped to what a DECIMAL(18,9) holds. It
// works in 128 bits so that a TiB held for a month does not overflow.
// The hours of task_usage are computed with it.
func scaledRatio(a, b int64, d uint64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	h1, l1 := bits.Mul64(lo, 1e9)
	h2, l2 := bits.Mul64(hi, 1e9)
	if h2 != 0 {
		return maxDecimal18
	}
	h, c := bits.Add64(h1, l2, 0)
	if c != 0 {
		return maxDecimal18
	}
	l, c := bits.Add64(l1, d/2, 0)
	h, c2 := bits.Add64(h, 0, c)
	if c2 != 0 || h >= d {
		return maxDecimal18
	}
	q, _ := bits.Div64(h, l, d)
	if q > maxDecimal18 {
		return maxDecimal18
	}
	return int64(q)
}
