package infrastore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

// focusClaims are the applicability criteria of FOCUS 1.2 that corral's
// features imply (the README's FOCUS section says why each).
var focusClaims = []string{
	"UNIT_PRICING_SUPPORTED",                           // a price per core-hour, GiB-hour, GPU-hour
	"PUBLIC_PRICE_LIST_SUPPORTED",                      // price sheets are events every user can read
	"SUB_ACCOUNT_SUPPORTED",                            // users, or a label's values
	"TAGGING_SUPPORTED",                                // job labels
	"REGION_SUPPORTED",                                 // the cell
	"USAGE_MEASUREMENT_SUPPORTED",                      // agents measure usage
	"RESOURCE_TYPE_ASSIGNMENT_SUPPORTED",               // tasks, jobs, idle capacity
	"BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED", // bands priced on their limit or reservation
}

// focusShouldsNotMet are the SHOULD (and RECOMMENDED) rules an export does
// not meet, with why; the README lists them. A SHOULD failing that is not
// here fails the test, and so does one here that nothing fails.
var focusShouldsNotMet = map[string]string{}

// TestFocusRules holds FOCUS exports of generated cells, in every variant
// (per task and per job; idle capacity separate, shared and left out;
// sub-accounts by user and by label; CSV and Parquet), each across a closed
// month with corrections and price changes that take effect mid-hour, to
// every rule of the FinOps Foundation's model-1.2.json that applies under
// focusClaims: no MUST may fail.
func TestFocusRules(t *testing.T) {
	m := loadFocusModel(t)
	ctx := context.Background()
	rt := &ruleTally{total: map[string]map[string]int{}, failed: map[string]*ruleFailure{}, failedIn: map[string]int{}}
	dir := t.TempDir()
	seeds := []uint64{17, 29}
	if testing.Short() {
		seeds = seeds[:1] // -short: one cell's 24 exports of the 48
	}
	exports := 0
	for _, seed := range seeds {
		h := billingHistorySeed(t, seed)
		s := openStore(t, Options{})
		if _, err := s.CatchUp(ctx, newSQLiteLog(t, h.evs)); err != nil {
			t.Fatal(err)
		}
		for _, req := range focusVariants(h) {
			name := fmt.Sprintf("seed %d, %s, idle %s, account %s, %s", seed, req.Granularity, req.Idle, req.AccountBy, req.Format)
			data := exportFocus(t, s, req)
			var d *focusDataset
			if req.Format == FormatCSV {
				d = csvDataset(t, name, data)
			} else {
				d = parquetDataset(t, name, filepath.Join(dir, "focus.parquet"), data)
			}
			checkVariant(t, d, req)
			rt.add(evaluateFocus(t, m, d, focusClaims))
			exports++
		}
	}
	shouldFailed := map[string]bool{}
	for _, id := range rt.failedIDs {
		f := rt.failed[id]
		switch keywordStrength(m.ModelRules[id].ValidationCriteria.Keyword) {
		case 3:
			t.Errorf("fails in %d of %d exports: %s", rt.failedIn[id], exports, f.text)
		case 2:
			shouldFailed[id] = true
			if _, known := focusShouldsNotMet[id]; !known {
				t.Errorf("a SHOULD not listed as unmet, in %d of %d exports: %s", rt.failedIn[id], exports, f.text)
			}
		}
	}
	for id := range focusShouldsNotMet {
		if !shouldFailed[id] {
			t.Errorf("%s is listed as not met, and every export meets it", id)
		}
	}
	// What needs judgement is named, not passed.
	slices.Sort(rt.dynamic)
	t.Logf("%d rules that apply are Dynamic, not checkable mechanically: %s", len(rt.dynamic), strings.Join(rt.dynamic, " "))
	// The counts over every export, per keyword.
	for _, k := range slices.Sorted(maps.Keys(rt.total)) {
		t.Logf("%-11s %v", k, rt.total[k])
	}
	if rt.total["MUST"]["passed"] == 0 {
		t.Fatal("no MUST rule was checked")
	}
}

// focusVariants are the exports of h's January and February TestFocusRules
// checks: every granularity, idle mode, account and format.
func focusVariants(h billingLog) []FocusRequest {
	var out []FocusRequest
	for _, gran := range []string{"task", "job"} {
		for _, idle := range []string{IdleSeparate, IdleShare, IdleNone} {
			for _, account := range []string{"user", "label:team"} {
				for _, format := range []string{FormatCSV, FormatParquet} {
					out = append(out, FocusRequest{From: h.jan, To: h.mar, Cell: "cell-a", Granularity: gran, Idle: idle, AccountBy: account, Format: format})
				}
			}
		}
	}
	return out
}

// ruleTally adds up the rules' outcomes over several exports.
type ruleTally struct {
	total     map[string]map[string]int // by keyword and status
	failed    map[string]*ruleFailure   // the first failure of each rule
	failedIn  map[string]int            // in how many exports each rule failed
	failedIDs []string                  // in the order they first failed
	dynamic   []string                  // the rules that apply and are Dynamic (of the first export)
}

func (rt *ruleTally) add(e *focusEvaluation) {
	if rt.dynamic == nil {
		for id, o := range e.outcomes {
			if o.status == "dynamic" {
				rt.dynamic = append(rt.dynamic, id)
			}
		}
	}
	counts, failures := e.report()
	for k, byStatus := range counts {
		if rt.total[k] == nil {
			rt.total[k] = map[string]int{}
		}
		for st, n := range byStatus {
			rt.total[k][st] += n
		}
	}
	for _, f := range failures {
		if rt.failed[f.id] == nil {
			rt.failed[f.id] = &f
			rt.failedIDs = append(rt.failedIDs, f.id)
		}
		rt.failedIn[f.id]++
	}
}

// checkVariant makes sure an export is the variant it was asked for, so
// that every rule is held to rows of each kind.
func checkVariant(t *testing.T, d *focusDataset, req FocusRequest) {
	t.Helper()
	if d.rows == 0 {
		t.Fatalf("%s: no rows", d.name)
	}
	kinds := map[string]bool{}
	// What the model leaves to judgement (Dynamic) of SkuPriceDetails and
	// SkuMeter, held here: the same details and meter for every row of a
	// SkuPriceId, and only provider-defined (x_) keys, as corral defines
	// no FOCUS property of its SKUs.
	details, meter := map[string]string{}, map[string]string{}
	for i := 0; i < d.rows; i++ {
		id, ok := d.value("SkuPriceId", i)
		if !ok {
			continue
		}
		det, _ := d.value("SkuPriceDetails", i)
		met, _ := d.value("SkuMeter", i)
		if prev, seen := details[id]; seen && (prev != det || meter[id] != met) {
			t.Errorf("%s: SkuPriceId %s has details %s and meter %s, and elsewhere %s and %s", d.name, id, det, met, prev, meter[id])
		}
		details[id], meter[id] = det, met
		var props map[string]any
		if err := json.Unmarshal([]byte(det), &props); err != nil {
			t.Fatalf("%s: SkuPriceDetails %q: %v", d.name, det, err)
		}
		for k := range props {
			if !strings.HasPrefix(k, "x_") {
				t.Errorf("%s: SkuPriceDetails key %q is not x_-prefixed", d.name, k)
			}
		}
	}
	for i := 0; i < d.rows; i++ {
		for _, c := range []string{"ResourceType", "ChargeClass"} {
			if v, ok := d.value(c, i); ok {
				kinds[v] = true
			}
		}
	}
	want := []string{"Correction", map[string]string{"task": "Task", "job": "Job"}[req.Granularity]}
	if req.Idle == IdleSeparate {
		want = append(want, "Idle capacity")
	}
	for _, k := range want {
		if !kinds[k] {
			t.Errorf("%s: no row of %s (kinds: %v)", d.name, k, slices.Sorted(maps.Keys(kinds)))
		}
	}
}

// parquetDataset reads a Parquet export with DuckDB: each column's type as
// the file declares it, its values as text.
func parquetDataset(t *testing.T, name, path string, data []byte) *focusDataset {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src := "read_parquet(" + sqlString(path) + ")"
	rows, err := db.Query("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM " + src + ")")
	if err != nil {
		t.Fatal(err)
	}
	var names, types []string
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		names, types = append(names, n), append(types, ty)
	}
	rows.Close()
	sel := make([]string, len(names))
	for i, n := range names {
		sel[i] = fmt.Sprintf("%q::VARCHAR", n)
	}
	rows, err = db.Query("SET TimeZone = 'UTC'; SELECT " + strings.Join(sel, ", ") + " FROM " + src)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	d := &focusDataset{name: name, typed: true, cols: map[string]*datasetColumn{}}
	cols := make([]*datasetColumn, len(names))
	for i, n := range names {
		cols[i] = &datasetColumn{typ: types[i]}
		d.cols[n] = cols[i]
	}
	vals := make([]sql.NullString, len(names))
	dest := make([]any, len(names))
	for i := range vals {
		dest[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			cols[i].vals = append(cols[i].vals, v.String)
			cols[i].null = append(cols[i].null, !v.Valid)
		}
		d.rows++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestFocusRulesCatchBreaches breaks a conforming export in the ways the
// rules forbid, one at a time, and expects the evaluator to name the rule
// each breaks: an evaluator that passes everything proves nothing.
func TestFocusRulesCatchBreaches(t *testing.T) {
	m := loadFocusModel(t)
	h := billingHistory(t)
	s := openStore(t, Options{})
	if _, err := s.CatchUp(context.Background(), newSQLiteLog(t, h.evs)); err != nil {
		t.Fatal(err)
	}
	data := exportFocus(t, s, FocusRequest{From: h.jan, To: h.mar, Cell: "cell-a"})
	// set changes col in the first row that has a value of it.
	set := func(col, v string) func(d *focusDataset) {
		return func(d *focusDataset) {
			c := d.cols[col]
			i := max(0, slices.Index(c.null, false))
			c.vals[i], c.null[i] = v, v == ""
		}
	}
	for _, breach := range []struct {
		what  string
		rule  string
		apply func(d *focusDataset)
	}{
		{"the export as it is", "", func(*focusDataset) {}},
		{"a provider other than the invoice issuer, charging", "BilledCost-C-005-C", set("ProviderName", "corral")},
		{"no SkuMeter", "CostAndUsage-D-059-C", func(d *focusDataset) { delete(d.cols, "SkuMeter") }},
		{"no SkuPriceDetails", "CostAndUsage-D-061-C", func(d *focusDataset) { delete(d.cols, "SkuPriceDetails") }},
		{"SkuPriceDetails an array", "SkuPriceDetails-C-001-M", set("SkuPriceDetails", `["x_Band"]`)},
		{"a null ServiceSubcategory", "ServiceSubcategory-C-002-M", set("ServiceSubcategory", "")},
		{"a ServiceSubcategory of another category", "ServiceSubcategory-C-004-M", set("ServiceSubcategory", "Databases")},
		{"a cost in words", "BilledCost-C-004-M", set("BilledCost", "one dollar")},
		{"a local time", "ChargePeriodStart-C-002-M", set("ChargePeriodStart", "2026-01-31T21:00:00+01:00")},
		{"a list cost that is not price times quantity", "ListCost-C-009-C", set("ListCost", "12345")},
		{"a negative list price", "ListUnitPrice-C-008-M", set("ListUnitPrice", "-1")},
		{"a currency that is not ISO 4217", "BillingCurrency-C-006-M", set("BillingCurrency", "XYZ")},
		{"Tags not an object", "Tags-C-001-M", set("Tags", `{"team":{"a":1}}`)},
		{"a charge category FOCUS does not define", "ChargeCategory-C-003-M", set("ChargeCategory", "Rental")},
		{"a SkuPriceId of two SKUs", "SkuPriceId-C-008-M", func(d *focusDataset) {
			id, _ := d.value("SkuPriceId", 0)
			for i := 1; i < d.rows; i++ {
				if v, _ := d.value("SkuPriceId", i); v != id {
					d.cols["SkuPriceId"].vals[i] = id
					return
				}
			}
		}},
		{"a SubAccountName without its SubAccountId", "SubAccountName-C-004-C", set("SubAccountId", "")},
	} {
		t.Run(breach.what, func(t *testing.T) {
			d := csvDataset(t, breach.what, data)
			breach.apply(d)
			_, failures := evaluateFocus(t, m, d, focusClaims).report()
			var must []string
			for _, f := range failures {
				if keywordStrength(m.ModelRules[f.id].ValidationCriteria.Keyword) == 3 {
					must = append(must, f.id)
				}
			}
			switch {
			case breach.rule == "" && len(must) > 0:
				t.Errorf("%s: fails %v", breach.what, must)
			case breach.rule != "" && !slices.Contains(must, breach.rule):
				t.Errorf("%s: %s does not fail (failing: %v)", breach.what, breach.rule, must)
			}
		})
	}
}
