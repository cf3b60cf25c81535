package infrastore

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/events"
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
	// User, when set, exports only that user's rows (commands.CostsScope).
	// Idle capacity is the cell's, billed to no user: its rows are left
	// out, and Idle share (which prices every account) is refused.
	User string
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
	if r.Cell != "" && !cellName.MatchString(r.Cell) {
		return fmt.Errorf("%w: cell: %q is not a DNS label (lowercase letters, digits and '-', at most 63)", ErrInvalid, r.Cell)
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
	case strings.HasPrefix(r.AccountBy, "label:") && events.ValidLabelKey(strings.TrimPrefix(r.AccountBy, "label:")):
	default:
		return fmt.Errorf("%w: account_by: %q is not user or label:KEY, KEY a label key (e.g. label:team)", ErrInvalid, r.AccountBy)
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
	var err error
	if req.Cell, err = s.billingCell(ctx, req.Cell); err != nil {
		return err
	}
	if req.User != "" {
		switch req.Idle {
		case IdleSeparate:
			req.Idle = IdleNone
		case IdleShare:
			return fmt.Errorf("%w: idle: share splits the cell's idle capacity by every account's charges; one user's export (user %q) has no idle rows", ErrInvalid, req.User)
		}
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
		in, err := readFocusInputs(ctx, conn, &req)
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
		parts, err := focusSlices(ctx, conn, &req, &in)
		if err != nil {
			return fmt.Errorf("infrastore: focus: %w", err)
		}
		for _, sl := range parts {
			if err := writeLines(ctx, conn, focusQuery(&req, &in, sl), bw); err != nil {
				return fmt.Errorf("infrastore: focus: %w", err)
			}
		}
		return bw.Flush()
	})
}

// writeLines writes the result of q a line per value, row by row and
// column by column, leaving out NULLs. The driver hands a value over as a
// string, which is written as it is (scanning into RawBytes would copy it
// once more).
func writeLines(ctx context.Context, conn *sql.Conn, q string, w *bufio.Writer) error {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	lines := make([]sql.NullString, len(cols))
	dest := make([]any, len(cols))
	for i := range lines {
		dest[i] = &lines[i]
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		for _, line := range lines {
			if !line.Valid {
				continue
			}
			w.WriteString(line.String)
			if err := w.WriteByte('\n'); err != nil {
				return err
			}
		}
	}
	return rows.Err()
}

// explainFocus writes, as CSV, the usage windows one row of the export
// was computed from: each window's log position and times, the sheet and
// basis that priced it, and its quantities on that basis. The windows go
// through the export's own pricing (focusRows, one window per row).
func (s *Infrastore) explainFocus(ctx context.Context, req FocusRequest, w io.Writer) error {
	id, meter, ok := cutLast(req.Explain, "|")
	if !ok {
		return fmt.Errorf("%w: explain: %q is not an x_RowId of the export", ErrInvalid, req.Explain)
	}
	if !slices.Contains(meters, meter) {
		return fmt.Errorf("%w: explain: %q is not an x_RowId of the export (it ends in the meter: cpu, memory, disk or gpu)", ErrInvalid, req.Explain)
	}
	// The id names its billing month, charge class and hour (rowKey): only
	// that hour's windows, or that month's corrections, can make the row.
	noRow := fmt.Errorf("%w: explain: no usage row of [%s, %s) has the id %q (idle rows come from machine capacity, not windows)",
		ErrNotFound, req.From.UTC().Format(time.RFC3339), req.To.UTC().Format(time.RFC3339), req.Explain)
	key := strings.SplitN(id, "|", 4)
	if len(key) < 4 {
		return noRow
	}
	month, err1 := time.Parse("2006-01", key[0])
	hour, err2 := time.Parse(time.RFC3339, key[2])
	if err1 != nil || err2 != nil {
		return noRow
	}
	sl := focusSlice{from: hour.UnixMicro(), to: hour.UnixMicro() + hourUS}
	if key[1] != "Regular" {
		sl = focusSlice{lateFrom: month.UnixMicro(), lateTo: month.UnixMicro() + 1}
	}
	// Outside the request, nothing.
	r0, r1 := req.From.UnixMicro(), req.To.UnixMicro()
	sl.from, sl.to = max(sl.from, r0), min(sl.to, r1)
	sl.lateFrom, sl.lateTo = max(sl.lateFrom, r0), min(sl.lateTo, r1)
	return s.inReadOnly(ctx, func(conn *sql.Conn) error {
		in, err := readFocusInputs(ctx, conn, &req)
		if err != nil {
			return fmt.Errorf("infrastore: explain: %w", err)
		}
		noIdle := req
		noIdle.Idle = IdleNone
		q, price := "r."+meter+"_q", "r."+meter+"_p"
		rows, err := conn.QueryContext(ctx, focusRows(&noIdle, &in, sl, true)+`
SELECT r.position, strftime(make_timestamp(r.start_time), '%Y-%m-%dT%H:%M:%S.%fZ'), strftime(make_timestamp(r.end_time), '%Y-%m-%dT%H:%M:%S.%fZ'),
	r.user || '/' || r.job || '/' || r.task_index, coalesce(r.machine, ''), coalesce(r.spec_version::VARCHAR, ''), r.band, r.basis,
	coalesce(r.sheet_position::VARCHAR, ''), `+q+`::VARCHAR, `+price+`::VARCHAR, (`+q+` * `+price+`)::VARCHAR
FROM rows r WHERE (`+q+` > 0 OR r.`+meter+`_c > 0) AND `+rowKey+` = ?
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
			return noRow
		}
		return bw.Flush()
	})
}

// meters are the export's meters, the last part of a row id.
var meters = []string{"cpu", "memory", "disk", "gpu"}

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
