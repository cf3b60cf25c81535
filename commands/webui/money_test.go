package webui

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// shown reads back an amount as formatMoneyAt printed it.
func shown(t *testing.T, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(strings.Fields(s)[0])
	if !ok {
		t.Fatalf("%q is no amount", s)
	}
	return r
}

// For a family of totals made of usage, idle capacity and corrections, at
// every scale from a young cell's fractions of a cent to a big cell's
// thousands: the parts as shown add up to the total as shown, no amount
// that is not zero reads as zero, and no fewer decimals would do.
func TestMoneyFiguresAddUp(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	amount := func() *big.Rat {
		if r.IntN(5) == 0 {
			return new(big.Rat)
		}
		// Up to 9 decimals, as bills are, at a random scale.
		units := r.Int64N(1_000_000_000_000)
		return new(big.Rat).SetFrac64(units, []int64{1e9, 1e11, 1e13, 1e15}[r.IntN(4)]/1e6)
	}
	for i := range 5000 {
		usage, idle, corr := amount(), amount(), amount()
		if r.IntN(4) == 0 {
			idle = new(big.Rat).SetFrac64(4, 1000) // the page a newcomer saw: 10.004 = 10.000 + 0.004
			usage = new(big.Rat).SetInt64(10)
		}
		total := new(big.Rat).Add(usage, idle)
		total.Add(total, corr)
		p := moneyPrecision(total, []*big.Rat{usage, idle, corr})
		sum := new(big.Rat)
		for _, v := range []*big.Rat{usage, idle, corr} {
			s := shown(t, formatMoneyAt(v, p, "USD"))
			if v.Sign() != 0 && s.Sign() == 0 {
				t.Fatalf("case %d: %s reads as zero at %d decimals", i, v.FloatString(9), p)
			}
			sum.Add(sum, s)
		}
		if p < moneyMaxDecimals && sum.Cmp(shown(t, formatMoneyAt(total, p, "USD"))) != 0 {
			t.Fatalf("case %d: at %d decimals %s + %s + %s shows as %s, the total as %s", i, p,
				usage.FloatString(9), idle.FloatString(9), corr.FloatString(9), sum.FloatString(p), formatMoneyAt(total, p, "USD"))
		}
		if tot := shown(t, formatMoneyAt(total, p, "USD")); total.Sign() != 0 && p < moneyMaxDecimals && new(big.Rat).Abs(tot).Cmp(new(big.Rat).SetFrac64(10, pow10(p))) < 0 {
			t.Fatalf("case %d: the total %s shows as %s, under two significant digits", i, total.FloatString(9), tot.FloatString(p))
		}
		if p == moneyMaxDecimals && sum.Cmp(total) != 0 {
			t.Fatalf("case %d: at the bill's own precision the parts do not add up", i)
		}
		if p > 2 && readsTrue(total, []*big.Rat{usage, idle, corr}, p-1) {
			t.Fatalf("case %d: %d decimals where %d would do", i, p, p-1)
		}
	}
	for i, c := range []struct {
		total, usage, idle string
		want               [3]string
	}{
		{"10.004", "10", "0.004", [3]string{"10.004 USD", "10.000 USD", "0.004 USD"}},
		{"300.5", "90.5", "210", [3]string{"300.50 USD", "90.50 USD", "210.00 USD"}},
		{"0.000017", "0.000017", "0", [3]string{"0.000017 USD", "0.000017 USD", "0.000000 USD"}},
		{"0.02", "0.005", "0.015", [3]string{"0.020 USD", "0.005 USD", "0.015 USD"}},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			tot, use, idle := parseMoneyRat(c.total), parseMoneyRat(c.usage), parseMoneyRat(c.idle)
			p := moneyPrecision(tot, []*big.Rat{use, idle})
			got := [3]string{formatMoneyAt(tot, p, "USD"), formatMoneyAt(use, p, "USD"), formatMoneyAt(idle, p, "USD")}
			if got != c.want {
				t.Errorf("%s = %s + %s shows as %v, want %v", c.total, c.usage, c.idle, got, c.want)
			}
		})
	}
	if s := fmt.Sprint(formatMoneyAt(parseMoneyRat("-0.005"), 2, "EUR")); s != "-0.01 EUR" {
		t.Errorf("-0.005 at 2 decimals: %s", s)
	}
}

func pow10(p int) int64 {
	n := int64(1)
	for range p {
		n *= 10
	}
	return n
}

// readsTrue says whether, at p decimals, the parts shown add up to the
// total shown, none that is not zero reads zero and the total shows two
// significant digits: what a person checks on the page.
func readsTrue(total *big.Rat, parts []*big.Rat, p int) bool {
	sum := new(big.Rat)
	for _, v := range parts {
		var s big.Rat
		s.SetString(strings.Fields(formatMoneyAt(v, p, "X"))[0])
		if v.Sign() != 0 && s.Sign() == 0 {
			return false
		}
		sum.Add(sum, &s)
	}
	var tot big.Rat
	tot.SetString(strings.Fields(formatMoneyAt(total, p, "X"))[0])
	return sum.Cmp(&tot) == 0 && (total.Sign() == 0 || new(big.Rat).Abs(&tot).Cmp(new(big.Rat).SetFrac64(10, pow10(p))) >= 0)
}
