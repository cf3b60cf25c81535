package infrastore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/corralhq/corral/events"
)

// sumUsage sums a task_usage column over [from, to) straight from the table.
func sumUsage(t *testing.T, s *Infrastore, col string, from, to time.Time) Decimal {
	t.Helper()
	var v any
	err := s.db.QueryRow(`SELECT coalesce(sum(`+col+`), 0)::DECIMAL(38,9) FROM task_usage WHERE source = 'log' AND start_time >= ? AND start_time < ?`,
		from.UnixMicro(), to.UnixMicro()).Scan(&v)
	if err != nil {
		t.Fatal(err)
	}
	return quantity(v)
}

func TestBillReconcilesWithTaskUsage(t *testing.T) {
	ctx := context.Background()
	evs := cellHistory(8, 3200)
	store := newSQLiteLog(t, evs)
	s := openStore(t, Options{})
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	from, to := h0, h0.Add(24*time.Hour)
	cols := []string{"cpu_limit_core_hours", "cpu_reservation_core_hours", "cpu_usage_core_hours",
		"memory_limit_gib_hours", "memory_reservation_gib_hours", "memory_usage_gib_hours", "disk_usage_gib_hours"}

	// Usage core-hours per user, straight from the events.
	wantCPU := map[string]int64{}
	for _, e := range evs {
		if u, ok := e.Data.(*events.UsageReported); ok && !time.UnixMicro(u.WindowStartUs).Before(from) && time.UnixMicro(u.WindowStartUs).Before(to) {
			for _, tu := range u.Tasks {
				wantCPU[tu.User] += int64(tu.CpuCoreSeconds*1e9/3600 + 0.5)
			}
		}
	}

	for _, groupBy := range []string{"user", "job", "label:team", "label:nope"} {
		t.Run(groupBy, func(t *testing.T) {
			b, err := s.Bill(ctx, BillRequest{From: from, To: to, GroupBy: groupBy, Rates: DefaultRates()})
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Lines) == 0 {
				t.Fatalf("%s: empty bill", groupBy)
			}
			checkBillSums(t, s, b, groupBy, cols, from, to, wantCPU)
		})
	}

	// Consecutive periods add up to the whole: no window twice, none missed.
	mid := h0.Add(5*time.Hour + 17*time.Minute)
	whole, _ := s.Bill(ctx, BillRequest{From: from, To: to})
	a, _ := s.Bill(ctx, BillRequest{From: from, To: mid})
	c, _ := s.Bill(ctx, BillRequest{From: mid, To: to})
	for i := range cols {
		if got := a.Total.quantities()[i].Add(c.Total.quantities()[i]); got.Cmp(whole.Total.quantities()[i]) != 0 {
			t.Errorf("%s: halves sum to %s, whole period %s", cols[i], got, whole.Total.quantities()[i])
		}
	}
}

// checkBillSums checks that b's lines, grouped by groupBy, add up to its
// total and to task_usage's columns cols over [from, to), each charged
// by the rates, and, by user, to the CPU usage the events hold (wantCPU).
func checkBillSums(t *testing.T, s *Infrastore, b *Bill, groupBy string, cols []string, from, to time.Time, wantCPU map[string]int64) {
	sums := make([]Decimal, len(cols))
	for i := range sums {
		sums[i] = newDecimal(0, QuantityScale)
	}
	charge := newDecimal(0, ChargeScale)
	byUser := map[string]*big.Int{}
	var windows int64
	for _, l := range b.Lines {
		for i, q := range l.quantities() {
			sums[i] = sums[i].Add(q)
		}
		charge = charge.Add(l.Charge)
		windows += l.Windows
		if groupBy == "user" {
			byUser[l.Group] = new(big.Int).Add(orZero(byUser[l.Group]), l.CPUCoreHoursUsage.Unscaled)
		}
		checkLineCharge(t, b.Rates, l)
	}
	for i, col := range cols {
		want := sumUsage(t, s, col, from, to)
		if sums[i].Cmp(want) != 0 || b.Total.quantities()[i].Cmp(want) != 0 {
			t.Errorf("%s: %s: lines sum to %s, total %s, task_usage sums to %s", groupBy, col, sums[i], b.Total.quantities()[i], want)
		}
	}
	if charge.Cmp(b.Total.Charge) != 0 || charge.IsZero() {
		t.Errorf("%s: lines charge %s, total %s", groupBy, charge, b.Total.Charge)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM task_usage WHERE start_time >= ? AND start_time < ?`, from.UnixMicro(), to.UnixMicro()); windows != n || b.Total.Windows != n {
		t.Errorf("%s: %d windows in the lines, %d in the total, %d rows in task_usage", groupBy, windows, b.Total.Windows, n)
	}
	for u, want := range wantCPU {
		if got := byUser[u]; groupBy == "user" && (got == nil || got.Int64() != want) {
			t.Errorf("user %s: %v nano-core-hours of usage billed, the events hold %d", u, got, want)
		}
	}
}

// checkLineCharge recomputes a line's charge from the rates by hand.
func checkLineCharge(t *testing.T, rates *Rates, l BillLine) {
	br := rates.Bands[l.Band]
	q := map[string][2]Decimal{
		BasisLimit:       {l.CPUCoreHoursLimit, l.MemoryGiBHoursLimit},
		BasisReservation: {l.CPUCoreHoursReservation, l.MemoryGiBHoursReservation},
		BasisUsage:       {l.CPUCoreHoursUsage, l.MemoryGiBHoursUsage},
	}[br.Basis]
	exact := new(big.Rat).Add(new(big.Rat).Add(ratOf(q[0], br.CPUCoreHour), ratOf(q[1], br.MemoryGiBHour)), ratOf(l.DiskGiBHours, br.DiskGiBHour))
	if got := new(big.Rat).SetFrac(l.Charge.Unscaled, pow10(ChargeScale)); new(big.Rat).Abs(new(big.Rat).Sub(got, exact)).Cmp(big.NewRat(1, 2_000_000)) > 0 {
		t.Errorf("%s %s: charge %s, the rates give %s", l.Group, l.Band, l.Charge, exact.FloatString(9))
	}
}

func orZero(x *big.Int) *big.Int {
	if x == nil {
		return new(big.Int)
	}
	return x
}

func ratOf(q, rate Decimal) *big.Rat {
	p := q.Mul(rate)
	return new(big.Rat).SetFrac(p.Unscaled, pow10(p.Scale))
}

func TestBillScenario(t *testing.T) {
	s := ingestScenario(t)
	b, err := s.Bill(context.Background(), BillRequest{From: t0, To: t0.Add(24 * time.Hour), GroupBy: "label:team", Rates: DefaultRates()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range append(b.Lines, b.Total) {
		got = append(got, fmt.Sprintf("%s %s %s tasks=%d windows=%d cpu=%s/%s/%s mem=%s/%s/%s disk=%s charge=%s", l.Group, l.Band, l.Basis, l.Tasks, l.Windows,
			l.CPUCoreHoursLimit, l.CPUCoreHoursReservation, l.CPUCoreHoursUsage,
			l.MemoryGiBHoursLimit, l.MemoryGiBHoursReservation, l.MemoryGiBHoursUsage, l.DiskGiBHours, l.Charge))
	}
	// Version 1 is labelled search, version 2 ads. Production is charged on
	// limits: 3.5 core-hours × 0.048 + 7 GiB-hours × 0.0064 + 4 × 0.00016.
	want := []string{
		" unknown none tasks=1 windows=1 cpu=0.000000000/0.000000000/0.100000000 mem=0.000000000/0.000000000/1.000000000 disk=0.000000000 charge=0.000000",
		"ads production limit tasks=1 windows=1 cpu=3.000000000/3.000000000/2.000000000 mem=2.000000000/2.000000000/1.000000000 disk=1.000000000 charge=0.156960",
		"search production limit tasks=2 windows=3 cpu=3.500000000/3.250000000/1.750000000 mem=7.000000000/6.500000000/3.250000000 disk=3.500000000 charge=0.213360",
		"total   tasks=3 windows=5 cpu=6.500000000/6.250000000/3.850000000 mem=9.000000000/8.500000000/5.250000000 disk=4.500000000 charge=0.370320",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("bill:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestBillExportIsReproducible exports a closed period twice, with more of
// the log ingested in between, and expects the same bytes in every format;
// the Parquet file must read back to the same figures.
func TestBillExportIsReproducible(t *testing.T) {
	ctx := context.Background()
	evs := cellHistory(9, 2400)
	// The period closes before the last events' windows start.
	cut := len(evs) * 2 / 3
	closeAt := evs[cut].OccurredAt.Add(-time.Hour)
	for _, e := range evs[cut:] {
		// A machine's window starts where its last ended, which may be
		// long before it is recorded.
		if u, ok := e.Data.(*events.UsageReported); ok && time.UnixMicro(u.WindowStartUs).Before(closeAt) {
			closeAt = time.UnixMicro(u.WindowStartUs)
		}
	}
	closeAt = closeAt.UTC().Truncate(time.Hour)
	if !closeAt.After(h0) {
		t.Fatalf("the period to close ends at %s, before the history's start", closeAt)
	}
	store := newSQLiteLog(t, evs[:cut])
	s := openStore(t, Options{})
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	req := BillRequest{From: h0, To: closeAt, GroupBy: "job"}
	export := func() map[string][]byte {
		b, err := s.Bill(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for _, f := range []string{FormatCSV, FormatJSON, FormatParquet} {
			var buf bytes.Buffer
			if err := b.Export(ctx, &buf, f); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out[f] = buf.Bytes()
		}
		return out
	}
	first := export()
	appendEvents(t, ctx, store, evs[cut:])
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	second := export()
	for f, b := range first {
		if len(b) == 0 || !bytes.Equal(b, second[f]) {
			t.Errorf("%s: %d bytes, then %d bytes that differ", f, len(b), len(second[f]))
		}
	}
	if !bytes.HasPrefix(first[FormatParquet], []byte("PAR1")) {
		t.Fatal("parquet export does not start with PAR1")
	}

	// Read the Parquet file back with DuckDB and compare with the bill.
	path := filepath.Join(t.TempDir(), "bill.parquet")
	if err := os.WriteFile(path, first[FormatParquet], 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := duckdb.NewConnector("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	db := sql.OpenDB(c)
	defer db.Close()
	var n int64
	var charge, cpu string
	if err := db.QueryRow(`SELECT count(*), sum(charge)::VARCHAR, sum(cpu_core_hours_limit)::VARCHAR FROM read_parquet(?)`, path).Scan(&n, &charge, &cpu); err != nil {
		t.Fatal(err)
	}
	b, _ := s.Bill(ctx, req)
	if n != int64(len(b.Lines)) || charge != b.Total.Charge.String() || cpu != b.Total.CPUCoreHoursLimit.String() {
		t.Errorf("parquet holds %d lines, charge %s, cpu %s; the bill %d, %s, %s", n, charge, cpu, len(b.Lines), b.Total.Charge, b.Total.CPUCoreHoursLimit)
	}
	if !strings.HasPrefix(string(first[FormatCSV]), strings.Join(billColumns, ",")+"\n") {
		t.Errorf("csv header: %.200s", first[FormatCSV])
	}
}

func TestBillInvalidInput(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	for _, c := range []struct {
		req  BillRequest
		want string
	}{
		{BillRequest{To: t0}, "from: must be set"},
		{BillRequest{From: t0}, "to: must be set"},
		{BillRequest{From: t0, To: t0}, "to: 2026-03-01T00:00:00Z is not after from"},
		{BillRequest{From: t0, To: t0.Add(time.Hour), GroupBy: "team"}, `group_by: "team" is not user, job or label:KEY`},
		{BillRequest{From: t0, To: t0.Add(time.Hour), GroupBy: "label:"}, "group_by: label: needs a key"},
		{BillRequest{From: t0, To: t0.Add(time.Hour), Rates: &Rates{Currency: "EUR"}}, "rates.bands.monitoring: missing"},
	} {
		t.Run(c.want, func(t *testing.T) {
			_, err := s.Bill(ctx, c.req)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: %v, want ErrInvalid with %q", c.req, err, c.want)
			}
		})
	}
	b, err := s.Bill(ctx, BillRequest{From: t0, To: t0.Add(time.Hour)})
	if err != nil || len(b.Lines) != 0 || !b.Total.Charge.IsZero() {
		t.Errorf("empty period: %+v, %v", b, err)
	}
	if err := b.Export(ctx, &bytes.Buffer{}, "xlsx"); !errors.Is(err, ErrInvalid) {
		t.Errorf("export as xlsx: %v, want ErrInvalid", err)
	}
}

func TestParseRates(t *testing.T) {
	yaml := `currency: EUR
bands:
  monitoring:  {basis: limit, cpu_core_hour: "0.1", memory_gib_hour: 0.01, disk_gib_hour: 0.001}
  production:  {basis: limit, cpu_core_hour: 0.08, memory_gib_hour: 0.008, disk_gib_hour: 0.001}
  batch:       {basis: reservation, cpu_core_hour: 0.04, memory_gib_hour: 0.004, disk_gib_hour: 0.0005}
  best-effort: {basis: usage, cpu_core_hour: 0.01, memory_gib_hour: 0.001, disk_gib_hour: 0}
`
	r, err := ParseRates([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if r.Currency != "EUR" || r.Bands["monitoring"].CPUCoreHour.String() != "0.100000000" || r.Bands["batch"].Basis != BasisReservation {
		t.Errorf("parsed %+v", r)
	}
	path := filepath.Join(t.TempDir(), "rates.json")
	js, _ := json.Marshal(DefaultRates())
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := LoadRates(path); err != nil || r.Bands["production"].CPUCoreHour.Cmp(DefaultRates().Bands["production"].CPUCoreHour) != 0 {
		t.Errorf("LoadRates(defaults as JSON) = %+v, %v", r, err)
	}
	for _, c := range []struct{ in, want string }{
		{strings.Replace(yaml, "currency: EUR", "currency: ''", 1), "rates.currency: must be set"},
		{strings.Replace(yaml, "basis: usage", "basis: vibes", 1), `rates.bands.best-effort.basis: "vibes" is not limit, reservation or usage`},
		{strings.Replace(yaml, "cpu_core_hour: 0.04", "cpu_core_hour: -0.04", 1), "rates.bands.batch.cpu_core_hour: must not be negative"},
		{strings.Replace(yaml, "cpu_core_hour: 0.04", "cpu_core_hour: \"0.0000000001\"", 1), "more than 9 decimals"},
		{strings.Replace(yaml, "cpu_core_hour: 0.04, ", "", 1), "rates.bands.batch.cpu_core_hour: missing"},
		{strings.Replace(yaml, "  batch:", "  bulk:", 1), "rates.bands.batch: missing"},
		{yaml + "  gold: {basis: limit, cpu_core_hour: 1, memory_gib_hour: 1, disk_gib_hour: 1}\n", "rates.bands.gold: not a band"},
		{strings.Replace(yaml, "currency", "curency", 1), `unknown field "curency"`},
		{"bands: [", "not JSON or YAML"},
	} {
		t.Run(c.want, func(t *testing.T) {
			if _, err := ParseRates([]byte(c.in)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want ErrInvalid with %q", err, c.want)
			}
		})
	}
}
