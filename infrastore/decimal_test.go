package infrastore

import (
	"context"
	"fmt"
	"testing"
)

func TestDecimal(t *testing.T) {
	for _, c := range []struct {
		in    string
		scale int32
		want  string
	}{
		{"12", 9, "12.000000000"}, {"0.05", 9, "0.050000000"}, {"-1.5", 2, "-1.50"}, {".5", 1, "0.5"}, {"+7.25", 3, "7.250"},
	} {
		t.Run(c.in, func(t *testing.T) {
			d, err := ParseDecimal(c.in, c.scale)
			if err != nil || d.String() != c.want {
				t.Errorf("ParseDecimal(%q, %d) = %s, %v; want %s", c.in, c.scale, d, err, c.want)
			}
		})
	}
	for _, bad := range []string{"", "1.2.3", "1e5", "0x10", "1.0000000001", "-", "."} {
		t.Run(bad, func(t *testing.T) {
			if _, err := ParseDecimal(bad, 9); err == nil {
				t.Errorf("ParseDecimal(%q) accepted", bad)
			}
		})
	}
	for _, c := range []struct {
		in   string
		to   int32
		want string
	}{
		{"0.0000005", 6, "0.000001"}, {"0.0000004999", 6, "0.000000"}, {"-0.0000005", 6, "-0.000001"}, {"2.5", 0, "3"},
	} {
		t.Run(c.in, func(t *testing.T) {
			d, _ := ParseDecimal(c.in, 10)
			if got := d.Round(c.to).String(); got != c.want {
				t.Errorf("Round(%s, %d) = %s, want %s", c.in, c.to, got, c.want)
			}
		})
	}
	a, _ := ParseDecimal("1.25", 2)
	b, _ := ParseDecimal("0.048", 3)
	if got := a.Mul(b).String(); got != "0.06000" {
		t.Errorf("1.25 × 0.048 = %s", got)
	}
	if got := a.Add(b).String(); got != "1.298" {
		t.Errorf("1.25 + 0.048 = %s", got)
	}
}

// TestBandSQLMatchesGo holds the band task_usage derives in SQL equal to
// bandOf.
func TestBandSQLMatchesGo(t *testing.T) {
	s := openStore(t, Options{})
	for p := int32(-1); p <= 12; p++ {
		var got string
		if err := s.db.QueryRowContext(context.Background(), `SELECT `+bandSQL(fmt.Sprintf("(%d)", p))).Scan(&got); err != nil || got != bandOf(p) {
			t.Errorf("band of %d: SQL %q (%v), Go %q", p, got, err, bandOf(p))
		}
	}
}

func TestScaledRatio(t *testing.T) {
	for i, c := range []struct {
		a, b int64
		d    uint64
		want int64
	}{
		{1000, 3_600_000_000, milliCoreMicrosPerCoreHour, 1_000_000_000},              // a core for an hour
		{1 << 30, 1_800_000_000, byteMicrosPerGiBHour, 500_000_000},                   // a GiB for half an hour
		{1, 1, milliCoreMicrosPerCoreHour, 0},                                         // rounds down
		{1800, 1, milliCoreMicrosPerCoreHour, 1},                                      // 0.5 rounds up
		{-5, 10, milliCoreMicrosPerCoreHour, 0},                                       // negatives count as 0
		{1 << 50, 1 << 50, byteMicrosPerGiBHour, maxDecimal18},                        // clamps
		{1 << 40, 31 * 24 * 3_600_000_000, byteMicrosPerGiBHour, 761_856_000_000_000}, // a TiB for a month
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := scaledRatio(c.a, c.b, c.d); got != c.want {
				t.Errorf("scaledRatio(%d, %d, %d) = %d, want %d", c.a, c.b, c.d, got, c.want)
			}
		})
	}
}
