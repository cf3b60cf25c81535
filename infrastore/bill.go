package infrastore

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// BillRequest asks for the bill of a period.
type BillRequest struct {
	// From and To bound the period [From, To). A usage window is billed in
	// the period in which it starts, so consecutive periods never count a
	// window twice or miss one.
	From, To time.Time
	// GroupBy is "user" (the default), "job" (user/job) or "label:KEY" (the
	// value of the job's label KEY in the spec version the task ran; "" when
	// the job has no such label).
	GroupBy string
	// Rates is the price list; nil means DefaultRates().
	Rates *Rates
	// User, when set, bills only that user's usage (commands.CostsScope).
	User string
}

// BillLine is the bill of one group in one priority band. Quantities are
// sums over task_usage, on the three bases: the limit in force, the
// reservation in force, and the usage measured.
type BillLine struct {
	Group                     string  `json:"group"`
	Band                      string  `json:"band"`
	Basis                     string  `json:"basis"` // what Charge is computed on
	Tasks                     int64   `json:"tasks"` // distinct tasks
	Windows                   int64   `json:"windows"`
	CPUCoreHoursLimit         Decimal `json:"cpu_core_hours_limit"`
	CPUCoreHoursReservation   Decimal `json:"cpu_core_hours_reservation"`
	CPUCoreHoursUsage         Decimal `json:"cpu_core_hours_usage"`
	MemoryGiBHoursLimit       Decimal `json:"memory_gib_hours_limit"`
	MemoryGiBHoursReservation Decimal `json:"memory_gib_hours_reservation"`
	MemoryGiBHoursUsage       Decimal `json:"memory_gib_hours_usage"`
	DiskGiBHours              Decimal `json:"disk_gib_hours"` // disk space used
	Charge                    Decimal `json:"charge"`
}

// Bill is the usage-based bill of a period. It holds nothing that depends on
// when it was computed, so a closed period exports the same bytes every time.
type Bill struct {
	From     time.Time  `json:"from"`
	To       time.Time  `json:"to"`
	GroupBy  string     `json:"group_by"`
	Currency string     `json:"currency"`
	Lines    []BillLine `json:"lines"` // by group, then band from the most important
	// Total sums every line; Total.Tasks counts distinct tasks.
	Total BillLine `json:"total"`
	Rates *Rates   `json:"rates"`
}

// Bill computes the bill of a period from task_usage (rows from the log
// only). Every quantity is an exact sum of task_usage's decimal columns.
// Without Rates, each window is priced by the log's price sheet in force
// when it started (priced_usage, as the FOCUS export), and a line's charge
// is the exact sum of its windows' costs rounded once to 6 decimals. With
// Rates (a what-if), a line's charge is, on its band's basis,
//
//	round(core-hours × cpu_core_hour + memory GiB-hours × memory_gib_hour
//	      + disk GiB-hours × disk_gib_hour, 6 decimals)
//
// rounded half away from zero; the total charge is the sum of the lines'.
func (s *Infrastore) Bill(ctx context.Context, req BillRequest) (*Bill, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if req.GroupBy == "" {
		req.GroupBy = "user"
	}
	switch {
	case req.From.IsZero():
		return nil, fmt.Errorf("%w: from: must be set", ErrInvalid)
	case req.To.IsZero():
		return nil, fmt.Errorf("%w: to: must be set", ErrInvalid)
	case !req.From.Before(req.To):
		return nil, fmt.Errorf("%w: to: %s is not after from (%s)", ErrInvalid, req.To.UTC().Format(time.RFC3339), req.From.UTC().Format(time.RFC3339))
	}
	if req.Rates == nil {
		return s.billFromSheets(ctx, req)
	}
	rates := req.Rates
	if err := rates.Validate(); err != nil {
		return nil, err
	}
	group, join, args, err := groupExpr(req.GroupBy)
	if err != nil {
		return nil, err
	}
	q := `SELECT grouping(grp, band) = 0 AS line, grp, band,
		count(DISTINCT (user, job, task_index)), count(*),
		sum(cpu_limit_core_hours), sum(cpu_reservation_core_hours), sum(cpu_usage_core_hours),
		sum(memory_limit_gib_hours), sum(memory_reservation_gib_hours), sum(memory_usage_gib_hours),
		sum(disk_usage_gib_hours), NULL, NULL
	FROM (
		SELECT ` + group + ` AS grp, coalesce(u.band, '` + UnknownBand + `') AS band, u.*
		FROM task_usage u ` + join + `
		WHERE u.source = '` + SourceLog + `' AND u.start_time >= ? AND u.start_time < ?` + userFilter(req.User) + `
	)
	GROUP BY GROUPING SETS ((grp, band), ())`
	args = append(args, req.From.UnixMicro(), req.To.UnixMicro())
	return s.billLines(ctx, req, rates.Currency, rates, q, args)
}

// billFromSheets prices each window by the log's price sheet in force
// when it started (priced_usage, the rule the FOCUS export follows): a
// line's charge is the exact sum of its windows' costs, rounded once.
func (s *Infrastore) billFromSheets(ctx context.Context, req BillRequest) (*Bill, error) {
	group, join, args, err := groupExpr(req.GroupBy)
	if err != nil {
		return nil, err
	}
	var currency sql.NullString
	if err := s.db.QueryRowContext(ctx, `SELECT arg_max(currency, effective_time) FROM price_sheets WHERE effective_time < ?`,
		req.To.UnixMicro()).Scan(&currency); err != nil {
		return nil, fmt.Errorf("infrastore: bill: %w", err)
	}
	q := `SELECT grouping(grp, band) = 0 AS line, grp, band,
		count(DISTINCT (user, job, task_index)), count(*),
		sum(cpu_limit_core_hours), sum(cpu_reservation_core_hours), sum(cpu_usage_core_hours),
		sum(memory_limit_gib_hours), sum(memory_reservation_gib_hours), sum(memory_usage_gib_hours),
		sum(disk_usage_gib_hours),
		string_agg(DISTINCT basis, '+' ORDER BY basis),
		sum(cpu_core_hours * cpu_price + memory_gib_hours * memory_price + disk_gib_hours * disk_price + gpu_hours * gpu_price)
	FROM (
		SELECT ` + group + ` AS grp, u.billed_band AS band, u.*
		FROM priced_usage u ` + join + `
		WHERE u.start_time >= ? AND u.start_time < ?` + userFilter(req.User) + `
	)
	GROUP BY GROUPING SETS ((grp, band), ())`
	args = append(args, req.From.UnixMicro(), req.To.UnixMicro())
	return s.billLines(ctx, req, cmp.Or(currency.String, "USD"), nil, q, args)
}

// userFilter is the condition that keeps only user's windows of
// task_usage u (or priced_usage u), none when user is "".
func userFilter(user string) string {
	if user == "" {
		return ""
	}
	return " AND u.user = " + sqlString(user)
}

// billLines runs a bill's query and sums its lines: with rates, each line
// is priced on its band's basis; without, the query's last two columns
// are the basis and the exact charge.
func (s *Infrastore) billLines(ctx context.Context, req BillRequest, currency string, rates *Rates, q string, args []any) (*Bill, error) {
	b := &Bill{From: req.From.UTC(), To: req.To.UTC(), GroupBy: req.GroupBy, Currency: currency, Lines: []BillLine{}, Rates: rates}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("infrastore: bill: %w", err)
	}
	defer rows.Close()
	var total *BillLine
	for rows.Next() {
		var isLine bool
		var grp, band sql.NullString
		var l BillLine
		var sums [7]any
		var basis sql.NullString
		var exact any
		if err := rows.Scan(&isLine, &grp, &band, &l.Tasks, &l.Windows,
			&sums[0], &sums[1], &sums[2], &sums[3], &sums[4], &sums[5], &sums[6], &basis, &exact); err != nil {
			return nil, fmt.Errorf("infrastore: bill: %w", err)
		}
		q := make([]Decimal, len(sums))
		for i, v := range sums {
			q[i] = quantity(v)
		}
		l.CPUCoreHoursLimit, l.CPUCoreHoursReservation, l.CPUCoreHoursUsage = q[0], q[1], q[2]
		l.MemoryGiBHoursLimit, l.MemoryGiBHoursReservation, l.MemoryGiBHoursUsage = q[3], q[4], q[5]
		l.DiskGiBHours = q[6]
		if !isLine {
			total = &l
			continue
		}
		l.Group, l.Band = grp.String, band.String
		if rates != nil {
			l.Basis, l.Charge = charge(rates, &l)
		} else {
			l.Basis, l.Charge = basis.String, costOf(exact)
		}
		b.Lines = append(b.Lines, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("infrastore: bill: %w", err)
	}
	sort.Slice(b.Lines, func(i, j int) bool {
		x, y := b.Lines[i], b.Lines[j]
		if x.Group != y.Group {
			return x.Group < y.Group
		}
		return rankOf(x.Band) < rankOf(y.Band)
	})
	b.Total = zeroLine("total")
	for _, l := range b.Lines {
		b.Total.add(l)
	}
	if total != nil {
		// The lines and DuckDB's grand total are two sums of the same rows;
		// if they differ something is badly wrong, and no bill goes out.
		want, got := total.quantities(), b.Total.quantities()
		for i := range want {
			if want[i].Cmp(got[i]) != 0 || total.Windows != b.Total.Windows {
				return nil, errors.New("infrastore: bill: the lines do not add up to the total")
			}
		}
		b.Total.Tasks = total.Tasks
	}
	return b, nil
}

func zeroLine(group string) BillLine {
	z := newDecimal(0, QuantityScale)
	return BillLine{Group: group, CPUCoreHoursLimit: z, CPUCoreHoursReservation: z, CPUCoreHoursUsage: z,
		MemoryGiBHoursLimit: z, MemoryGiBHoursReservation: z, MemoryGiBHoursUsage: z, DiskGiBHours: z,
		Charge: newDecimal(0, ChargeScale)}
}

func (l *BillLine) quantities() []Decimal {
	return []Decimal{l.CPUCoreHoursLimit, l.CPUCoreHoursReservation, l.CPUCoreHoursUsage,
		l.MemoryGiBHoursLimit, l.MemoryGiBHoursReservation, l.MemoryGiBHoursUsage, l.DiskGiBHours}
}

// add adds o's windows, quantities and charge to l.
func (l *BillLine) add(o BillLine) {
	l.Windows += o.Windows
	l.CPUCoreHoursLimit = l.CPUCoreHoursLimit.Add(o.CPUCoreHoursLimit)
	l.CPUCoreHoursReservation = l.CPUCoreHoursReservation.Add(o.CPUCoreHoursReservation)
	l.CPUCoreHoursUsage = l.CPUCoreHoursUsage.Add(o.CPUCoreHoursUsage)
	l.MemoryGiBHoursLimit = l.MemoryGiBHoursLimit.Add(o.MemoryGiBHoursLimit)
	l.MemoryGiBHoursReservation = l.MemoryGiBHoursReservation.Add(o.MemoryGiBHoursReservation)
	l.MemoryGiBHoursUsage = l.MemoryGiBHoursUsage.Add(o.MemoryGiBHoursUsage)
	l.DiskGiBHours = l.DiskGiBHours.Add(o.DiskGiBHours)
	l.Charge = l.Charge.Add(o.Charge)
}

func rankOf(band string) int {
	if r, ok := bandRank[band]; ok {
		return r
	}
	return len(bandRank)
}

// groupExpr returns the SQL of a group key, the join it needs and its
// arguments.
func groupExpr(groupBy string) (expr, join string, args []any, err error) {
	switch {
	case groupBy == "user":
		return "coalesce(u.user, '')", "", nil, nil
	case groupBy == "job":
		return "coalesce(u.user, '') || '/' || u.job", "", nil, nil
	case strings.HasPrefix(groupBy, "label:"):
		key := strings.TrimPrefix(groupBy, "label:")
		if key == "" {
			return "", "", nil, fmt.Errorf("%w: group_by: label: needs a key, e.g. label:team", ErrInvalid)
		}
		return "coalesce(s.labels[?], '')", "LEFT JOIN job_specs s ON s.position = u.spec_position", []any{key}, nil
	}
	return "", "", nil, fmt.Errorf("%w: group_by: %q is not user, job or label:KEY", ErrInvalid, groupBy)
}

// costOf reads an exact sum of costs as a charge, rounded half away from
// zero to ChargeScale.
func costOf(v any) Decimal {
	if d, ok := v.(duckdb.Decimal); ok && d.Value != nil {
		return Decimal{Unscaled: new(big.Int).Set(d.Value), Scale: int32(d.Scale)}.Round(ChargeScale)
	}
	return newDecimal(0, ChargeScale)
}

// quantity reads a DECIMAL(38,9) sum.
func quantity(v any) Decimal {
	if d, ok := v.(duckdb.Decimal); ok && d.Value != nil {
		return Decimal{Unscaled: new(big.Int).Set(d.Value), Scale: int32(d.Scale)}.Round(QuantityScale)
	}
	return newDecimal(0, QuantityScale)
}

// charge prices a line on its band's basis.
func charge(r *Rates, l *BillLine) (string, Decimal) {
	br, ok := r.Bands[l.Band]
	if !ok {
		return "none", newDecimal(0, ChargeScale)
	}
	cpu, mem := l.CPUCoreHoursLimit, l.MemoryGiBHoursLimit
	switch br.Basis {
	case BasisReservation:
		cpu, mem = l.CPUCoreHoursReservation, l.MemoryGiBHoursReservation
	case BasisUsage:
		cpu, mem = l.CPUCoreHoursUsage, l.MemoryGiBHoursUsage
	}
	c := cpu.Mul(br.CPUCoreHour).Add(mem.Mul(br.MemoryGiBHour)).Add(l.DiskGiBHours.Mul(br.DiskGiBHour))
	return br.Basis, c.Round(ChargeScale)
}

// Bill export formats.
const (
	FormatCSV     = "csv"
	FormatJSON    = "json"
	FormatParquet = "parquet"
)

// Export writes the bill as csv, json or parquet.
func (b *Bill) Export(ctx context.Context, w io.Writer, format string) error {
	switch format {
	case FormatCSV:
		return b.WriteCSV(w)
	case FormatJSON:
		return b.WriteJSON(w)
	case FormatParquet:
		return b.WriteParquet(ctx, w)
	}
	return fmt.Errorf("%w: format: %q is not csv, json or parquet", ErrInvalid, format)
}

var billColumns = []string{
	"period_from", "period_to", "group", "band", "basis", "tasks", "windows",
	"cpu_core_hours_limit", "cpu_core_hours_reservation", "cpu_core_hours_usage",
	"memory_gib_hours_limit", "memory_gib_hours_reservation", "memory_gib_hours_usage",
	"disk_gib_hours", "charge", "currency",
}

// WriteCSV writes one line per group and band, with a header.
func (b *Bill) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(billColumns); err != nil {
		return err
	}
	from, to := b.From.UTC().Format(time.RFC3339Nano), b.To.UTC().Format(time.RFC3339Nano)
	for _, l := range b.Lines {
		if err := cw.Write([]string{
			from, to, l.Group, l.Band, l.Basis, strconv.FormatInt(l.Tasks, 10), strconv.FormatInt(l.Windows, 10),
			l.CPUCoreHoursLimit.String(), l.CPUCoreHoursReservation.String(), l.CPUCoreHoursUsage.String(),
			l.MemoryGiBHoursLimit.String(), l.MemoryGiBHoursReservation.String(), l.MemoryGiBHoursUsage.String(),
			l.DiskGiBHours.String(), l.Charge.String(), b.Currency,
		}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes the whole bill, lines, total and rates, indented.
func (b *Bill) WriteJSON(w io.Writer) error {
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(out, '\n'))
	return err
}

// WriteParquet writes the lines as a Parquet file, with DuckDB's writer in a
// private in-memory database: it sees only the bill, and one thread writes
// the rows in order so the file is the same every time.
func (b *Bill) WriteParquet(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "corral-bill-*")
	if err != nil {
		return fmt.Errorf("infrastore: parquet: %w", err)
	}
	defer os.RemoveAll(dir)
	conn, closeDB, err := privateDuckDB(ctx, ":memory:")
	if err != nil {
		return fmt.Errorf("infrastore: parquet: %w", err)
	}
	defer closeDB()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE bill (
		period_from TIMESTAMP, period_to TIMESTAMP, "group" VARCHAR, band VARCHAR, basis VARCHAR,
		tasks BIGINT, windows BIGINT,
		cpu_core_hours_limit DECIMAL(38,9), cpu_core_hours_reservation DECIMAL(38,9), cpu_core_hours_usage DECIMAL(38,9),
		memory_gib_hours_limit DECIMAL(38,9), memory_gib_hours_reservation DECIMAL(38,9), memory_gib_hours_usage DECIMAL(38,9),
		disk_gib_hours DECIMAL(38,9), charge DECIMAL(38,6), currency VARCHAR)`); err != nil {
		return fmt.Errorf("infrastore: parquet: %w", err)
	}
	err = conn.Raw(func(dc any) error {
		a, err := duckdb.NewAppender(dc.(driver.Conn), "", "", "bill")
		if err != nil {
			return err
		}
		for _, l := range b.Lines {
			q := func(d Decimal, scale int32) driver.Value { return d.Round(scale).unscaled() }
			if err := a.AppendRow(b.From.UTC(), b.To.UTC(), l.Group, l.Band, l.Basis, l.Tasks, l.Windows,
				q(l.CPUCoreHoursLimit, 9), q(l.CPUCoreHoursReservation, 9), q(l.CPUCoreHoursUsage, 9),
				q(l.MemoryGiBHoursLimit, 9), q(l.MemoryGiBHoursReservation, 9), q(l.MemoryGiBHoursUsage, 9),
				q(l.DiskGiBHours, 9), q(l.Charge, 6), b.Currency); err != nil {
				return errors.Join(err, a.Close())
			}
		}
		return a.Close()
	})
	if err != nil {
		return fmt.Errorf("infrastore: parquet: %w", err)
	}
	path := filepath.Join(dir, "bill.parquet")
	if _, err := conn.ExecContext(ctx, `COPY bill TO '`+strings.ReplaceAll(path, "'", "''")+`' (FORMAT parquet)`); err != nil {
		return fmt.Errorf("infrastore: parquet: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("infrastore: parquet: %w", err)
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
