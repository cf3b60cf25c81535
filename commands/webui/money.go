package webui

import (
	"math/big"
	"strings"
)

// Money on the costs page is shown at one precision for a total and its
// parts, so that what the page shows adds up: a total of 10.004 next to a
// usage of 10.000 and idle capacity of 0.004 reads 10.004 = 10.000 +
// 0.004, not 10.00 next to 10.00 and 0.004000. Amounts arrive as decimal
// strings (bills are exact to 1e-9 of a unit) and are added as such.

// moneyMaxDecimals is the finest precision shown: the bill's own.
const moneyMaxDecimals = 9

// parseMoneyRat reads an amount; "" or a malformed one is zero.
func parseMoneyRat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok {
		return new(big.Rat)
	}
	return r
}

// moneyPrecision is the fewest decimals, from 2 to moneyMaxDecimals, at
// which the parts as shown add up to the total as shown, the total shows
// two significant digits, and every amount (parts and others) that is not
// zero reads as not zero.
func moneyPrecision(total *big.Rat, parts []*big.Rat, others ...*big.Rat) int {
	for p := 2; p < moneyMaxDecimals; p++ {
		sum := new(big.Int)
		ok := true
		for _, v := range parts {
			r := roundAt(v, p)
			ok = ok && (v.Sign() == 0 || r.Sign() != 0)
			sum.Add(sum, r)
		}
		for _, v := range others {
			ok = ok && (v.Sign() == 0 || roundAt(v, p).Sign() != 0)
		}
		// The total reads to two significant digits at least: a young
		// cell's 0.000017 is not 0.00002.
		shownTotal := roundAt(total, p)
		if ok && sum.Cmp(shownTotal) == 0 && (total.Sign() == 0 || new(big.Int).Abs(shownTotal).Cmp(big.NewInt(10)) >= 0) {
			return p
		}
	}
	return moneyMaxDecimals
}

// roundAt is v in units of 10^-p, rounded half away from zero.
func roundAt(v *big.Rat, p int) *big.Int {
	scaled := new(big.Rat).Mul(v, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil)))
	num, den := new(big.Int).Abs(scaled.Num()), scaled.Denom()
	q, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	if rem.Mul(rem, big.NewInt(2)).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if scaled.Sign() < 0 {
		q.Neg(q)
	}
	return q
}

// formatMoneyAt prints v to p decimals with its currency ("12.50 USD").
func formatMoneyAt(v *big.Rat, p int, currency string) string {
	r := new(big.Rat).SetFrac(roundAt(v, p), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil))
	return r.FloatString(p) + " " + currency
}
