package infrastore

// The FOCUS export's columns and their CSV text, computed by DuckDB.

import (
	"fmt"
	"slices"
	"strings"
)

// focusColumn is one column of the export: its FOCUS name, its SQL over
// a row of focusRows (r, joined to its sheet's currency and its period's
// closing), and its kind, which sets its text in CSV and its type in
// Parquet.
//
// A column is the same for each of a row's meters unless its SQL names
// r.meter, r.pricing_q, r.consumed_q or r.price, which stand for the
// meter's own; such columns are computed per line, the others once per row.
// Free text that depends on the meter is split into a part that does not
// (expr) and literal-like parts that do (prefix, suffix), so the row's text
// is checked for quoting once.
type focusColumn struct {
	name, expr     string
	kind           byte // t: date/time, c: cost DECIMAL(38,18), q: quantity DECIMAL(38,9), p: price DECIMAL(18,9), i: BIGINT, s: a string CSV never quotes, f: free text
	prefix, suffix string
}

// costExpr is a line's cost: DECIMAL(38,9) quantity x DECIMAL(18,9)
// price, a DECIMAL(38,18) exactly.
const costExpr = "(r.pricing_q * r.price)"

// unitExpr names a meter's unit, in FOCUS's unit format.
const unitExpr = "CASE r.meter WHEN 'cpu' THEN 'Core-Hours' WHEN 'gpu' THEN 'GPU-Hours' ELSE 'GiB-Hours' END"

// skuMeterExpr is what a SKU meters: a meter's resource.
const skuMeterExpr = "CASE r.meter WHEN 'cpu' THEN 'CPU' WHEN 'memory' THEN 'Memory' WHEN 'disk' THEN 'Disk' ELSE 'GPU' END"

// skuPriceDetailsExpr is the properties of a SKU price (a band's, or
// idle capacity's, price of a meter in one sheet) as FOCUS's key-value
// JSON: the band and the basis it is billed on, which the sheet fixes for
// the band, so every row of a SkuPriceId has the same details. Null when
// no sheet priced the row, as its SkuPriceId is. The band's name is a
// known word, so it needs no JSON escaping.
const skuPriceDetailsExpr = `CASE WHEN r.sheet_position IS NULL THEN NULL
	ELSE '{"x_Band":"' || coalesce(r.band, 'capacity') || '","x_Basis":"' || r.basis || '"}' END`

func focusColumns(cell string) []focusColumn {
	c := sqlString(cell)
	// The cell's name is the one free text of these columns; quote it in
	// CSV only when it needs it.
	var cellKind byte = 's'
	if strings.ContainsAny(cell, ",\"\r\n") {
		cellKind = 'f'
	}
	return []focusColumn{
		{name: "BilledCost", expr: costExpr, kind: 'c'},
		{name: "BillingAccountId", expr: c, kind: cellKind},
		{name: "BillingAccountName", expr: c, kind: cellKind},
		{name: "BillingCurrency", expr: "coalesce(r.currency, 'USD')", kind: 's'},
		{name: "BillingPeriodEnd", expr: "r.period_end", kind: 't'},
		{name: "BillingPeriodStart", expr: "r.period_start", kind: 't'},
		{name: "ChargeCategory", expr: "'Usage'", kind: 's'},
		{name: "ChargeClass", expr: "r.charge_class", kind: 's'},
		{name: "ChargeDescription", kind: 'f',
			prefix: `CASE r.meter WHEN 'cpu' THEN 'CPU core-hours' WHEN 'memory' THEN 'Memory GiB-hours'
			WHEN 'disk' THEN 'Disk GiB-hours' ELSE 'GPU-hours' END`,
			expr: `' of ' || r.resource_id ||
			CASE WHEN r.band IS NULL THEN ' that nothing reserved or used' ELSE ' (' || r.band || ' on its ' || r.basis || ')' END ||
			CASE WHEN r.charge_class IS NULL THEN '' ELSE ', correcting ' || r.corrects_name END`},
		{name: "ChargeFrequency", expr: "'Usage-Based'", kind: 's'},
		{name: "ChargePeriodEnd", expr: "r.hour_end", kind: 't'},
		{name: "ChargePeriodStart", expr: "r.hour_start", kind: 't'},
		{name: "ConsumedQuantity", expr: "r.consumed_q", kind: 'q'},
		{name: "ConsumedUnit", expr: unitExpr, kind: 's'},
		{name: "ContractedCost", expr: costExpr, kind: 'c'},
		{name: "ContractedUnitPrice", expr: "r.price", kind: 'p'},
		{name: "EffectiveCost", expr: costExpr, kind: 'c'},
		{name: "InvoiceId", expr: c + " || '-' || r.period_name", kind: cellKind},
		{name: "InvoiceIssuerName", expr: c, kind: cellKind},
		{name: "ListCost", expr: costExpr, kind: 'c'},
		{name: "ListUnitPrice", expr: "r.price", kind: 'p'},
		{name: "PricingCategory", expr: "'Standard'", kind: 's'},
		{name: "PricingQuantity", expr: "r.pricing_q", kind: 'q'},
		{name: "PricingUnit", expr: unitExpr, kind: 's'},
		// The cell makes its machines available, runs the tasks on them
		// and bills them: provider, publisher and invoice issuer, as for a
		// cloud's own services. (A provider other than the issuer would be a
		// marketplace charge, whose BilledCost FOCUS requires to be 0.)
		{name: "ProviderName", expr: c, kind: cellKind},
		{name: "PublisherName", expr: c, kind: cellKind},
		{name: "RegionId", expr: c, kind: cellKind},
		{name: "RegionName", expr: c, kind: cellKind},
		{name: "ResourceId", expr: "r.resource_id", kind: 'f'},
		{name: "ResourceName", expr: "r.resource_id", kind: 'f'},
		{name: "ResourceType", expr: "r.resource_type", kind: 's'},
		{name: "ServiceCategory", expr: "'Compute'", kind: 's'},
		{name: "ServiceName", expr: "'corral'", kind: 's'},
		// FOCUS's subcategory of Compute for "management and orchestration
		// of containerized compute platforms".
		{name: "ServiceSubcategory", expr: "'Containers'", kind: 's'},
		{name: "SkuId", expr: "'corral/' || coalesce(r.band, 'capacity') || '/' || r.meter", kind: 's'},
		{name: "SkuMeter", expr: skuMeterExpr, kind: 's'},
		{name: "SkuPriceId", expr: "'corral/' || coalesce(r.band, 'capacity') || '/' || r.meter || '@' || r.sheet_position", kind: 's'},
		{name: "SkuPriceDetails", expr: skuPriceDetailsExpr, kind: 'f'},
		{name: "SubAccountId", expr: "r.account", kind: 'f'},
		{name: "SubAccountName", expr: "r.account", kind: 'f'},
		{name: "SubAccountType", expr: "CASE WHEN r.account IS NULL THEN NULL ELSE r.account_type END", kind: 's'},
		{name: "Tags", expr: "r.tags", kind: 'f'},
		{name: "x_Band", expr: "r.band", kind: 's'},
		{name: "x_Priority", expr: "r.priority", kind: 'i'},
		{name: "x_Basis", expr: "r.basis", kind: 's'},
		{name: "x_Meter", expr: "r.meter", kind: 's'},
		{name: "x_PriceSheetPosition", expr: "r.sheet_position", kind: 'i'},
		{name: "x_JobSpecPosition", expr: "r.spec_position", kind: 'i'},
		{name: "x_UsagePositionFirst", expr: "r.pfirst", kind: 'i'},
		{name: "x_UsagePositionLast", expr: "r.plast", kind: 'i'},
		{name: "x_UsageWindows", expr: "r.windows", kind: 'i'},
		{name: "x_CorrectsBillingPeriodStart", expr: "CASE WHEN r.charge_class IS NULL THEN NULL ELSE r.corrects_start END", kind: 't'},
		{name: "x_BillingPeriodClosedAt", expr: "r.closed_at", kind: 'i'},
		{name: "x_RowId", expr: rowKey, kind: 'f', suffix: "'|' || r.meter"},
	}
}

// meterRefs are the names a column's SQL uses for its meter's own values.
var meterRefs = []string{"r.meter", "r.pricing_q", "r.consumed_q", "r.price"}

func (c focusColumn) perMeter() bool {
	if c.prefix != "" || c.suffix != "" {
		return true
	}
	for _, ref := range meterRefs {
		if strings.Contains(c.expr, ref) {
			return true
		}
	}
	return false
}

// forMeter is sql with the meter's own values in place of meterRefs.
func forMeter(sql, meter string) string {
	return strings.NewReplacer("r.meter", sqlString(meter), "r.pricing_q", "r."+meter+"_q",
		"r.consumed_q", "r."+meter+"_c", "r.price", "r."+meter+"_p").Replace(sql)
}

// needsQuoting is true when CSV text v must be quoted.
// (Four memchr-like scans cost half of one regular expression.)
func needsQuoting(v string) string {
	return "(contains(" + v + ", ',') OR contains(" + v + ", '\"') OR contains(" + v + ", chr(10)) OR contains(" + v + ", chr(13)))"
}

// rowKey is a row's identity before its meter, computed alike for a row
// and for each window that went into it (--explain).
const rowKey = `concat_ws('|', r.period_name, coalesce(r.charge_class, 'Regular'), r.hour_start, r.resource_id, coalesce(r.account, ''), coalesce(r.band, ''),
		coalesce(r.priority::VARCHAR, ''), r.basis, coalesce(r.sheet_position::VARCHAR, ''), coalesce(r.spec_position::VARCHAR, ''))`

// csvText renders the column's value v as CSV text. Times are text
// already (isoTime), and the numbers are of their kind's type (the
// quantities, prices and costs are built so), so both are plain; free text
// is quoted when it holds a comma, a quote or a line break. NULL is the
// empty field.
func (c focusColumn) csvText(v string) string {
	switch c.kind {
	case 't', 's':
		return "coalesce(" + v + ", '')"
	case 'f':
		return "coalesce(CASE WHEN " + needsQuoting(v) + " THEN '\"' || replace(" + v + ", '\"', '\"\"') || '\"' ELSE " + v + " END, '')"
	case 'q':
		// A DECIMAL(38,9) is a 128-bit integer, which DuckDB turns into
		// text seven times slower than the 64-bit one of a DECIMAL(18,9):
		// the same text, for every quantity under a billion.
		return "coalesce(CASE WHEN " + v + " < 1000000000 AND " + v + " > -1000000000 THEN CAST(CAST(" + v +
			" AS DECIMAL(18,9)) AS VARCHAR) ELSE CAST(" + v + " AS VARCHAR) END, '')"
	}
	return "coalesce(CAST(" + v + " AS VARCHAR), '')"
}

// parquetType is the column's type in the Parquet file.
func (c focusColumn) parquetType() string {
	switch c.kind {
	case 't':
		return "TIMESTAMPTZ"
	case 'c':
		return "DECIMAL(38,18)"
	case 'q':
		return "DECIMAL(38,9)"
	case 'p':
		return "DECIMAL(18,9)"
	case 'i':
		return "BIGINT"
	}
	return "VARCHAR"
}

// focusQuery is the whole export as CSV lines in a fixed order: DuckDB
// sorts the rows by their identity while they are narrow, computes the
// text of the columns that do not depend on the meter once per row, and
// returns a column per meter: the row's line for the meter, or NULL when
// it has no quantity of it. Go only copies the lines out, in column order.
// (Unnesting the lines into rows in DuckDB, or joining a row's lines into
// one value, measured slower: both copy every line again.)
func focusQuery(r *FocusRequest, in *focusInputs, sl focusSlice) string {
	cols := focusColumns(r.Cell)
	var values, shared []string // per row: column values, then runs of their CSV text
	lines := make([][]string, len(meters))
	meterTexts := map[string]string{}      // a per-meter text's SQL -> its alias
	present := make([]string, len(meters)) // the row has a line of the meter
	for m, meter := range meters {
		present[m] = "(r." + meter + "_q > 0 OR r." + meter + "_c > 0)"
	}
	var run []string
	flush := func() {
		if len(run) > 0 {
			shared = append(shared, csvJoin(run)+fmt.Sprintf(" AS t%d", len(shared)))
			for m := range meters {
				lines[m] = append(lines[m], fmt.Sprintf("t%d", len(shared)-1))
			}
			run = nil
		}
	}
	for i, c := range cols {
		v := fmt.Sprintf("v%d", i)
		switch {
		case !c.perMeter():
			values = append(values, c.expr+" AS "+v)
			run = append(run, c.csvText(v))
		case c.kind == 'f':
			// The meter's part never needs quoting: the row's part decides.
			flush()
			values = append(values, c.expr+" AS "+v)
			shared = append(shared, "replace("+v+", '\"', '\"\"') AS "+v+"e", needsQuoting(v)+" AS "+v+"q")
			for m, meter := range meters {
				text := forMeter(strings.Join(nonEmpty(c.prefix, v+"e", c.suffix), " || "), meter)
				lines[m] = append(lines[m], "CASE WHEN "+v+"q THEN '\"' || "+text+" || '\"' ELSE coalesce("+text+", '') END")
			}
		default:
			// Computed once per row and meter, however many columns
			// repeat it (the four costs, the two prices and units).
			flush()
			for m, meter := range meters {
				text := forMeter(c.csvText(c.expr), meter)
				if !strings.Contains(text, "r.") {
					// A constant for the meter (its unit, its name): DuckDB folds it.
					lines[m] = append(lines[m], text)
					continue
				}
				alias, ok := meterTexts[text]
				if !ok {
					alias = fmt.Sprintf("m%d", len(meterTexts))
					meterTexts[text] = alias
					shared = append(shared, "CASE WHEN "+present[m]+" THEN "+text+" END AS "+alias)
				}
				lines[m] = append(lines[m], alias)
			}
		}
	}
	flush()
	perMeter := make([]string, len(meters))
	for m := range meters {
		perMeter[m] = "CASE WHEN " + present[m] + " THEN " + csvJoin(lines[m]) + " END AS " + meters[m]
	}
	task := ""
	if r.Granularity == "task" {
		task = "task_index NULLS FIRST, "
	}
	return focusRows(r, in, sl, false) + `,
ordered AS (
	SELECT * FROM rows
	ORDER BY billing_period, hour, user NULLS FIRST, job NULLS FIRST, ` + task + `account NULLS FIRST, band NULLS FIRST,
		priority, sheet_position, spec_position, charge_class NULLS FIRST
),
valued AS (SELECT r.*, ` + strings.Join(values, ", ") + ` FROM ordered r),
texts AS (SELECT r.*, ` + strings.Join(shared, ", ") + ` FROM valued r),
lines AS (SELECT ` + strings.Join(perMeter, ",\n\t") + ` FROM texts r)
SELECT * FROM lines`
}

// csvJoin is the SQL of fields joined by commas, in one allocation (a
// chain of || copies the growing line once per field). No field is NULL.
func csvJoin(fields []string) string {
	if len(fields) == 1 {
		return fields[0]
	}
	return "concat_ws(',', " + strings.Join(fields, ", ") + ")"
}

func nonEmpty(parts ...string) []string {
	return slices.DeleteFunc(parts, func(p string) bool { return p == "" })
}
