package infrastore

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FocusRequest asks for a FOCUS export (the FinOps Open Cost and Usage
// Specification) of the charges of [From, To).
type FocusRequest struct {
	// From and To bound the charge periods exported; both whole hours,
	// UTC. Correction rows are exported with the billing period they are
	// billed in: those whose billing period starts in [From, To).
	From, To time.Time
	// Cell names the billing account and the region.
	Cell string
	// Granularity is "task" (the default: a row per task, hour and meter)
	// or "job".
	Granularity string
	// AccountBy is "user" (the default) or "label:KEY": the SubAccount.
	AccountBy string
	// Idle is "separate" (the default: rows of their own), "share" (shared
	// among the accounts in proportion to what they were charged in the
	// hour) or "none".
	Idle string
	// Format is "csv" (the default) or "parquet".
	Format string
	// Explain, when set to a row's x_RowId, returns instead the usage
	// windows that row was computed from, with the sheet that priced them.
	Explain string
}

// Idle cost modes.
const (
	IdleNone     = "none"
	IdleSeparate = "separate"
	IdleShare    = "share"
)

const hourUS = int64(time.Hour / time.Microsecond)

func (r *FocusRequest) validate() error {
	switch {
	case r.From.IsZero():
		return fmt.Errorf("%w: from: must be set", ErrInvalid)
	case r.To.IsZero():
		return fmt.Errorf("%w: to: must be set", ErrInvalid)
	case !r.From.Before(r.To):
		return fmt.Errorf("%w: to: %s is not after from (%s)", ErrInvalid, r.To.UTC().Format(time.RFC3339), r.From.UTC().Format(time.RFC3339))
	case r.From.UnixMicro()%hourUS != 0:
		return fmt.Errorf("%w: from: %s is not a whole hour (charge periods are hours, UTC)", ErrInvalid, r.From.UTC().Format(time.RFC3339Nano))
	case r.To.UnixMicro()%hourUS != 0:
		return fmt.Errorf("%w: to: %s is not a whole hour (charge periods are hours, UTC)", ErrInvalid, r.To.UTC().Format(time.RFC3339Nano))
	case r.To.Sub(r.From) > 366*24*time.Hour:
		return fmt.Errorf("%w: to: the period is longer than a year; export it a month at a time", ErrInvalid)
	}
	if r.Cell == "" {
		r.Cell = "corral"
	}
	switch r.Granularity {
	case "":
		r.Granularity = "task"
	case "task", "job":
	default:
		return fmt.Errorf("%w: granularity: %q is not task or job", ErrInvalid, r.Granularity)
	}
	switch {
	case r.AccountBy == "":
		r.AccountBy = "user"
	case r.AccountBy == "user":
	case strings.HasPrefix(r.AccountBy, "label:") && len(r.AccountBy) > len("label:") && len(r.AccountBy) <= 70:
	default:
		return fmt.Errorf("%w: account_by: %q is not user or label:KEY (e.g. label:team)", ErrInvalid, r.AccountBy)
	}
	switch r.Idle {
	case "":
		r.Idle = IdleSeparate
	case IdleNone, IdleSeparate, IdleShare:
	default:
		return fmt.Errorf("%w: idle: %q is not none, separate or share", ErrInvalid, r.Idle)
	}
	switch r.Format {
	case "", FormatCSV:
		r.Format = FormatCSV
	case FormatParquet:
	default:
		return fmt.Errorf("%w: format: %q is not csv or parquet", ErrInvalid, r.Format)
	}
	if len(r.Explain) > 1024 {
		return fmt.Errorf("%w: explain: a row id is at most 1024 bytes", ErrInvalid)
	}
	return nil
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// focusRows is the SQL of the export's rows before formatting: one row per
// billing period, charge hour, resource, account, band, priority, sheet,
// charge class and meter, with its quantities, prices and citations. Every
// input is an immutable row of the log (task_usage by its position, the
// sheets and closings as events), so a closed period's rows are the same
// whenever and wherever they are computed.
func focusRows(r *FocusRequest, horizon int64) string {
	from, to := r.From.UnixMicro(), r.To.UnixMicro()
	resource := "u.user || '/' || u.job || '/' || u.task_index"
	resourceType := "'Task'"
	if r.Granularity == "job" {
		resource, resourceType = "u.user || '/' || u.job", "'Job'"
	}
	account, accountType := "u.user", "'User'"
	if key, ok := strings.CutPrefix(r.AccountBy, "label:"); ok {
		account, accountType = "js.labels["+sqlString(key)+"]", sqlString("Label "+key)
	}
	idle := ""
	if r.Idle != IdleNone {
		idle = idleRows(r, from, min(to, horizon))
	}
	return fmt.Sprintf(`
WITH closed AS (SELECT period_start, period_end, closed_at FROM billing_periods_closed),
w AS (
	SELECT u.*, u.start_time // %[3]d * %[3]d AS hour,
		epoch_us(date_trunc('month', make_timestamp(u.start_time))) AS period, c.closed_at
	FROM priced_usage u
	LEFT JOIN closed c ON c.period_start = epoch_us(date_trunc('month', make_timestamp(u.start_time)))
	WHERE u.start_time < %[2]d
),
late AS (
	SELECT w.*, greatest(epoch_us(date_trunc('month', e.time)),
		epoch_us(make_timestamp(w.period) + INTERVAL 1 MONTH)) AS lower
	FROM w JOIN events e ON e.position = w.position
	WHERE w.closed_at IS NOT NULL AND w.position > w.closed_at
),
billed AS (
	SELECT w.*, w.period AS billing_period, NULL::VARCHAR AS charge_class
	FROM w WHERE (w.closed_at IS NULL OR w.position <= w.closed_at) AND w.start_time >= %[1]d
	UNION ALL
	SELECT * EXCLUDE (lower), (
		SELECT min(x.cand) FROM (SELECT late.lower AS cand UNION ALL SELECT c.period_end FROM closed c WHERE c.period_end > late.lower) x
		WHERE NOT EXISTS (SELECT 1 FROM closed c2 WHERE c2.period_start = x.cand AND c2.closed_at < late.position)
	) AS billing_period, 'Correction' AS charge_class
	FROM late
),
sel AS (
	-- The labels' map keeps the order they were appended in, which a Go
	-- map does not fix: sort them, so a row's tags are the same text on
	-- every store.
	SELECT u.*, %[4]s AS resource_id, %[6]s AS account, to_json(map_from_entries(list_sort(map_entries(js.labels))))::VARCHAR AS tags
	FROM billed u
	LEFT JOIN job_specs js ON js.position = u.spec_position
	WHERE (u.charge_class IS NULL AND u.start_time >= %[1]d AND u.start_time < %[2]d)
		OR (u.charge_class IS NOT NULL AND u.billing_period >= %[1]d AND u.billing_period < %[2]d)
),
g AS (
	SELECT billing_period, charge_class, hour, period AS corrects, resource_id, %[5]s AS resource_type,
		account, %[7]s AS account_type, billed_band AS band, priority, basis, sheet_position, tags,
		sum(cpu_core_hours) AS cpu_q, sum(memory_gib_hours) AS memory_q, sum(disk_gib_hours) AS disk_q, sum(gpu_hours) AS gpu_q,
		sum(cpu_usage_core_hours) AS cpu_c, sum(memory_usage_gib_hours) AS memory_c, sum(disk_gib_hours) AS disk_c, sum(gpu_hours) AS gpu_c,
		any_value(cpu_price) AS cpu_p, any_value(memory_price) AS memory_p, any_value(disk_price) AS disk_p, any_value(gpu_price) AS gpu_p,
		min(position) AS pfirst, max(position) AS plast, count(*) AS windows, count(DISTINCT (user, job, task_index)) AS tasks
	FROM sel AS u
	GROUP BY ALL
),
usage_rows AS (
	SELECT g.*, m.meter,
		CASE m.meter WHEN 'cpu' THEN cpu_q WHEN 'memory' THEN memory_q WHEN 'disk' THEN disk_q ELSE gpu_q END AS pricing_q,
		CASE m.meter WHEN 'cpu' THEN cpu_c WHEN 'memory' THEN memory_c WHEN 'disk' THEN disk_c ELSE gpu_c END AS consumed_q,
		CASE m.meter WHEN 'cpu' THEN cpu_p WHEN 'memory' THEN memory_p WHEN 'disk' THEN disk_p ELSE gpu_p END AS price
	FROM g, (SELECT unnest(['cpu', 'memory', 'disk', 'gpu']) AS meter) m
),
charges AS (
	SELECT billing_period, charge_class, hour, corrects, resource_id, resource_type, account, account_type, band, priority,
		basis, sheet_position, tags, meter, pricing_q::DECIMAL(38,9) AS pricing_q, consumed_q::DECIMAL(38,9) AS consumed_q, price,
		pfirst, plast, windows, tasks
	FROM usage_rows WHERE pricing_q > 0 OR consumed_q > 0
)%[8]s`, from, to, hourUS, resource, resourceType, account, accountType, idle)
}

// idleRows extends focusRows with the idle capacity of the hours
// [from, horizon): what the machines not removed could hold, priced by the
// sheet's machine prices, less what the charges of the hour took on their
// basis. "separate" adds a row per hour and meter; "share" splits each
// hour's idle quantity among the hour's accounts in proportion to what
// they were charged (largest remainder, in units of 1e-9, so the shares
// add up to the idle quantity exactly).
func idleRows(r *FocusRequest, from, horizon int64) string {
	cell := sqlString(r.Cell)
	share := ""
	if r.Idle == IdleShare {
		share = `,
weights AS (
	SELECT hour, account, any_value(account_type) AS account_type,
		round(sum(pricing_q * price) * 1000000000000)::HUGEINT AS w12
	FROM charges WHERE charge_class IS NULL AND account IS NOT NULL GROUP BY hour, account
),
shares AS (
	SELECT i.hour, i.meter, w.account, w.account_type, i.units, i.price, i.sheet_position, w.w12,
		sum(w.w12) OVER (PARTITION BY i.hour, i.meter) AS total12
	FROM idle_units i JOIN weights w ON w.hour = i.hour
),
split AS (
	SELECT *, (units * w12) // total12 AS base, (units * w12) % total12 AS rem FROM shares WHERE total12 > 0
),
ranked AS (
	SELECT *, units - sum(base) OVER (PARTITION BY hour, meter) AS leftover,
		row_number() OVER (PARTITION BY hour, meter ORDER BY rem DESC, account) AS rk
	FROM split
),
idle_final AS (
	SELECT hour, meter, account, account_type, price, sheet_position,
		((base + CASE WHEN rk <= leftover THEN 1 ELSE 0 END)::DECIMAL(38,0) * 0.000000001::DECIMAL(10,9))::DECIMAL(38,9) AS q
	FROM ranked
	UNION ALL
	SELECT hour, meter, NULL, NULL, price, sheet_position, (units::DECIMAL(38,0) * 0.000000001::DECIMAL(10,9))::DECIMAL(38,9)
	FROM idle_units i WHERE NOT EXISTS (SELECT 1 FROM weights w WHERE w.hour = i.hour AND w.w12 > 0)
)`
	} else {
		share = `,
idle_final AS (
	SELECT hour, meter, NULL::VARCHAR AS account, NULL::VARCHAR AS account_type, price, sheet_position,
		(units::DECIMAL(38,0) * 0.000000001::DECIMAL(10,9))::DECIMAL(38,9) AS q
	FROM idle_units
)`
	}
	return fmt.Sprintf(`,
hours AS (SELECT unnest(range(%[1]d::BIGINT, %[2]d::BIGINT, %[3]d::BIGINT)) AS hour),
mi AS (
	SELECT machine, time AS t0, coalesce(lead(time) OVER (PARTITION BY machine ORDER BY position), %[2]d) AS t1,
		state, cpu_milli, memory_bytes, disk_bytes, gpu_milli
	FROM machine_events WHERE source = 'log'
),
cap AS (
	SELECT h.hour,
		sum(coalesce(cpu_milli, 0)::HUGEINT * (least(t1, h.hour + %[3]d) - greatest(t0, h.hour))) AS cpu_x,
		sum(coalesce(memory_bytes, 0)::HUGEINT * (least(t1, h.hour + %[3]d) - greatest(t0, h.hour))) AS memory_x,
		sum(coalesce(disk_bytes, 0)::HUGEINT * (least(t1, h.hour + %[3]d) - greatest(t0, h.hour))) AS disk_x,
		sum(coalesce(gpu_milli, 0)::HUGEINT * (least(t1, h.hour + %[3]d) - greatest(t0, h.hour))) AS gpu_x
	FROM hours h JOIN mi ON mi.t0 < h.hour + %[3]d AND mi.t1 > h.hour
	WHERE mi.state <> 'removed'
	GROUP BY h.hour
),
alloc AS (
	SELECT hour, meter, sum(pricing_q) AS q FROM charges WHERE charge_class IS NULL GROUP BY hour, meter
),
cap_units AS (
	SELECT hour, unnest(['cpu', 'memory', 'disk', 'gpu']) AS meter,
		unnest([(cpu_x * 1000000000 + %[4]d) // %[5]d, (memory_x * 1000000000 + %[6]d) // %[7]d,
			(disk_x * 1000000000 + %[6]d) // %[7]d, (gpu_x * 1000000000 + %[4]d) // %[5]d]) AS units
	FROM cap
),
idle_units AS (
	SELECT c.hour, c.meter,
		greatest(c.units - coalesce((a.q * 1000000000)::HUGEINT, 0), 0) AS units,
		CASE c.meter WHEN 'cpu' THEN mp.cpu_core_hour WHEN 'memory' THEN mp.memory_gib_hour
			WHEN 'disk' THEN mp.disk_gib_hour ELSE mp.gpu_hour END AS price,
		mp.sheet_position
	FROM cap_units c
	LEFT JOIN alloc a ON a.hour = c.hour AND a.meter = c.meter
	JOIN machine_prices mp ON c.hour >= mp.valid_from AND c.hour < mp.valid_to
)%[8]s,
idle AS (
	SELECT epoch_us(date_trunc('month', make_timestamp(hour))) AS billing_period, NULL::VARCHAR AS charge_class, hour,
		epoch_us(date_trunc('month', make_timestamp(hour))) AS corrects,
		%[9]s || '/idle' AS resource_id, 'Idle capacity' AS resource_type, account, account_type,
		NULL::VARCHAR AS band, NULL::INTEGER AS priority, 'capacity' AS basis, sheet_position, NULL::VARCHAR AS tags, meter,
		q AS pricing_q, q AS consumed_q, price, NULL::BIGINT AS pfirst, NULL::BIGINT AS plast, 0::BIGINT AS windows, 0::BIGINT AS tasks
	FROM idle_final WHERE q > 0
)`, from, horizon, hourUS, milliCoreMicrosPerCoreHour/2, milliCoreMicrosPerCoreHour, byteMicrosPerGiBHour/2, byteMicrosPerGiBHour, share, cell)
}

// focusColumn is one column of the export: its FOCUS name, its SQL over
// the rows of focusRows (joined to the sheet as ps), and its kind, which
// sets its text in CSV and its type in Parquet.
type focusColumn struct {
	name, expr string
	kind       byte // t: date/time, c: cost DECIMAL(38,18), q: quantity DECIMAL(38,9), p: price DECIMAL(18,9), i: BIGINT, s: string
}

const (
	costExpr   = "(r.pricing_q * r.price)"
	periodExpr = "make_timestamp(r.billing_period)"
)

// unitExpr names a meter's unit, in FOCUS's unit format.
const unitExpr = "CASE r.meter WHEN 'cpu' THEN 'Core-Hours' WHEN 'gpu' THEN 'GPU-Hours' ELSE 'GiB-Hours' END"

func focusColumns(cell string) []focusColumn {
	c := sqlString(cell)
	return []focusColumn{
		{"BilledCost", costExpr, 'c'},
		{"BillingAccountId", c, 's'},
		{"BillingAccountName", c, 's'},
		{"BillingCurrency", "coalesce(ps.currency, 'USD')", 's'},
		{"BillingPeriodEnd", periodExpr + " + INTERVAL 1 MONTH", 't'},
		{"BillingPeriodStart", periodExpr, 't'},
		{"ChargeCategory", "'Usage'", 's'},
		{"ChargeClass", "r.charge_class", 's'},
		{"ChargeDescription", `CASE r.meter WHEN 'cpu' THEN 'CPU core-hours' WHEN 'memory' THEN 'Memory GiB-hours'
			WHEN 'disk' THEN 'Disk GiB-hours' ELSE 'GPU-hours' END || ' of ' || r.resource_id ||
			CASE WHEN r.band IS NULL THEN ' that nothing reserved or used' ELSE ' (' || r.band || ', on its ' || r.basis || ')' END ||
			CASE WHEN r.charge_class IS NULL THEN '' ELSE ', correcting ' || strftime(make_timestamp(r.corrects), '%Y-%m') END`, 's'},
		{"ChargeFrequency", "'Usage-Based'", 's'},
		{"ChargePeriodEnd", "make_timestamp(r.hour + " + fmt.Sprint(hourUS) + ")", 't'},
		{"ChargePeriodStart", "make_timestamp(r.hour)", 't'},
		{"ConsumedQuantity", "r.consumed_q", 'q'},
		{"ConsumedUnit", unitExpr, 's'},
		{"ContractedCost", costExpr, 'c'},
		{"ContractedUnitPrice", "r.price", 'p'},
		{"EffectiveCost", costExpr, 'c'},
		{"InvoiceId", c + " || '-' || strftime(" + periodExpr + ", '%Y-%m')", 's'},
		{"InvoiceIssuerName", c, 's'},
		{"ListCost", costExpr, 'c'},
		{"ListUnitPrice", "r.price", 'p'},
		{"PricingCategory", "'Standard'", 's'},
		{"PricingQuantity", "r.pricing_q", 'q'},
		{"PricingUnit", unitExpr, 's'},
		{"ProviderName", "'corral'", 's'},
		{"PublisherName", "'corral'", 's'},
		{"RegionId", c, 's'},
		{"RegionName", c, 's'},
		{"ResourceId", "r.resource_id", 's'},
		{"ResourceName", "r.resource_id", 's'},
		{"ResourceType", "r.resource_type", 's'},
		{"ServiceCategory", "'Compute'", 's'},
		{"ServiceName", "'corral'", 's'},
		{"SkuId", "'corral/' || coalesce(r.band, 'capacity') || '/' || r.meter", 's'},
		{"SkuPriceId", "'corral/' || coalesce(r.band, 'capacity') || '/' || r.meter || '@' || r.sheet_position", 's'},
		{"SubAccountId", "r.account", 's'},
		{"SubAccountName", "r.account", 's'},
		{"SubAccountType", "CASE WHEN r.account IS NULL THEN NULL ELSE r.account_type END", 's'},
		{"Tags", "r.tags", 's'},
		{"x_Band", "r.band", 's'},
		{"x_Priority", "r.priority", 'i'},
		{"x_Basis", "r.basis", 's'},
		{"x_Meter", "r.meter", 's'},
		{"x_PriceSheetPosition", "r.sheet_position", 'i'},
		{"x_UsagePositionFirst", "r.pfirst", 'i'},
		{"x_UsagePositionLast", "r.plast", 'i'},
		{"x_UsageWindows", "r.windows", 'i'},
		{"x_Tasks", "r.tasks", 'i'},
		{"x_CorrectsBillingPeriodStart", "CASE WHEN r.charge_class IS NULL THEN NULL ELSE make_timestamp(r.corrects) END", 't'},
		{"x_BillingPeriodClosedAt", "bc.closed_at", 'i'},
		{"x_RowId", rowKey("r.band") + " || '|' || r.meter", 's'},
	}
}

// rowKey is a row's identity before its meter, computed alike for a row
// and for each window that went into it (--explain).
func rowKey(band string) string {
	return `concat_ws('|', strftime(make_timestamp(r.billing_period), '%Y-%m'), coalesce(r.charge_class, 'Regular'),
		strftime(make_timestamp(r.hour), '%Y-%m-%dT%H:%M:%SZ'), r.resource_id, coalesce(r.account, ''), coalesce(` + band + `, ''),
		coalesce(r.priority::VARCHAR, ''), r.basis, coalesce(r.sheet_position::VARCHAR, ''), left(md5(coalesce(r.tags, '')), 8))`
}

// csvText renders a column as CSV text: ISO 8601 UTC for times, plain
// decimals, and strings quoted when they hold a comma, a quote or a line
// break. NULL is the empty field.
func (c focusColumn) csvText() string {
	switch c.kind {
	case 't':
		return "coalesce(strftime(" + c.expr + ", '%Y-%m-%dT%H:%M:%SZ'), '')"
	case 's':
		return "coalesce(CASE WHEN regexp_matches(v, '[,\"\\n\\r]') THEN '\"' || replace(v, '\"', '\"\"') || '\"' ELSE v END, '')"
	case 'c':
		return "coalesce(CAST(" + c.expr + "::DECIMAL(38,18) AS VARCHAR), '')"
	case 'q':
		return "coalesce(CAST(" + c.expr + "::DECIMAL(38,9) AS VARCHAR), '')"
	case 'p':
		return "coalesce(CAST(" + c.expr + "::DECIMAL(18,9) AS VARCHAR), '')"
	}
	return "coalesce(CAST(" + c.expr + " AS VARCHAR), '')"
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

// focusQuery is the whole export as one CSV line per row, in a fixed
// order: DuckDB formats the rows, Go only copies them out.
func focusQuery(r *FocusRequest, horizon int64) string {
	cols := focusColumns(r.Cell)
	parts := make([]string, len(cols))
	for i, c := range cols {
		if c.kind == 's' {
			parts[i] = "(SELECT " + c.csvText() + " FROM (SELECT " + c.expr + " AS v))"
		} else {
			parts[i] = c.csvText()
		}
	}
	all := "SELECT * FROM charges"
	if r.Idle != IdleNone {
		all += " UNION ALL BY NAME SELECT * FROM idle"
	}
	return focusRows(r, horizon) + `,
all_rows AS (` + all + `)
SELECT ` + strings.Join(parts, " || ',' || ") + ` AS line
FROM all_rows r
LEFT JOIN price_sheets ps ON ps.position = r.sheet_position
LEFT JOIN closed bc ON bc.period_start = r.billing_period
ORDER BY r.billing_period, r.hour, r.resource_id, r.account NULLS FIRST, r.band NULLS FIRST, r.priority, r.sheet_position,
	r.charge_class NULLS FIRST, r.tags, r.meter`
}

// ExportFocus writes the FOCUS export of a period to w, a row at a time:
// DuckDB computes and formats the rows in one read-only transaction, so
// memory stays bounded however many rows there are. The rows of a closed
// billing period are the same bytes whenever they are computed.
func (s *Infrastore) ExportFocus(ctx context.Context, req FocusRequest, w io.Writer) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := req.validate(); err != nil {
		return err
	}
	if req.Explain != "" {
		return s.explainFocus(ctx, req, w)
	}
	if req.Format == FormatParquet {
		return s.focusParquet(ctx, req, w)
	}
	return s.focusCSV(ctx, req, w)
}

func (s *Infrastore) focusCSV(ctx context.Context, req FocusRequest, w io.Writer) error {
	return s.inReadOnly(ctx, func(conn *sql.Conn) error {
		horizon, err := focusHorizon(ctx, conn)
		if err != nil {
			return fmt.Errorf("infrastore: focus: %w", err)
		}
		bw := bufio.NewWriterSize(w, 1<<16)
		for i, c := range focusColumns(req.Cell) {
			if i > 0 {
				bw.WriteByte(',')
			}
			bw.WriteString(c.name)
		}
		bw.WriteByte('\n')
		rows, err := conn.QueryContext(ctx, focusQuery(&req, horizon))
		if err != nil {
			return fmt.Errorf("infrastore: focus: %w", err)
		}
		defer rows.Close()
		var line sql.RawBytes
		for rows.Next() {
			if err := rows.Scan(&line); err != nil {
				return fmt.Errorf("infrastore: focus: %w", err)
			}
			bw.Write(line)
			if err := bw.WriteByte('\n'); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("infrastore: focus: %w", err)
		}
		return bw.Flush()
	})
}

// focusHorizon is how far the log tells the machines' state: the time of
// the last event ingested. Idle capacity is counted only up to it.
func focusHorizon(ctx context.Context, conn *sql.Conn) (int64, error) {
	var h sql.NullInt64
	err := conn.QueryRowContext(ctx, `SELECT epoch_us(max(time)) FROM events`).Scan(&h)
	return h.Int64, err
}

// explainFocus writes, as CSV, the usage windows one row of the export
// was computed from: each window's log position and times, the sheet and
// basis that priced it, and its quantities on that basis.
func (s *Infrastore) explainFocus(ctx context.Context, req FocusRequest, w io.Writer) error {
	id, meter, ok := cutLast(req.Explain, "|")
	if !ok {
		return fmt.Errorf("%w: explain: %q is not an x_RowId of the export", ErrInvalid, req.Explain)
	}
	cols, ok := meterColumns[meter]
	if !ok {
		return fmt.Errorf("%w: explain: %q is not an x_RowId of the export (it ends in the meter: cpu, memory, disk or gpu)", ErrInvalid, req.Explain)
	}
	q, price := "r."+cols[0], "r."+cols[1]
	return s.inReadOnly(ctx, func(conn *sql.Conn) error {
		horizon, err := focusHorizon(ctx, conn)
		if err != nil {
			return err
		}
		noIdle := req
		noIdle.Idle = IdleNone
		rows, err := conn.QueryContext(ctx, focusRows(&noIdle, horizon)+`
SELECT r.position, strftime(make_timestamp(r.start_time), '%Y-%m-%dT%H:%M:%S.%fZ'), strftime(make_timestamp(r.end_time), '%Y-%m-%dT%H:%M:%S.%fZ'),
	r.user || '/' || r.job || '/' || r.task_index, coalesce(r.machine, ''), r.spec_version, r.billed_band, r.basis,
	coalesce(r.sheet_position::VARCHAR, ''), `+q+`::VARCHAR, `+price+`::VARCHAR, (`+q+` * `+price+`)::VARCHAR
FROM sel r WHERE `+rowKey("r.billed_band")+` = ?
ORDER BY r.position`, id)
		if err != nil {
			return fmt.Errorf("infrastore: explain: %w", err)
		}
		defer rows.Close()
		bw := bufio.NewWriter(w)
		bw.WriteString("position,window_start,window_end,task,machine,spec_version,band,basis,price_sheet_position,quantity,unit_price,cost\n")
		n := 0
		for rows.Next() {
			vals := make([]string, 12)
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return fmt.Errorf("infrastore: explain: %w", err)
			}
			bw.WriteString(strings.Join(vals, ","))
			bw.WriteByte('\n')
			n++
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("infrastore: explain: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("%w: explain: no usage row of [%s, %s) has the id %q (idle rows come from machine capacity, not windows)",
				ErrNotFound, req.From.UTC().Format(time.RFC3339), req.To.UTC().Format(time.RFC3339), req.Explain)
		}
		return bw.Flush()
	})
}

// meterColumns are a meter's quantity and price in priced_usage.
var meterColumns = map[string][2]string{
	"cpu":    {"cpu_core_hours", "cpu_price"},
	"memory": {"memory_gib_hours", "memory_price"},
	"disk":   {"disk_gib_hours", "disk_price"},
	"gpu":    {"gpu_hours", "gpu_price"},
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

// focusParquet writes the export as Parquet: the CSV rows go to a private
// temporary file, which a private DuckDB (one thread, so the file is the
// same bytes every time) converts with every column typed.
func (s *Infrastore) focusParquet(ctx context.Context, req FocusRequest, w io.Writer) error {
	dir, err := s.newExportDir()
	if err != nil {
		return fmt.Errorf("infrastore: parquet: %w", err)
	}
	defer os.RemoveAll(dir)
	csvPath, outPath := filepath.Join(dir, "focus.csv"), filepath.Join(dir, "focus.parquet")
	f, err := os.Create(csvPath)
	if err != nil {
		return fmt.Errorf("infrastore: parquet: %w", err)
	}
	err = s.focusCSV(ctx, req, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	conn, closeDB, err := privateDuckDB(ctx, filepath.Join(dir, "convert.duckdb"))
	if err != nil {
		return fmt.Errorf("infrastore: parquet: %w", err)
	}
	defer closeDB()
	cols := focusColumns(req.Cell)
	sel := make([]string, len(cols))
	types := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = fmt.Sprintf(`CAST(%q AS %s) AS %q`, c.name, c.parquetType(), c.name)
		types[i] = fmt.Sprintf("'%s': 'VARCHAR'", c.name)
	}
	q := `SET TimeZone = 'UTC'; COPY (SELECT ` + strings.Join(sel, ", ") + ` FROM read_csv(` + sqlString(csvPath) +
		`, header = true, quote = '"', escape = '"', columns = {` + strings.Join(types, ", ") + `}))
		TO ` + sqlString(outPath) + ` (FORMAT parquet, COMPRESSION zstd)`
	if _, err := conn.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("infrastore: parquet: %w", err)
	}
	out, err := os.Open(outPath)
	if err != nil {
		return fmt.Errorf("infrastore: parquet: %w", err)
	}
	defer out.Close()
	_, err = io.Copy(w, out)
	return err
}
