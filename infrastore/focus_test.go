package infrastore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/history"
)

// billingHistory is a real cell's log across a month's end: the cell's
// first price sheet, hours of jobs of three users in every band, a price
// change in each month, January closed after it ended, and then usage of
// January that a partitioned agent reports late (a correction).
type billingLog struct {
	evs                []events.Event
	jan, feb, mar      time.Time
	closedAt, lateFrom int64 // positions
	lateStart, lateEnd time.Time
}

var billingStart = time.Date(2026, 1, 31, 21, 0, 0, 0, time.UTC)

func billingHistory(t testing.TB) billingLog { return billingHistorySeed(t, 17) }

// billingHistorySeed is the billing history of the cell seed generates.
func billingHistorySeed(t testing.TB, seed uint64) billingLog {
	t.Helper()
	s := history.New(history.Hours, seed)
	s.Now = billingStart
	if !s.SetPriceSheet(nil) {
		t.Fatal("the first price sheet was refused")
	}
	feb := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	priceAt := func(at time.Time, batchCPU string) {
		for s.Now.Before(at) {
			s.Step()
		}
		if !s.SetPriceSheet(func(sheet *events.PriceSheetSet) {
			sheet.EffectiveUs = s.Now.Add(7 * time.Minute).UnixMicro()
			sheet.Bands["batch"].CpuCoreHour = batchCPU
			sheet.Bands["production"].MemoryGibHour = "0.0070"
		}) {
			t.Fatal("a price change was refused")
		}
	}
	priceAt(billingStart.Add(90*time.Minute), "0.030")
	// An agent cut off shortly before January ends is heard again after
	// January was closed: its window spans the silence and starts in
	// January, usage recorded late (a correction).
	for s.Now.Before(feb.Add(-10 * time.Minute)) {
		s.Step()
	}
	silent := s.Silence()
	for silent == "" {
		s.Step()
		silent = s.Silence()
	}
	priceAt(feb.Add(40*time.Minute), "0.036")
	for s.Now.Before(feb.Add(75 * time.Minute)) {
		s.Step()
	}
	if !s.CloseBillingPeriod(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatal("closing January was refused")
	}
	closedAt := s.S.Position
	if !s.LateUsage() {
		t.Fatalf("machine %s, cut off before January ended, could not report its late usage", silent)
	}
	var lateFrom int64
	var lateStart, lateEnd time.Time
	for _, e := range s.Log[closedAt:] {
		if u, ok := e.Data.(*events.UsageReported); ok && u.Machine == silent && lateFrom == 0 {
			lateFrom, lateStart, lateEnd = e.Position, time.UnixMicro(u.WindowStartUs).UTC(), time.UnixMicro(u.WindowEndUs).UTC()
		}
	}
	if lateFrom == 0 || !lateStart.Before(feb) {
		t.Fatalf("machine %s's late window: position %d, from %s", silent, lateFrom, lateStart)
	}
	if lateFrom == 0 {
		t.Fatal("no machine reported the late usage")
	}
	for s.Now.Before(feb.Add(3 * time.Hour)) {
		s.Step()
	}
	return billingLog{evs: s.Log, jan: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), feb: feb, mar: feb.AddDate(0, 1, 0),
		closedAt: closedAt, lateFrom: lateFrom, lateStart: lateStart, lateEnd: lateEnd}
}

// billingStores ingests the billing history into a store and returns it
// with the log.
func billingStore(t *testing.T) (billingLog, *Infrastore, events.Store) {
	t.Helper()
	h := billingHistory(t)
	store := newSQLiteLog(t, h.evs)
	s := openStore(t, Options{})
	if _, err := s.CatchUp(context.Background(), store); err != nil {
		t.Fatal(err)
	}
	return h, s, store
}

func exportFocus(t *testing.T, s *Infrastore, req FocusRequest) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.ExportFocus(context.Background(), req, &buf); err != nil {
		t.Fatalf("export %+v: %v", req, err)
	}
	return buf.Bytes()
}

// readCSV parses an export into its header and rows, as maps.
func readCSV(t *testing.T, data []byte) []map[string]string {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, r := range recs[1:] {
		m := map[string]string{}
		for i, c := range recs[0] {
			m[c] = r[i]
		}
		out = append(out, m)
	}
	return out
}

func dec(t *testing.T, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("%q is not a decimal", s)
	}
	return r
}

// TestFocusConformance writes a FOCUS export of a cell with several users,
// bands, label values, price changes, a closed month and a correction, as
// Parquet and CSV, reads it back with DuckDB and checks every Mandatory
// column's presence, type and nullability and the specification's rules.
func TestFocusConformance(t *testing.T) {
	h, s, _ := billingStore(t)
	for _, idle := range []string{IdleSeparate, IdleShare} {
		t.Run(idle, func(t *testing.T) {
			req := FocusRequest{From: h.jan, To: h.mar, Cell: "cell-a", Idle: idle, Format: FormatParquet, AccountBy: "label:team"}
			db, types := openParquetExport(t, exportFocus(t, s, req))
			checkFocusColumns(t, db, types, idle)
			checkFocusRules(t, db, idle)
			checkFocusVariety(t, db, idle)
			// The invoice total: every window billed in the month at its
			// price, straight from task_usage and the sheets, plus the idle
			// capacity.
			for _, month := range []time.Time{h.jan, h.feb} {
				var got string
				if err := db.QueryRow(`SELECT sum("BilledCost")::VARCHAR FROM f WHERE "InvoiceId" = ?`, "cell-a-"+month.Format("2006-01")).Scan(&got); err != nil {
					t.Fatal(err)
				}
				want := invoiceTotal(t, s, h, month, idle)
				if dec(t, got).Cmp(want) != 0 {
					t.Errorf("%s: invoice %s: the rows sum to %s, the windows and idle capacity to %s", idle, month.Format("2006-01"), got, want.FloatString(18))
				}
			}
		})
	}
}

// openParquetExport opens a DuckDB database with the Parquet export data
// as view f, and returns it with f's column types by name.
func openParquetExport(t *testing.T, data []byte) (*sql.DB, map[string]string) {
	pq := filepath.Join(t.TempDir(), "focus.parquet")
	if err := os.WriteFile(pq, data, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`SET TimeZone = 'UTC'; CREATE VIEW f AS SELECT * FROM read_parquet('` + pq + `')`); err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	rows, err := db.Query(`SELECT column_name, column_type FROM (DESCRIBE f)`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		types[n] = ty
	}
	rows.Close()
	return db, types
}

// focusMandatory is every Mandatory column of FOCUS, with its type and
// whether it may be null (columns/*.md).
var focusMandatory = []struct {
	col, kind string
	nullable  bool
}{
	{"BilledCost", "Decimal", false}, {"BillingAccountId", "String", false}, {"BillingAccountName", "String", true},
	{"BillingCurrency", "String", false}, {"BillingPeriodEnd", "Date/Time", false}, {"BillingPeriodStart", "Date/Time", false},
	{"ChargeCategory", "String", false}, {"ChargeClass", "String", true}, {"ChargeDescription", "String", true},
	{"ChargePeriodEnd", "Date/Time", false}, {"ChargePeriodStart", "Date/Time", false}, {"ContractedCost", "Decimal", false},
	{"EffectiveCost", "Decimal", false}, {"InvoiceIssuerName", "String", false}, {"ListCost", "Decimal", false},
	{"PricingQuantity", "Decimal", true}, {"PricingUnit", "String", true}, {"ProviderName", "String", false},
	{"PublisherName", "String", false}, {"ServiceCategory", "String", false}, {"ServiceName", "String", false},
}

// focusConditional are the Conditional columns the export has.
var focusConditional = []string{"ConsumedQuantity", "ConsumedUnit", "ListUnitPrice", "ContractedUnitPrice", "ResourceId", "ResourceName",
	"ResourceType", "SubAccountId", "SubAccountName", "SubAccountType", "Tags", "RegionId", "RegionName", "InvoiceId", "PricingCategory"}

// checkFocusColumns checks that view f has every Mandatory column, of its
// type and null only where it may be, the Conditional ones, and no other
// but x_ ones.
func checkFocusColumns(t *testing.T, db *sql.DB, types map[string]string, idle string) {
	want := map[string]string{"Decimal": "DECIMAL", "String": "VARCHAR", "Date/Time": "TIMESTAMP WITH TIME ZONE"}
	for i, m := range focusMandatory {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			ty, ok := types[m.col]
			if !ok {
				t.Errorf("%s: Mandatory column %s is missing", idle, m.col)
				return
			}
			if !strings.HasPrefix(ty, want[m.kind]) {
				t.Errorf("%s: %s is %s, want %s", idle, m.col, ty, m.kind)
			}
			if !m.nullable {
				var nulls int
				if err := db.QueryRow(`SELECT count(*) FROM f WHERE "` + m.col + `" IS NULL`).Scan(&nulls); err != nil {
					t.Fatal(err)
				}
				if nulls > 0 {
					t.Errorf("%s: %s is null in %d rows", idle, m.col, nulls)
				}
			}
		})
	}
	for _, c := range focusConditional {
		if _, ok := types[c]; !ok {
			t.Errorf("%s: conditional column %s is missing", idle, c)
		}
	}
	focusNames := append([]string{"ChargeFrequency", "SkuId", "SkuPriceId", "SkuMeter", "SkuPriceDetails", "ServiceSubcategory"}, focusConditional...)
	for _, m := range focusMandatory {
		focusNames = append(focusNames, m.col)
	}
	for c := range types {
		if !strings.HasPrefix(c, "x_") && !slicesContains(focusNames, c) {
			t.Errorf("%s: column %s is neither FOCUS's nor x_-prefixed", idle, c)
		}
	}
}

// checkFocusRules checks the specification's rules on view f, each a
// query that must find no row.
func checkFocusRules(t *testing.T, db *sql.DB, idle string) {
	for _, rule := range []struct{ what, where string }{
		{"charge periods are hours with an exclusive end", `"ChargePeriodEnd" <> "ChargePeriodStart" + INTERVAL 1 HOUR OR date_trunc('hour', "ChargePeriodStart") <> "ChargePeriodStart"`},
		{"billing periods are months with an exclusive end", `"BillingPeriodEnd" <> "BillingPeriodStart" + INTERVAL 1 MONTH OR date_trunc('month', "BillingPeriodStart") <> "BillingPeriodStart"`},
		{"a regular charge lies in its billing period", `"ChargeClass" IS NULL AND ("ChargePeriodStart" < "BillingPeriodStart" OR "ChargePeriodEnd" > "BillingPeriodEnd")`},
		{"a correction corrects an earlier billing period", `"ChargeClass" IS NOT NULL AND ("ChargeClass" <> 'Correction' OR "ChargePeriodStart" >= "BillingPeriodStart" OR x_CorrectsBillingPeriodStart >= "BillingPeriodStart")`},
		{"ListCost = ListUnitPrice x PricingQuantity", `"ChargeClass" IS NULL AND "ListCost" <> "ListUnitPrice" * "PricingQuantity"`},
		{"ContractedCost = ContractedUnitPrice x PricingQuantity", `"ChargeClass" IS NULL AND "ContractedCost" <> "ContractedUnitPrice" * "PricingQuantity"`},
		{"BilledCost = EffectiveCost = ListCost (no discounts)", `"BilledCost" <> "EffectiveCost" OR "BilledCost" <> "ListCost"`},
		{"usage rows carry their quantities, units and prices", `"ChargeClass" IS NULL AND ("PricingQuantity" IS NULL OR "PricingUnit" IS NULL OR "ListUnitPrice" IS NULL OR "ConsumedQuantity" IS NULL OR "ConsumedUnit" IS NULL OR "PricingCategory" IS NULL)`},
		{"allowed values", `"ChargeCategory" <> 'Usage' OR "ServiceCategory" <> 'Compute' OR "PricingCategory" <> 'Standard'`},
		{"SubAccountType is null exactly when SubAccountId is", `("SubAccountId" IS NULL) <> ("SubAccountType" IS NULL)`},
		{"Tags are a JSON object of scalars", `"Tags" IS NOT NULL AND (json_type("Tags"::JSON) <> 'OBJECT' OR EXISTS (SELECT 1 FROM (SELECT unnest(json_keys("Tags"::JSON)) AS k) WHERE json_type("Tags"::JSON, '$."' || k || '"') IN ('OBJECT', 'ARRAY')))`},
		{"currencies are ISO 4217", `NOT regexp_full_match("BillingCurrency", '[A-Z]{3}')`},
		{"x_RowId is unique", `x_RowId IN (SELECT x_RowId FROM f GROUP BY x_RowId HAVING count(*) > 1)`},
		{"the invoice is the cell's and the month's", `"InvoiceId" <> 'cell-a-' || strftime("BillingPeriodStart", '%Y-%m')`},
	} {
		t.Run(rule.what, func(t *testing.T) {
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM f WHERE ` + rule.where).Scan(&n); err != nil {
				t.Fatalf("%s: %v", rule.what, err)
			}
			if n > 0 {
				t.Errorf("%s: %s: %d rows break it", idle, rule.what, n)
			}
		})
	}
}

// checkFocusVariety checks that the export covers what the test claims
// it does.
func checkFocusVariety(t *testing.T, db *sql.DB, idle string) {
	var users, bands, sheets, corrections, idleRows, months int
	if err := db.QueryRow(`SELECT count(DISTINCT split_part("ResourceId", '/', 1)) FILTER (WHERE "ResourceType" = 'Task'),
		count(DISTINCT x_Band), count(DISTINCT x_PriceSheetPosition), count(*) FILTER (WHERE "ChargeClass" = 'Correction'),
		count(*) FILTER (WHERE "ResourceType" = 'Idle capacity'), count(DISTINCT "InvoiceId") FROM f`).Scan(&users, &bands, &sheets, &corrections, &idleRows, &months); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d users, %d bands, %d sheets, %d corrections, %d idle rows, %d invoices", idle, users, bands, sheets, corrections, idleRows, months)
	if users < 3 || bands < 3 || sheets < 3 || corrections == 0 || idleRows == 0 || months != 2 {
		t.Errorf("%s: the export lacks variety", idle)
	}
}

// invoiceTotal is a month's invoice computed apart from the export: the
// cost of every window billed in it (those that started in it, recorded
// before it closed, and January's recorded after January closed), priced
// window by window, plus the idle capacity of the separate export.
func invoiceTotal(t *testing.T, s *Infrastore, h billingLog, month time.Time, idle string) *big.Rat {
	t.Helper()
	where := `start_time >= ? AND start_time < ? AND position <= ?`
	args := []any{h.jan.UnixMicro(), h.feb.UnixMicro(), h.closedAt}
	if month.Equal(h.feb) {
		where = `(start_time >= ? AND start_time < ?) OR (start_time >= ? AND start_time < ? AND position > ?)`
		args = []any{h.feb.UnixMicro(), h.mar.UnixMicro(), h.jan.UnixMicro(), h.feb.UnixMicro(), h.closedAt}
	}
	var usage sql.NullString
	if err := s.db.QueryRow(`SELECT sum(cpu_core_hours * cpu_price + memory_gib_hours * memory_price + disk_gib_hours * disk_price
		+ gpu_hours * gpu_price)::VARCHAR FROM priced_usage WHERE `+where, args...).Scan(&usage); err != nil {
		t.Fatal(err)
	}
	total := dec(t, usage.String)
	sep := readCSV(t, exportFocus(t, s, FocusRequest{From: h.jan, To: h.mar, Cell: "cell-a", Idle: IdleSeparate}))
	for _, r := range sep {
		if r["ResourceType"] == "Idle capacity" && r["BillingPeriodStart"] == month.Format("2006-01-02T15:04:05Z") {
			total.Add(total, dec(t, r["BilledCost"]))
		}
	}
	_ = idle
	return total
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestClosedBillReproduces: January's bill, computed once January closed,
// is byte for byte the bill computed after more usage came in (some of it
// January's, late) and the bill of a fresh Infrastore rebuilt from the
// log; and each of its rows cites the log positions it came from.
func TestClosedBillReproduces(t *testing.T) {
	ctx := context.Background()
	h := billingHistory(t)
	jan := func(format string) FocusRequest {
		return FocusRequest{From: h.jan, To: h.feb, Cell: "cell-a", Format: format, Idle: IdleShare, AccountBy: "label:team"}
	}

	// At the close: the log up to BillingPeriodClosed.
	atClose := openStore(t, Options{})
	if _, err := atClose.CatchUp(ctx, newSQLiteLog(t, h.evs[:h.closedAt])); err != nil {
		t.Fatal(err)
	}
	csv0, pq0 := exportFocus(t, atClose, jan(FormatCSV)), exportFocus(t, atClose, jan(FormatParquet))

	// Later, on the same file: the whole log, late usage included.
	if _, err := atClose.CatchUp(ctx, newSQLiteLog(t, h.evs)); err != nil {
		t.Fatal(err)
	}
	if got := exportFocus(t, atClose, jan(FormatCSV)); !bytes.Equal(got, csv0) {
		t.Errorf("January's CSV changed after it closed:\n%s", firstDiff(csv0, got))
	}

	// Elsewhere: a fresh Infrastore rebuilt from the log.
	fresh := openStore(t, Options{})
	store := newSQLiteLog(t, h.evs)
	if _, err := fresh.Rebuild(ctx, store); err != nil {
		t.Fatal(err)
	}
	if got := exportFocus(t, fresh, jan(FormatCSV)); !bytes.Equal(got, csv0) {
		t.Errorf("January's CSV differs on a rebuilt Infrastore:\n%s", firstDiff(csv0, got))
	}
	if got := exportFocus(t, fresh, jan(FormatParquet)); !bytes.Equal(got, pq0) {
		t.Errorf("January's Parquet differs on a rebuilt Infrastore (%d and %d bytes)", len(pq0), len(got))
	}

	// Every usage row cites positions of its windows, in the month, before
	// the close; --explain lists them and their costs add up to the row.
	rows := readCSV(t, csv0)
	explained := 0
	for _, r := range rows {
		if r["ResourceType"] == "Idle capacity" {
			continue
		}
		first, last := r["x_UsagePositionFirst"], r["x_UsagePositionLast"]
		if first == "" || last == "" || r["x_BillingPeriodClosedAt"] != itoa(h.closedAt) || dec(t, last).Cmp(dec(t, itoa(h.closedAt))) > 0 {
			t.Fatalf("row %s cites %s..%s, closed at %s", r["x_RowId"], first, last, r["x_BillingPeriodClosedAt"])
		}
		if explained < 5 {
			explained++
			req := jan(FormatCSV)
			req.Explain = r["x_RowId"]
			ws := readCSV(t, exportFocus(t, fresh, req))
			sum := new(big.Rat)
			for _, w := range ws {
				sum.Add(sum, dec(t, w["cost"]))
			}
			if len(ws) != int(dec(t, r["x_UsageWindows"]).Num().Int64()) || sum.Cmp(dec(t, r["BilledCost"])) != 0 {
				t.Errorf("explain %s: %d windows costing %s; the row says %s windows, %s", r["x_RowId"], len(ws), sum.FloatString(18), r["x_UsageWindows"], r["BilledCost"])
			}
		}
	}
	req := jan(FormatCSV)
	req.Explain = "2026-01|Regular|nope|cpu"
	if err := fresh.ExportFocus(ctx, req, &bytes.Buffer{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("explaining a row that does not exist: %v", err)
	}
}

// TestLateUsageIsACorrection: January's usage recorded after January
// closed leaves January's bill alone and appears in February's as
// Correction rows naming the period they correct.
func TestLateUsageIsACorrection(t *testing.T) {
	h, s, _ := billingStore(t)
	rows := readCSV(t, exportFocus(t, s, FocusRequest{From: h.feb, To: h.mar, Cell: "cell-a", Idle: IdleNone}))
	late := new(big.Rat)
	n := 0
	for _, r := range rows {
		if r["ChargeClass"] == "" {
			continue
		}
		n++
		late.Add(late, dec(t, r["BilledCost"]))
		if r["ChargeClass"] != "Correction" || r["x_CorrectsBillingPeriodStart"] != "2026-01-01T00:00:00Z" ||
			r["ChargePeriodStart"] != h.lateStart.Truncate(time.Hour).Format("2006-01-02T15:04:05Z") ||
			r["BillingPeriodStart"] != "2026-02-01T00:00:00Z" || r["x_UsagePositionFirst"] != itoa(h.lateFrom) {
			t.Errorf("correction row %s: class %s, corrects %s, charged %s, billed %s, cites %s (late usage at %d)", r["x_RowId"], r["ChargeClass"],
				r["x_CorrectsBillingPeriodStart"], r["ChargePeriodStart"], r["BillingPeriodStart"], r["x_UsagePositionFirst"], h.lateFrom)
		}
		if !strings.Contains(r["ChargeDescription"], "correcting 2026-01") {
			t.Errorf("the description does not name the period: %q", r["ChargeDescription"])
		}
	}
	if n == 0 {
		t.Fatal("no correction rows in February")
	}
	var want string
	if err := s.db.QueryRow(`SELECT sum(cpu_core_hours * cpu_price + memory_gib_hours * memory_price + disk_gib_hours * disk_price
		+ gpu_hours * gpu_price)::VARCHAR FROM priced_usage WHERE position = ?`, h.lateFrom).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if late.Cmp(dec(t, want)) != 0 {
		t.Errorf("the corrections cost %s, the late windows %s", late.FloatString(18), want)
	}
	for _, r := range readCSV(t, exportFocus(t, s, FocusRequest{From: h.jan, To: h.feb, Cell: "cell-a"})) {
		if r["ChargeClass"] != "" || r["x_UsagePositionLast"] == itoa(h.lateFrom) {
			t.Errorf("January's bill holds late usage: %s", r["x_RowId"])
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// firstDiff shows where two exports part.
func firstDiff(a, b []byte) string {
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := 0; i < len(al) && i < len(bl); i++ {
		if !bytes.Equal(al[i], bl[i]) {
			x, y := string(al[i]), string(bl[i])
			j := 0
			for j < len(x) && j < len(y) && x[j] == y[j] {
				j++
			}
			return "line " + strconv.Itoa(i+1) + " from byte " + strconv.Itoa(j) + ":\n  " + x[j:] + "\n  " + y[j:]
		}
	}
	return "lengths " + strconv.Itoa(len(al)) + " and " + strconv.Itoa(len(bl))
}

// TestIdleCost: each hour's idle quantity is what the machines not removed
// could hold (computed here from the log's machine events) less what the
// hour's charges took, never below zero; its cost is at the sheet's
// machine prices; and --idle share splits it among the hour's accounts
// in proportion to their charges, adding up to it exactly.
func TestIdleCost(t *testing.T) {
	h, s, _ := billingStore(t)
	// The machines' capacity up to the last event.
	spans := capacitySpans(h.evs, minTime(h.mar, h.evs[len(h.evs)-1].OccurredAt))
	from, to := h.feb.Add(-3*time.Hour), h.feb.Add(3*time.Hour)
	sep := readCSV(t, exportFocus(t, s, FocusRequest{From: from, To: to, Cell: "c", Idle: IdleSeparate}))
	share := readCSV(t, exportFocus(t, s, FocusRequest{From: from, To: to, Cell: "c", Idle: IdleShare}))
	checked := 0
	for hour := from; hour.Before(to); hour = hour.Add(time.Hour) {
		stamp := hour.Format("2006-01-02T15:04:05Z")
		c := separateHour(t, sep, stamp)
		capacity, _ := capacityIn(spans, hour, hour.Add(time.Hour))
		want := new(big.Rat).Sub(capacity, c.alloc)
		if want.Sign() < 0 {
			want.SetInt64(0)
		}
		// Quantities are kept to 1e-9 core-hours: allow one unit.
		if diff := new(big.Rat).Sub(c.idle, want); diff.Abs(diff).Cmp(big.NewRat(1, 1_000_000_000)) > 0 {
			t.Errorf("%s: idle %s core-hours; capacity %s less the charges' %s is %s", stamp, c.idle.FloatString(9),
				capacity.FloatString(9), c.alloc.FloatString(9), want.FloatString(9))
		}
		if c.idle.Sign() > 0 {
			checked++
			if c.price != "0.020000000" || new(big.Rat).Mul(c.idle, dec(t, c.price)).Cmp(c.idleCost) != 0 {
				t.Errorf("%s: idle costs %s at %s a core-hour", stamp, c.idleCost.FloatString(18), c.price)
			}
		}
		checkIdleShares(t, share, stamp, c)
	}
	if checked < 4 {
		t.Errorf("only %d hours had idle CPU", checked)
	}
}

// idleHour is what a separate-idle export's regular rows of an hour say.
type idleHour struct {
	alloc, idle, idleCost *big.Rat // CPU core-hours charged and idle, and the idle's cost
	charged               map[string]*big.Rat
	price                 string // of an idle CPU core-hour
}

func separateHour(t *testing.T, sep []map[string]string, stamp string) idleHour {
	c := idleHour{alloc: new(big.Rat), idle: new(big.Rat), idleCost: new(big.Rat), charged: map[string]*big.Rat{}}
	for _, r := range sep {
		if r["ChargePeriodStart"] != stamp || r["ChargeClass"] != "" {
			continue
		}
		switch {
		case r["ResourceType"] == "Idle capacity" && r["x_Meter"] == "cpu":
			c.idle.Add(c.idle, dec(t, r["PricingQuantity"]))
			c.idleCost.Add(c.idleCost, dec(t, r["BilledCost"]))
			c.price = r["ListUnitPrice"]
		case r["ResourceType"] == "Task" && r["x_Meter"] == "cpu":
			c.alloc.Add(c.alloc, dec(t, r["PricingQuantity"]))
		}
		if r["ResourceType"] == "Task" {
			if c.charged[r["SubAccountId"]] == nil {
				c.charged[r["SubAccountId"]] = new(big.Rat)
			}
			c.charged[r["SubAccountId"]].Add(c.charged[r["SubAccountId"]], dec(t, r["BilledCost"]))
		}
	}
	return c
}

// checkIdleShares checks the shared export's idle rows of an hour: the
// same quantity as c's, split by what each account was charged.
func checkIdleShares(t *testing.T, share []map[string]string, stamp string, c idleHour) {
	var total, chargedAll, shared = new(big.Rat), new(big.Rat), new(big.Rat)
	for _, ch := range c.charged {
		chargedAll.Add(chargedAll, ch)
	}
	// An hour a sheet takes effect within is two idle rows per account
	// (one per sheet): an account's share is their sum.
	shares := map[string]*big.Rat{}
	for _, r := range share {
		if r["ChargePeriodStart"] != stamp || r["ResourceType"] != "Idle capacity" || r["x_Meter"] != "cpu" {
			continue
		}
		q := dec(t, r["PricingQuantity"])
		total.Add(total, q)
		shared.Add(shared, dec(t, r["BilledCost"]))
		if shares[r["SubAccountId"]] == nil {
			shares[r["SubAccountId"]] = new(big.Rat)
		}
		shares[r["SubAccountId"]].Add(shares[r["SubAccountId"]], q)
	}
	for account, q := range shares {
		if ch := c.charged[account]; ch != nil && chargedAll.Sign() > 0 {
			exact := new(big.Rat).Mul(c.idle, new(big.Rat).Quo(ch, chargedAll))
			if diff := new(big.Rat).Sub(q, exact); diff.Abs(diff).Cmp(big.NewRat(4, 1_000_000_000)) > 0 {
				t.Errorf("%s: %s's share is %s core-hours, in proportion it is %s", stamp, account, q.FloatString(9), exact.FloatString(12))
			}
		} else if account != "" {
			t.Errorf("%s: %s shares idle capacity without being charged", stamp, account)
		}
	}
	if total.Cmp(c.idle) != 0 || shared.Cmp(c.idleCost) != 0 {
		t.Errorf("%s: shares total %s core-hours costing %s; idle is %s costing %s", stamp, total.FloatString(9), shared.FloatString(18),
			c.idle.FloatString(9), c.idleCost.FloatString(18))
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// TestSummaryBillPricesBySheets: `corral bill` (the summary) prices each
// window by the sheet in force when it started, as the FOCUS export does:
// per user and band its charge is the export's usage rows of the windows
// that started in the period, rounded once.
func TestSummaryBillPricesBySheets(t *testing.T) {
	h, s, _ := billingStore(t)
	from, to := h.feb, h.feb.Add(3*time.Hour)
	b, err := s.Bill(context.Background(), BillRequest{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*big.Rat{}
	for _, r := range readCSV(t, exportFocus(t, s, FocusRequest{From: from, To: to, Idle: IdleNone})) {
		if r["ChargeClass"] != "" {
			continue
		}
		k := r["SubAccountId"] + " " + r["x_Band"]
		if want[k] == nil {
			want[k] = new(big.Rat)
		}
		want[k].Add(want[k], dec(t, r["BilledCost"]))
	}
	// Usage of a task the log no longer knows (an index gone with its job's
	// smaller resubmission) bills nothing, in an "unknown" band the
	// summary shows and the export, with no price, leaves out.
	b.Lines = slices.DeleteFunc(b.Lines, func(l BillLine) bool { return l.Band == "unknown" && l.Charge.Unscaled.Sign() == 0 })
	if len(b.Lines) != len(want) || len(want) < 6 {
		for _, l := range b.Lines {
			t.Logf("line %s %s %s", l.Group, l.Band, l.Charge)
		}
		t.Fatalf("%d lines, the export has %d user-bands: %v", len(b.Lines), len(want), want)
	}
	for _, l := range b.Lines {
		w := want[l.Group+" "+l.Band]
		got := new(big.Rat).SetFrac(l.Charge.Unscaled, pow10(l.Charge.Scale))
		if w == nil || new(big.Rat).Sub(got, w).Abs(new(big.Rat).Sub(got, w)).Cmp(big.NewRat(1, 2_000_000)) > 0 {
			t.Errorf("%s %s: charge %s, the export's rows %v", l.Group, l.Band, l.Charge, w)
		}
	}
	if b.Currency != "USD" {
		t.Errorf("currency %q", b.Currency)
	}
}

// TestKilledExportsAreSwept: a Parquet export's scratch files live beside
// the store's file, and what an export killed with -9 left there is
// removed when the store next opens for writing; a running export's
// (recent) directory is kept.
func TestKilledExportsAreSwept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "infra.duckdb")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stale, _ := s.newExportDir()
	fresh, _ := s.newExportDir()
	if err := os.WriteFile(filepath.Join(stale, "focus.csv"), []byte("rows"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * staleExport)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the killed export's files are still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a running export's files were removed: %v", err)
	}
}

// TestRollupBillsAsTheWindows bills a cell per job from the hourly rollup
// (rolled in one batch, or hour by hour and at the close while ingesting
// an event at a time) and from the windows alone: the bytes are the same.
// And the job rows add up, hour by hour and meter by meter, to the task
// rows, which never read the rollup.
func TestRollupBillsAsTheWindows(t *testing.T) {
	ctx := context.Background()
	h, oneBatch, store := billingStore(t)
	eventByEvent := openStore(t, Options{BatchSize: 5})
	if _, err := eventByEvent.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	windowsOnly := openStore(t, Options{})
	if _, err := windowsOnly.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	if _, err := windowsOnly.db.ExecContext(ctx, `DELETE FROM usage_hours`); err != nil {
		t.Fatal(err)
	}
	partials := queryInt(t, eventByEvent, `SELECT count(*) FROM usage_hours`)
	keys := queryInt(t, eventByEvent, `SELECT count(*) FROM (SELECT DISTINCT hour, user, job, spec_position, band, priority FROM usage_hours)`)
	tail := queryInt(t, eventByEvent, `SELECT count(*) FROM task_usage WHERE position > (SELECT max(plast) FROM usage_hours)`)
	t.Logf("five by five: %d partials of %d keys, %d windows unrolled", partials, keys, tail)
	if partials <= keys {
		t.Errorf("ingesting five events at a time made %d partials of %d keys: the rolls were not cut across hours", partials, keys)
	}
	for _, idle := range []string{IdleSeparate, IdleShare} {
		req := FocusRequest{From: h.jan, To: h.mar, Cell: "cell-a", Granularity: "job", AccountBy: "label:team", Idle: idle}
		want := exportFocus(t, windowsOnly, req)
		for name, s := range map[string]*Infrastore{"one batch": oneBatch, "five by five": eventByEvent} {
			if got := exportFocus(t, s, req); !bytes.Equal(got, want) {
				t.Errorf("%s, idle %s: the bill from the rollup differs from the bill from the windows:\n%s\n---\n%s", name, idle, got, want)
			}
		}
	}

	sums := func(data []byte, job func(string) string) map[string]*big.Rat {
		out := map[string]*big.Rat{}
		for _, r := range readCSV(t, data) {
			if r["ResourceType"] == "Idle capacity" {
				continue
			}
			k := strings.Join([]string{r["InvoiceId"], r["ChargeClass"], r["ChargePeriodStart"], job(r["ResourceId"]), r["x_Meter"]}, "|")
			if out[k] == nil {
				out[k] = new(big.Rat)
			}
			out[k].Add(out[k], dec(t, r["BilledCost"]))
		}
		return out
	}
	req := FocusRequest{From: h.jan, To: h.mar, Cell: "cell-a", Idle: IdleNone}
	tasks := sums(exportFocus(t, oneBatch, req), func(id string) string { return id[:strings.LastIndexByte(id, '/')] })
	req.Granularity = "job"
	jobs := sums(exportFocus(t, oneBatch, req), func(id string) string { return id })
	if len(jobs) != len(tasks) || len(jobs) == 0 {
		t.Fatalf("%d job keys, %d task keys", len(jobs), len(tasks))
	}
	for k, v := range jobs {
		if tasks[k] == nil || tasks[k].Cmp(v) != 0 {
			t.Errorf("%s: the job rows cost %s, its tasks' rows %v", k, v.FloatString(18), tasks[k])
		}
	}
}

// TestCostsAreTheBill checks the costs page's figures against the FOCUS
// export of the same period: the total is the invoice, the users', teams'
// and bands' series each add up to the usage rows, idle capacity to the
// idle rows, corrections to the correction rows, and a top job's total to
// its rows.
func TestCostsAreTheBill(t *testing.T) {
	h, s, _ := billingStore(t)
	ctx := context.Background()
	for _, period := range [][2]time.Time{{h.feb, h.mar}, {h.feb, h.feb.Add(6 * time.Hour)}} {
		c, err := s.Costs(ctx, CostsRequest{From: period[0], To: period[1], Cell: "cell-a"})
		if err != nil {
			t.Fatal(err)
		}
		rows := readCSV(t, exportFocus(t, s, FocusRequest{From: period[0], To: period[1], Cell: "cell-a", Granularity: "job"}))
		checkCostsSumTheBill(t, c, sumBill(t, rows), period)
		wantStep := time.Hour
		if period[1].Sub(period[0]) > 48*time.Hour {
			wantStep = 24 * time.Hour
		}
		if c.Step != wantStep || len(c.Buckets) != int(period[1].Sub(period[0])/wantStep) || c.Currency != "USD" {
			t.Errorf("step %s, %d buckets, currency %q", c.Step, len(c.Buckets), c.Currency)
		}
		if len(c.Users) < 3 || len(c.Teams) < 2 || len(c.Bands) < 3 {
			t.Errorf("%d users, %d teams, %d bands: the cell has more", len(c.Users), len(c.Teams), len(c.Bands))
		}
		t.Logf("%s..%s: total %s, idle %s, corrections %s, %d users, %d teams, top job %s/%s %s", period[0], period[1],
			c.Total, c.Idle.Total, c.Corrections, len(c.Users), len(c.Teams), c.TopJobs[0].User, c.TopJobs[0].Job, c.TopJobs[0].Total)
	}
	if c, _ := s.Costs(ctx, CostsRequest{From: h.feb, To: h.mar}); c.Corrections.IsZero() {
		t.Error("February holds January's late usage, but the costs show no correction")
	}
	for _, bad := range []struct {
		req   CostsRequest
		field string
	}{
		{CostsRequest{From: h.feb, To: h.mar, Label: "team'); DROP TABLE events; --"}, "label"},
		{CostsRequest{From: h.feb, To: h.mar, Top: 1000}, "top"},
		{CostsRequest{From: h.mar, To: h.feb}, "to"},
		{CostsRequest{From: h.feb.Add(time.Minute), To: h.mar}, "from"},
	} {
		t.Run(bad.field, func(t *testing.T) {
			if _, err := s.Costs(ctx, bad.req); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad.field+":") {
				t.Errorf("%+v: %v, want an error naming %s", bad.req, err, bad.field)
			}
		})
	}
}

// billSums are a per-job export's costs summed by kind and by job.
type billSums struct {
	invoice, usage, idle, corrections *big.Rat
	perJob                            map[string]*big.Rat
}

func sumBill(t *testing.T, rows []map[string]string) billSums {
	b := billSums{invoice: new(big.Rat), usage: new(big.Rat), idle: new(big.Rat), corrections: new(big.Rat), perJob: map[string]*big.Rat{}}
	for _, r := range rows {
		cost := dec(t, r["BilledCost"])
		b.invoice.Add(b.invoice, cost)
		switch {
		case r["ResourceType"] == "Idle capacity":
			b.idle.Add(b.idle, cost)
		case r["ChargeClass"] == "Correction":
			b.corrections.Add(b.corrections, cost)
		default:
			b.usage.Add(b.usage, cost)
		}
		if r["ResourceType"] == "Job" {
			if b.perJob[r["ResourceId"]] == nil {
				b.perJob[r["ResourceId"]] = new(big.Rat)
			}
			b.perJob[r["ResourceId"]].Add(b.perJob[r["ResourceId"]], cost)
		}
	}
	return b
}

// checkCostsSumTheBill checks that every figure of c is the bill's b.
func checkCostsSumTheBill(t *testing.T, c *Costs, b billSums, period [2]time.Time) {
	t.Helper()
	same := func(what string, got Decimal, want *big.Rat) {
		t.Helper()
		if dec(t, got.String()).Cmp(want) != 0 {
			t.Errorf("%s..%s: %s: the costs say %s, the bill %s", period[0], period[1], what, got, want.FloatString(18))
		}
	}
	same("total", c.Total, b.invoice)
	same("idle", c.Idle.Total, b.idle)
	same("corrections", c.Corrections, b.corrections)
	for name, series := range map[string][]CostSeries{"users": c.Users, "teams": c.Teams, "bands": c.Bands} {
		var sum Decimal
		for _, cs := range series {
			sum = sum.Add(cs.Total)
			if len(cs.Costs) != len(c.Buckets) {
				t.Errorf("%s %q: %d buckets of %d", name, cs.Name, len(cs.Costs), len(c.Buckets))
			}
		}
		same(name, sum, b.usage)
	}
	if len(c.TopJobs) == 0 {
		t.Fatal("no top jobs")
	}
	for i, j := range c.TopJobs {
		same("job "+j.User+"/"+j.Job, j.Total, b.perJob[j.User+"/"+j.Job])
		if i > 0 && j.Total.Cmp(c.TopJobs[i-1].Total) > 0 {
			t.Errorf("top jobs out of order: %v after %v", j, c.TopJobs[i-1])
		}
	}
}

// TestFocusRefusesBadRequests: each bad field is named, and nothing is
// written.
func TestFocusRefusesBadRequests(t *testing.T) {
	s := openStore(t, Options{})
	feb, mar := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, bad := range []struct {
		req   FocusRequest
		field string
	}{
		{FocusRequest{To: mar}, "from"},
		{FocusRequest{From: feb}, "to"},
		{FocusRequest{From: mar, To: feb}, "to"},
		{FocusRequest{From: feb.Add(time.Second), To: mar}, "from"},
		{FocusRequest{From: feb, To: feb.AddDate(2, 0, 0)}, "to"},
		{FocusRequest{From: feb, To: mar, Granularity: "machine"}, "granularity"},
		{FocusRequest{From: feb, To: mar, AccountBy: "label:x'); DROP TABLE events; --"}, "account_by"},
		{FocusRequest{From: feb, To: mar, AccountBy: "label:a,b"}, "account_by"},
		{FocusRequest{From: feb, To: mar, AccountBy: "team"}, "account_by"},
		{FocusRequest{From: feb, To: mar, Idle: "some"}, "idle"},
		{FocusRequest{From: feb, To: mar, Format: "xlsx"}, "format"},
		{FocusRequest{From: feb, To: mar, Explain: strings.Repeat("x", 2000)}, "explain"},
		{FocusRequest{From: feb, To: mar, Explain: "no-meter"}, "explain"},
	} {
		t.Run(bad.field, func(t *testing.T) {
			var buf bytes.Buffer
			if err := s.ExportFocus(context.Background(), bad.req, &buf); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad.field+":") || buf.Len() != 0 {
				t.Errorf("%+v: %v (%d bytes written), want an error naming %s", bad.req, err, buf.Len(), bad.field)
			}
		})
	}
}

// TestCostsOfAnEmptyMonth: nothing charged still names the currency.
func TestCostsOfAnEmptyMonth(t *testing.T) {
	_, s, _ := billingStore(t)
	from := time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC)
	c, err := s.Costs(context.Background(), CostsRequest{From: from, To: from.AddDate(0, 1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Currency != "USD" || !c.Total.IsZero() || len(c.Users) != 0 || len(c.TopJobs) != 0 {
		t.Errorf("an empty month: currency %q, total %s, %d users, %d jobs", c.Currency, c.Total, len(c.Users), len(c.TopJobs))
	}
}
