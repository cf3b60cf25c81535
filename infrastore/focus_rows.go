package infrastore

// The SQL of a FOCUS export's rows: which windows and partials, priced
// by which sheet, billed in which month, and the idle capacity.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// isoTime is the format of the export's times: ISO 8601, UTC.
const isoTime = "%Y-%m-%dT%H:%M:%SZ"

// focusInputs are the few rows of the log the export inlines into its SQL,
// read in the export's own transaction: the sheets in force over the
// period (price_sheets) and the closed billing periods it overlaps
// (billing_periods_closed). Inlined as a CASE on each window's start, they
// price and classify the windows during the scan instead of by two range
// joins per window; the rule stays the views' (which sheet is in force,
// which month is closed), the export only reads their rows.
type focusInputs struct {
	horizon     int64 // time of the last event ingested
	sheets      []sheetSpan
	closed      []closedPeriod
	minClosedAt sql.NullInt64 // the earliest closing of any month: windows after it may be corrections
	rolled      int64         // the last window's position the hourly rollup holds
	// views are the pricing views' rows as CTEs of literal rows, read once:
	// the views read the whole event log, and an export runs a query per
	// slice.
	views string
}

// pricingViews are the views an export reads, with the columns and types
// it reads of them; the export's SQL holds their rows (snapshotViews).
var pricingViews = []struct {
	name string
	cols [][2]string
}{
	{"price_sheets", [][2]string{{"position", "BIGINT"}, {"effective_time", "BIGINT"}, {"valid_to", "BIGINT"}, {"currency", "VARCHAR"}}},
	{"band_prices", [][2]string{{"sheet_position", "BIGINT"}, {"band", "VARCHAR"}, {"basis", "VARCHAR"},
		{"cpu_core_hour", "DECIMAL(18,9)"}, {"memory_gib_hour", "DECIMAL(18,9)"}, {"disk_gib_hour", "DECIMAL(18,9)"}, {"gpu_hour", "DECIMAL(18,9)"}}},
	{"machine_prices", [][2]string{{"sheet_position", "BIGINT"}, {"valid_from", "BIGINT"}, {"valid_to", "BIGINT"},
		{"cpu_core_hour", "DECIMAL(18,9)"}, {"memory_gib_hour", "DECIMAL(18,9)"}, {"disk_gib_hour", "DECIMAL(18,9)"}, {"gpu_hour", "DECIMAL(18,9)"}}},
	{"billing_periods_closed", [][2]string{{"period_start", "BIGINT"}, {"period_end", "BIGINT"}, {"closed_at", "BIGINT"}}},
}

// snapshotViews reads the pricing views' rows (a few: one per sheet, band
// and closed month) and returns them as CTEs of the views' names, which
// the export's queries then read instead of the views.
func snapshotViews(ctx context.Context, conn *sql.Conn) (string, error) {
	var ctes []string
	for _, v := range pricingViews {
		names := make([]string, len(v.cols))
		for i, c := range v.cols {
			names[i] = c[0] + "::VARCHAR"
		}
		rows, err := conn.QueryContext(ctx, "SELECT "+strings.Join(names, ", ")+" FROM "+v.name)
		if err != nil {
			return "", err
		}
		var tuples []string
		vals := make([]sql.NullString, len(v.cols))
		dest := make([]any, len(vals))
		for i := range vals {
			dest[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return "", err
			}
			lits := make([]string, len(vals))
			for i, val := range vals {
				lits[i] = "NULL::" + v.cols[i][1]
				if val.Valid {
					lits[i] = sqlString(val.String) + "::" + v.cols[i][1]
				}
			}
			tuples = append(tuples, "("+strings.Join(lits, ", ")+")")
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "", err
		}
		where := ""
		if len(tuples) == 0 {
			// No rows: one of NULLs, kept out, so that the columns have types.
			lits := make([]string, len(v.cols))
			for i, c := range v.cols {
				lits[i] = "NULL::" + c[1]
			}
			tuples, where = []string{"(" + strings.Join(lits, ", ") + ")"}, " WHERE false"
		}
		cols := make([]string, len(v.cols))
		for i, c := range v.cols {
			cols[i] = c[0]
		}
		ctes = append(ctes, fmt.Sprintf("%s AS (SELECT * FROM (VALUES %s) AS t(%s)%s)", v.name, strings.Join(tuples, ", "), strings.Join(cols, ", "), where))
	}
	return strings.Join(ctes, ",\n"), nil
}

type sheetSpan struct{ position, from, to int64 }

type closedPeriod struct{ start, end, closedAt int64 }

func readFocusInputs(ctx context.Context, conn *sql.Conn, r *FocusRequest) (focusInputs, error) {
	var in focusInputs
	var h sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT epoch_us(max(time)) FROM events`).Scan(&h); err != nil {
		return in, err
	}
	in.horizon = h.Int64
	from, to := r.From.UnixMicro(), r.To.UnixMicro()
	rows, err := conn.QueryContext(ctx, `SELECT position, effective_time, valid_to FROM price_sheets
		WHERE effective_time < valid_to AND valid_to > ? AND effective_time < ? ORDER BY effective_time, position`, from, to)
	if err != nil {
		return in, err
	}
	for rows.Next() {
		var sp sheetSpan
		if err := rows.Scan(&sp.position, &sp.from, &sp.to); err != nil {
			rows.Close()
			return in, err
		}
		in.sheets = append(in.sheets, sp)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return in, err
	}
	rows, err = conn.QueryContext(ctx, `SELECT period_start, period_end, closed_at FROM billing_periods_closed
		WHERE period_end > ? AND period_start < ? ORDER BY period_start`, from, to)
	if err != nil {
		return in, err
	}
	for rows.Next() {
		var c closedPeriod
		if err := rows.Scan(&c.start, &c.end, &c.closedAt); err != nil {
			rows.Close()
			return in, err
		}
		in.closed = append(in.closed, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return in, err
	}
	if err := conn.QueryRowContext(ctx, `SELECT min(closed_at) FROM billing_periods_closed`).Scan(&in.minClosedAt); err != nil {
		return in, err
	}
	if in.rolled, err = rolled(ctx, conn); err != nil {
		return in, err
	}
	in.views, err = snapshotViews(ctx, conn)
	return in, err
}

// sheetCase is the position of the sheet in force at u.start_time, for
// windows that start in the period.
func (in *focusInputs) sheetCase(start string) string {
	if len(in.sheets) == 0 {
		return "NULL::BIGINT"
	}
	var b strings.Builder
	b.WriteString("CASE")
	for _, sp := range in.sheets {
		fmt.Fprintf(&b, " WHEN %s >= %d AND %s < %d THEN %d::BIGINT", start, sp.from, start, sp.to, sp.position)
	}
	b.WriteString(" END")
	return b.String()
}

// notLate keeps out of the regular rows the windows of a closed month
// recorded after it closed (start and position name a window's, or a
// partial's hour and first position): they are corrections.
func (in *focusInputs) notLate(start, position string) string {
	var b strings.Builder
	for _, c := range in.closed {
		fmt.Fprintf(&b, " AND NOT (%s >= %d AND %s < %d AND %s > %d)", start, c.start, start, c.end, position, c.closedAt)
	}
	return b.String()
}

// splitHours are the hours of [from, to) a sheet takes effect within:
// their windows are priced by two sheets, so the rollup, which keeps
// hours whole, cannot price them.
func (in *focusInputs) splitHours(from, to int64) []int64 {
	var hours []int64
	for _, sp := range in.sheets {
		if h := sp.from / hourUS * hourUS; sp.from%hourUS != 0 && h >= from && h < to && !slices.Contains(hours, h) {
			hours = append(hours, h)
		}
	}
	return hours
}

// outside is the SQL that column (a start time or an hour) lies in none of hours.
func outside(column string, hours []int64) string {
	var b strings.Builder
	for _, h := range hours {
		fmt.Fprintf(&b, " AND NOT (%s >= %d AND %s < %d)", column, h, column, h+hourUS)
	}
	return b.String()
}

// focusSlice is the part of an export one query computes: the regular
// rows and idle capacity of the hours [from, to), and the corrections
// billed in the months that start in [lateFrom, lateTo). DuckDB holds a
// query's whole result until it is read, so an export is cut into slices
// that each fit in memory and are written in order: a month's corrections
// (charged in hours before it) and then its hours.
type focusSlice struct{ from, to, lateFrom, lateTo int64 }

// whole is a request in one slice (explanations and costs: their results
// are small).
func whole(r *FocusRequest) focusSlice {
	from, to := r.From.UnixMicro(), r.To.UnixMicro()
	return focusSlice{from, to, from, to}
}

// sliceRows is about how many rows (before meters) a slice holds: a few
// hundred megabytes of lines at most.
const sliceRows = 250_000

// focusSlices cuts a request into slices in the export's order, of whole
// hours, as many as the rows it will have need (estimated from the
// windows, or for a per-job export the partials and the tail, in range).
func focusSlices(ctx context.Context, conn *sql.Conn, r *FocusRequest, in *focusInputs) ([]focusSlice, error) {
	from, to := r.From.UnixMicro(), r.To.UnixMicro()
	q := `SELECT count(*) FROM task_usage WHERE source = 'log' AND start_time >= ? AND start_time < ?`
	args := []any{from, to}
	if r.Granularity == "job" {
		q = `SELECT (SELECT count(*) FROM usage_hours WHERE hour >= ? AND hour < ?) +
			(SELECT count(*) FROM task_usage WHERE source = 'log' AND start_time >= ? AND start_time < ? AND position > ?)`
		args = []any{from, to, from, to, in.rolled}
	}
	var rows int64
	if err := conn.QueryRowContext(ctx, q, args...).Scan(&rows); err != nil {
		return nil, err
	}
	hours := (to - from) / hourUS
	step := max(1, hours/max(1, (rows+sliceRows-1)/sliceRows)) * hourUS
	var out []focusSlice
	for month := r.From.UTC(); month.Before(r.To); {
		start := time.Date(month.Year(), month.Month(), 1, 0, 0, 0, 0, time.UTC)
		end := start.AddDate(0, 1, 0)
		if ms := start.UnixMicro(); in.minClosedAt.Valid && ms >= from {
			out = append(out, focusSlice{lateFrom: ms, lateTo: ms + 1})
		}
		for h := max(from, start.UnixMicro()); h < min(to, end.UnixMicro()); h += step {
			out = append(out, focusSlice{from: h, to: min(h+step, to, end.UnixMicro())})
		}
		month = end
	}
	return out, nil
}

// windowColumns are what the export reads of a usage window.
const windowColumns = `u.start_time, u.end_time, u.user, u.job, u.task_index, u.machine, u.spec_version, u.spec_position,
		coalesce(u.band, 'unknown') AS band, u.priority, u.position,
		u.cpu_limit_core_hours, u.cpu_reservation_core_hours, u.cpu_usage_core_hours,
		u.memory_limit_gib_hours, u.memory_reservation_gib_hours, u.memory_usage_gib_hours,
		u.disk_usage_gib_hours, coalesce(u.gpu_limit_hours, 0::DECIMAL(18,9)) AS gpu_limit_hours`

// focusRows is the SQL of the export's rows before formatting (the CTE
// rows: priced, and idle unless r.Idle is none): one row per billing period,
// charge hour, resource, job spec, band, priority, sheet and charge class,
// with its quantities and prices per meter (cpu_q, cpu_c, cpu_p: the
// quantity priced, the quantity consumed, the unit price; likewise
// memory_, disk_, gpu_) and its citations. Each becomes a line per meter
// it has a quantity of. Every input is an
// immutable row of the log (task_usage by its position, the sheets and
// closings as events), so a closed period's rows are the same whenever and
// wherever they are computed.
//
// sl says which part of the request the rows are: the regular rows and
// idle capacity of some hours, the corrections billed in some months, or
// (whole) all of it.
//
// The windows are summed per hour and resource first, on every basis at
// once, and priced after: the scan of the month's windows is the whole
// cost, and it is a single grouped pass. With perWindow set (--explain)
// the rows are the windows themselves, through the same pricing.
func focusRows(r *FocusRequest, in *focusInputs, sl focusSlice, perWindow bool) string {
	from, to := sl.from, sl.to
	resource, resourceType, taskKey := "g.user || '/' || g.job || '/' || g.task_index", "'Task'", "task_index, "
	if r.Granularity == "job" {
		resource, resourceType, taskKey = "g.user || '/' || g.job", "'Job'", ""
	}
	account, accountType := "g.user", "'User'"
	if key, ok := strings.CutPrefix(r.AccountBy, "label:"); ok {
		account, accountType = "st.labels["+sqlString(key)+"]", sqlString("Label "+key)
	}
	// The regular windows: with the rollup, those it does not hold (the
	// tail recorded since the last roll, and every window of an hour a
	// sheet takes effect within); without it, all.
	regular := fmt.Sprintf(`
	SELECT %[1]s, %[2]s AS sheet_position, NULL::BIGINT AS late_period, NULL::VARCHAR AS charge_class
	FROM task_usage u
	WHERE u.source = 'log' AND u.start_time >= %[3]d AND u.start_time < %[4]d%[5]s`,
		windowColumns, in.sheetCase("u.start_time"), from, to, in.notLate("u.start_time", "u.position"))
	partials := ""
	if r.Granularity == "job" && !perWindow {
		regular, partials = in.unrolled(regular, from, to)
	}
	g := fmt.Sprintf(groupedWindowsSQL, hourUS, taskKey, partials)
	if perWindow {
		g = fmt.Sprintf(perWindowSQL, hourUS)
	}
	idle, unformatted := "", "SELECT * FROM priced"
	if r.User != "" {
		unformatted += " WHERE user = " + sqlString(r.User)
	}
	if r.Idle != IdleNone && to > from {
		idle = idleRows(r, from, min(to, in.horizon))
		unformatted += " UNION ALL BY NAME SELECT * FROM idle"
	}
	return fmt.Sprintf(focusRowsSQL, regular, in.lateWindows(sl), g,
		resource, resourceType, account, accountType, idle, unformatted, isoTime, hourUS, in.views)
}

// lateWindows is the SQL of the corrections sl holds: a window of a closed
// month recorded after the close is billed in the first month from its
// arrival that was not closed before it. "" when there are none.
func (in *focusInputs) lateWindows(sl focusSlice) string {
	if !in.minClosedAt.Valid || sl.lateTo <= sl.lateFrom {
		return ""
	}
	return fmt.Sprintf(lateWindowsSQL, windowColumns, in.minClosedAt.Int64, sl.lateTo, sl.lateFrom)
}

// unrolled narrows a per-job export's regular windows, the SQL regular
// over [from, to), to those the hourly rollup does not hold, and returns
// them with the rollup's partials for the rest.
func (in *focusInputs) unrolled(regular string, from, to int64) (windows, partials string) {
	split := in.splitHours(from, to)
	windows = regular + fmt.Sprintf(" AND u.position > %d", in.rolled) + outside("u.start_time", split)
	for _, h := range split {
		windows += "\n\tUNION ALL" + strings.Replace(regular, fmt.Sprintf("u.start_time >= %d AND u.start_time < %d", from, to),
			fmt.Sprintf("u.start_time >= %d AND u.start_time < %d", h, h+hourUS), 1)
	}
	partials = fmt.Sprintf(partialsSQL, in.sheetCase("p.hour"), from, to, in.notLate("p.hour", "p.pfirst"), outside("p.hour", split))
	return windows, partials
}

// lateWindowsSQL: the window columns, the earliest closing, the slice's
// late months' end and start.
const lateWindowsSQL = `
	UNION ALL
	SELECT * FROM (SELECT * EXCLUDE (lower), (
		SELECT min(x.cand) FROM (SELECT l.lower AS cand UNION ALL SELECT c.period_end FROM closed c WHERE c.period_end > l.lower) x
		WHERE NOT EXISTS (SELECT 1 FROM closed c2 WHERE c2.period_start = x.cand AND c2.closed_at < l.position)
	) AS late_period, 'Correction' AS charge_class
	FROM (
		SELECT %[1]s, s.position AS sheet_position,
			greatest(epoch_us(date_trunc('month', e.time)), epoch_us(make_timestamp(c.period_start) + INTERVAL 1 MONTH)) AS lower
		FROM task_usage u
		JOIN closed c ON u.start_time >= c.period_start AND u.start_time < c.period_end AND u.position > c.closed_at
		JOIN events e ON e.position = u.position
		LEFT JOIN price_sheets s ON u.start_time >= s.effective_time AND u.start_time < s.valid_to
		WHERE u.source = 'log' AND u.position > %[2]d AND u.start_time < %[3]d
	) l)
	WHERE late_period >= %[4]d AND late_period < %[3]d`

// partialsSQL: the sheet's CASE on p.hour, the hours, and the filters of
// late and split hours.
const partialsSQL = `
		UNION ALL
		SELECT NULL::BIGINT, NULL::VARCHAR, p.hour, p.user, p.job, p.spec_position, p.band, p.priority, %[1]s,
			p.cpu_limit, p.cpu_reservation, p.cpu_usage, p.memory_limit, p.memory_reservation, p.memory_usage, p.disk_usage, p.gpu_limit,
			p.pfirst, p.plast, p.windows
		FROM usage_hours p
		WHERE p.hour >= %[2]d AND p.hour < %[3]d%[4]s%[5]s`

// groupedWindowsSQL sums the windows (and partials) per hour and
// resource: the hour's length, the task key column and the partials.
const groupedWindowsSQL = `
	SELECT late_period, charge_class, hour, user, job, %[2]sspec_position, band, priority, sheet_position,
		sum(cpu_limit) AS cpu_limit, sum(cpu_reservation) AS cpu_reservation, sum(cpu_usage) AS cpu_usage,
		sum(memory_limit) AS memory_limit, sum(memory_reservation) AS memory_reservation,
		sum(memory_usage) AS memory_usage, sum(disk_usage) AS disk_usage, sum(gpu_limit) AS gpu_limit,
		min(pfirst) AS pfirst, max(plast) AS plast, sum(windows)::BIGINT AS windows
	FROM (
		SELECT late_period, charge_class, start_time // %[1]d * %[1]d AS hour, user, job, %[2]sspec_position, band, priority, sheet_position,
			cpu_limit_core_hours, cpu_reservation_core_hours, cpu_usage_core_hours,
			memory_limit_gib_hours, memory_reservation_gib_hours, memory_usage_gib_hours, disk_usage_gib_hours, gpu_limit_hours,
			position, position, 1
		FROM windows%[3]s
	) AS w(late_period, charge_class, hour, user, job, %[2]sspec_position, band, priority, sheet_position,
		cpu_limit, cpu_reservation, cpu_usage, memory_limit, memory_reservation, memory_usage, disk_usage, gpu_limit, pfirst, plast, windows)
	GROUP BY ALL`

// perWindowSQL keeps the windows themselves (--explain).
const perWindowSQL = `
	SELECT late_period, charge_class, start_time // %[1]d * %[1]d AS hour, user, job, task_index, spec_position, band, priority, sheet_position,
		cpu_limit_core_hours AS cpu_limit, cpu_reservation_core_hours AS cpu_reservation, cpu_usage_core_hours AS cpu_usage,
		memory_limit_gib_hours AS memory_limit, memory_reservation_gib_hours AS memory_reservation,
		memory_usage_gib_hours AS memory_usage, disk_usage_gib_hours AS disk_usage, gpu_limit_hours AS gpu_limit,
		position AS pfirst, position AS plast, 1 AS windows, position, start_time, end_time, machine, spec_version
	FROM windows`

// focusRowsSQL is focusRows' SQL: windows, late windows, grouped rows;
// the resource and account expressions; idle rows and the unformatted
// union; the time format, the hour's length and the pricing views.
const focusRowsSQL = `
WITH %[12]s,
closed AS (SELECT period_start, period_end, closed_at FROM billing_periods_closed),
windows AS (%[1]s%[2]s
),
g AS (%[3]s),
spec_tags AS (
	-- The labels' map keeps the order they were appended in, which a Go
	-- map does not fix: sort them, so a row's tags are the same text on
	-- every store.
	SELECT position, labels, to_json(map_from_entries(list_sort(map_entries(labels))))::VARCHAR AS tags
	FROM job_specs WHERE position IN (SELECT DISTINCT spec_position FROM g)
),
priced AS (
	SELECT g.*, coalesce(g.late_period, epoch_us(date_trunc('month', make_timestamp(g.hour)))) AS billing_period,
		epoch_us(date_trunc('month', make_timestamp(g.hour))) AS corrects,
		%[4]s AS resource_id, %[5]s AS resource_type, %[6]s AS account, %[7]s AS account_type, st.tags,
		coalesce(p.basis, 'none') AS basis,
		billed_quantity(p.basis, g.cpu_limit, g.cpu_reservation, g.cpu_usage) AS cpu_q,
		billed_quantity(p.basis, g.memory_limit, g.memory_reservation, g.memory_usage) AS memory_q,
		g.disk_usage AS disk_q, g.gpu_limit AS gpu_q,
		g.cpu_usage AS cpu_c, g.memory_usage AS memory_c, g.disk_usage AS disk_c, g.gpu_limit AS gpu_c,
		coalesce(p.cpu_core_hour, 0::DECIMAL(18,9)) AS cpu_p, coalesce(p.memory_gib_hour, 0::DECIMAL(18,9)) AS memory_p,
		coalesce(p.disk_gib_hour, 0::DECIMAL(18,9)) AS disk_p, coalesce(p.gpu_hour, 0::DECIMAL(18,9)) AS gpu_p
	FROM g
	LEFT JOIN spec_tags st ON st.position = g.spec_position
	LEFT JOIN band_prices p ON p.sheet_position = g.sheet_position AND p.band = g.band
)%[8]s,
unformatted AS (%[9]s),
-- Times as text once per hour and month, not once per row and column.
hour_texts AS (
	SELECT hour, strftime(make_timestamp(hour), '%[10]s') AS hour_start, strftime(make_timestamp(hour + %[11]d), '%[10]s') AS hour_end
	FROM (SELECT DISTINCT hour FROM unformatted)
),
month_texts AS (
	SELECT m, strftime(make_timestamp(m), '%[10]s') AS month_start, strftime(make_timestamp(m) + INTERVAL 1 MONTH, '%[10]s') AS month_end,
		strftime(make_timestamp(m), '%%Y-%%m') AS month_name
	FROM (SELECT DISTINCT billing_period AS m FROM unformatted UNION SELECT DISTINCT corrects FROM unformatted)
),
rows AS (
	SELECT u.*, ht.hour_start, ht.hour_end, bp.month_start AS period_start, bp.month_end AS period_end, bp.month_name AS period_name,
		cp.month_start AS corrects_start, cp.month_name AS corrects_name, ps.currency, bc.closed_at
	FROM unformatted u
	LEFT JOIN hour_texts ht ON ht.hour = u.hour
	LEFT JOIN month_texts bp ON bp.m = u.billing_period
	LEFT JOIN month_texts cp ON cp.m = u.corrects
	LEFT JOIN price_sheets ps ON ps.position = u.sheet_position
	LEFT JOIN closed bc ON bc.period_start = u.billing_period
)`

// idleRows extends focusRows with the idle capacity of the hours
// [from, horizon): what the machines not removed could hold, priced by the
// machine prices of the sheet in force at each instant, less what the
// charges of the hour priced by that sheet took on their basis. An hour a
// sheet takes effect within is two segments, each its own idle row, by
// the rule that prices windows (the sheet in force at the start).
// "separate" adds a row per hour and sheet (a line per meter); "share"
// splits each segment's idle quantity among the hour's accounts in
// proportion to what they were charged (largest remainder, in units of
// 1e-9, so the shares add up to the idle quantity exactly).
func idleRows(r *FocusRequest, from, horizon int64) string {
	share := idleSeparateSQL
	if r.Idle == IdleShare {
		share = idleShareSQL
	}
	return fmt.Sprintf(idleRowsSQL, from, horizon, hourUS, milliCoreMicrosPerCoreHour/2, milliCoreMicrosPerCoreHour, byteMicrosPerGiBHour/2, byteMicrosPerGiBHour, share, sqlString(r.Cell))
}

// idleRowsSQL is idleRows' SQL: hours, from, horizon and the hour's
// length; the rounding halves and units of cpu and memory; then how idle
// quantities are split (idleShareSQL or idleSeparateSQL) and the cell.
const idleRowsSQL = `,
hours AS (SELECT unnest(range(%[1]d::BIGINT, %[2]d::BIGINT, %[3]d::BIGINT)) AS hour),
mi AS (
	SELECT machine, time AS t0, coalesce(lead(time) OVER (PARTITION BY machine ORDER BY position), %[2]d) AS t1,
		state, cpu_milli, memory_bytes, disk_bytes, gpu_milli
	FROM machine_events WHERE source = 'log'
),
-- An hour's segments: its parts each priced by one sheet's machine prices
-- (a sheet that takes effect within the hour splits it, as it splits the
-- windows by their starts).
segments AS (
	SELECT h.hour, mp.sheet_position, greatest(h.hour, mp.valid_from) AS s0, least(h.hour + %[3]d, mp.valid_to) AS s1
	FROM hours h JOIN machine_prices mp ON mp.valid_from < h.hour + %[3]d AND mp.valid_to > h.hour AND mp.valid_from < mp.valid_to
),
cap AS (
	SELECT s.hour, s.sheet_position,
		sum(coalesce(cpu_milli, 0)::HUGEINT * (least(t1, s.s1) - greatest(t0, s.s0))) AS cpu_x,
		sum(coalesce(memory_bytes, 0)::HUGEINT * (least(t1, s.s1) - greatest(t0, s.s0))) AS memory_x,
		sum(coalesce(disk_bytes, 0)::HUGEINT * (least(t1, s.s1) - greatest(t0, s.s0))) AS disk_x,
		sum(coalesce(gpu_milli, 0)::HUGEINT * (least(t1, s.s1) - greatest(t0, s.s0))) AS gpu_x
	FROM segments s JOIN mi ON mi.t0 < s.s1 AND mi.t1 > s.s0
	WHERE mi.state <> 'removed'
	GROUP BY s.hour, s.sheet_position
),
-- What the hour's charges took, by the sheet that priced them: a window
-- counts against the segment of the sheet in force at its start.
alloc AS (
	SELECT hour, sheet_position, unnest(['cpu', 'memory', 'disk', 'gpu']) AS meter, unnest([cpu, memory, disk, gpu]) AS q
	FROM (SELECT hour, sheet_position, sum(cpu_q) AS cpu, sum(memory_q) AS memory, sum(disk_q) AS disk, sum(gpu_q) AS gpu
		FROM priced WHERE charge_class IS NULL GROUP BY hour, sheet_position)
),
cap_units AS (
	SELECT hour, sheet_position, unnest(['cpu', 'memory', 'disk', 'gpu']) AS meter,
		unnest([(cpu_x * 1000000000 + %[4]d) // %[5]d, (memory_x * 1000000000 + %[6]d) // %[7]d,
			(disk_x * 1000000000 + %[6]d) // %[7]d, (gpu_x * 1000000000 + %[4]d) // %[5]d]) AS units
	FROM cap
),
idle_units AS (
	SELECT c.hour, c.meter,
		greatest(c.units - coalesce((a.q * 1000000000)::HUGEINT, 0), 0) AS units,
		CASE c.meter WHEN 'cpu' THEN mp.cpu_core_hour WHEN 'memory' THEN mp.memory_gib_hour
			WHEN 'disk' THEN mp.disk_gib_hour ELSE mp.gpu_hour END AS price,
		c.sheet_position
	FROM cap_units c
	LEFT JOIN alloc a ON a.hour = c.hour AND a.meter = c.meter AND a.sheet_position = c.sheet_position
	JOIN machine_prices mp ON mp.sheet_position = c.sheet_position
)%[8]s,
idle AS (
	SELECT epoch_us(date_trunc('month', make_timestamp(hour))) AS billing_period, NULL::VARCHAR AS charge_class, hour,
		epoch_us(date_trunc('month', make_timestamp(hour))) AS corrects,
		%[9]s || '/idle' AS resource_id, 'Idle capacity' AS resource_type, account, account_type,
		NULL::VARCHAR AS band, NULL::INTEGER AS priority, 'capacity' AS basis, sheet_position, NULL::BIGINT AS spec_position,
		NULL::VARCHAR AS tags, NULL::BIGINT AS pfirst, NULL::BIGINT AS plast, 0::BIGINT AS windows,
		sum(q) FILTER (meter = 'cpu') AS cpu_q, sum(q) FILTER (meter = 'memory') AS memory_q,
		sum(q) FILTER (meter = 'disk') AS disk_q, sum(q) FILTER (meter = 'gpu') AS gpu_q,
		sum(q) FILTER (meter = 'cpu') AS cpu_c, sum(q) FILTER (meter = 'memory') AS memory_c,
		sum(q) FILTER (meter = 'disk') AS disk_c, sum(q) FILTER (meter = 'gpu') AS gpu_c,
		any_value(price) FILTER (meter = 'cpu') AS cpu_p, any_value(price) FILTER (meter = 'memory') AS memory_p,
		any_value(price) FILTER (meter = 'disk') AS disk_p, any_value(price) FILTER (meter = 'gpu') AS gpu_p
	FROM idle_final WHERE q > 0
	GROUP BY hour, account, account_type, sheet_position
)`

// idleShareSQL splits each segment's idle quantity among the hour's
// accounts by what they were charged, by largest remainder.
const idleShareSQL = `,
weights AS (
	SELECT hour, account, any_value(account_type) AS account_type,
		round(sum(coalesce(cpu_q * cpu_p, 0) + coalesce(memory_q * memory_p, 0) + coalesce(disk_q * disk_p, 0)
			+ coalesce(gpu_q * gpu_p, 0)) * 1000000000000)::HUGEINT AS w12
	FROM priced WHERE charge_class IS NULL AND account IS NOT NULL GROUP BY hour, account
	HAVING w12 > 0
),
shares AS (
	SELECT i.hour, i.meter, w.account, w.account_type, i.units, i.price, i.sheet_position, w.w12,
		sum(w.w12) OVER (PARTITION BY i.hour, i.meter, i.sheet_position) AS total12
	FROM idle_units i JOIN weights w ON w.hour = i.hour
),
split AS (
	SELECT *, (units * w12) // total12 AS base, (units * w12) % total12 AS rem FROM shares WHERE total12 > 0
),
ranked AS (
	SELECT *, units - sum(base) OVER (PARTITION BY hour, meter, sheet_position) AS leftover,
		row_number() OVER (PARTITION BY hour, meter, sheet_position ORDER BY rem DESC, account) AS rk
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

// idleSeparateSQL keeps each segment's idle quantity on a row of its own.
const idleSeparateSQL = `,
idle_final AS (
	SELECT hour, meter, NULL::VARCHAR AS account, NULL::VARCHAR AS account_type, price, sheet_position,
		(units::DECIMAL(38,0) * 0.000000001::DECIMAL(10,9))::DECIMAL(38,9) AS q
	FROM idle_units
)`
