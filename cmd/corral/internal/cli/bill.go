package cli

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
)

// billFlags are `corral bill`'s flags.
type billFlags struct {
	from, to, groupBy, format, out, rates, db, period string
	focus                                             focusFlags
}

func (a *app) billCommand() *cobra.Command {
	var f billFlags
	c := &cobra.Command{
		Use:   "bill",
		Short: "usage-based bill of a period, per user, job or label, and priority band",
		Long: `Compute the bill of [--from, --to) from the cell's measured usage: per group and
band, CPU core-hours and memory GiB-hours on limit, reservation and usage,
disk GiB-hours, and the charge from the rate table. Print it as a table, or
export it with --format csv, json or parquet (--out FILE). Each usage
window is priced by the price sheet in force when it started (corral price).

--format focus exports the FinOps FOCUS dataset (CSV; focus-parquet for
Parquet): a row per hour, task (or job) and meter, with idle capacity
(--idle), corrections of closed months, and the log positions each row came
from; --explain ROW_ID lists the usage windows behind one row. A closed
billing period (corral bill close) exports the same bytes every time.
With --db FILE (a copy of the Infrastore) the export names the cell the
file records, so it is the master's bytes; --cell or $CORRAL_CELL must
name that cell.

Whose costs: a user's bill holds only their own jobs' usage, --user or
not (naming another user is refused); an admin's holds every user's, or
with --user NAME only that user's. A user's FOCUS export has no idle
capacity rows (the cell's, billed to no one) and refuses --idle share.
The master decides this (commands.CostsScope); --db reads a file whose
reader sees every user's costs.`,
		Example: `  corral bill                              # today so far
  corral bill --from yesterday --to today --group-by job --format csv --out bill.csv
  corral bill --period 2026-10 --format focus --out october.csv
  corral bill --period 2026-10 --format focus-parquet --idle share --account-by label:team --out october.parquet
  corral bill close 2026-10`,
		Args: args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.bill(cmd, &f)
		},
	}
	c.Flags().StringVar(&f.from, "from", "today", "start of the period (RFC 3339, a date, today, 1d for a day ago, ...)")
	c.Flags().StringVar(&f.to, "to", "now", "end of the period, excluded")
	c.Flags().StringVar(&f.groupBy, "group-by", "user", "user, job or label:KEY")
	c.Flags().StringVar(&f.format, "format", "", "export as csv, json or parquet instead of a table")
	c.Flags().StringVar(&f.out, "out", "", "write the export to this file")
	c.Flags().StringVar(&f.rates, "rates", "", "what-if: price the period by this rate table (JSON or YAML) instead of the cell's price sheets")
	c.Flags().StringVar(&f.db, "db", "", "bill from this Infrastore (DuckDB) file directly rather than the master's")
	c.Flags().StringVar(&f.period, "period", "", "a billing period (month, UTC) instead of --from/--to, e.g. 2026-10")
	c.Flags().StringVar(&f.focus.granularity, "granularity", "task", "FOCUS rows per task or job")
	c.Flags().StringVar(&f.focus.accountBy, "account-by", "user", "FOCUS SubAccount: user or label:KEY")
	c.Flags().StringVar(&f.focus.idle, "idle", "separate", "idle capacity in FOCUS: none, separate or share")
	c.Flags().StringVar(&f.focus.explain, "explain", "", "with --format focus: the usage windows behind the row with this x_RowId")
	c.Flags().StringVar(&f.focus.user, "user", "", "only this user's costs (default: yours; an admin's default is every user's)")
	c.Flags().StringVar(&f.focus.cell, "cell", "", "with --db: the cell's name, which must be the one the file records (default $CORRAL_CELL; names the cell of a file that records none)")
	c.AddCommand(a.billCloseCommand())
	return c
}

// bill checks the flags, then exports FOCUS or makes the bill and writes it.
func (a *app) bill(cmd *cobra.Command, f *billFlags) error {
	from, to, err := f.billPeriod(time.Now())
	if err != nil {
		return err
	}
	switch {
	case cmd.Flags().Changed("cell") && f.db == "":
		return usageErr("--cell: only with --db (the master's bills name its own cell)")
	case cmd.Flags().Changed("cell") && !nameRE(f.focus.cell):
		return usageErr("--cell %q: want a DNS label (lowercase letters, digits and '-')", f.focus.cell)
	case f.db != "" && f.focus.cell == "":
		f.focus.cell = a.getenv("CORRAL_CELL")
	}
	switch f.format {
	case "", "csv", "json", "parquet":
	case "focus", "focus-parquet":
		return a.exportFocus(cmd.Context(), from, to, f.format, f.out, f.db, f.focus)
	default:
		return usageErr("--format %q: want csv, json, parquet, focus or focus-parquet", f.format)
	}
	if f.focus.explain != "" {
		return usageErr("--explain needs --format focus")
	}
	if f.format == "parquet" && f.out == "" && isTerminal(a.stdout()) {
		return usageErr("parquet is binary: give --out FILE")
	}
	req := &apipb.BillRequest{FromUs: from.UnixMicro(), ToUs: to.UnixMicro(), GroupBy: f.groupBy, Format: f.format, User: f.focus.user}
	if req.Format == "" {
		req.Format = "csv"
	}
	if f.rates != "" {
		b, err := os.ReadFile(f.rates)
		if err != nil {
			return err
		}
		req.RatesJson = string(b)
	}
	ctx := cmd.Context()
	var rep *apipb.BillReply
	err = a.fromInfrastore(ctx, f.db, InfraOptions{}, func(inf Infra) (err error) {
		rep, err = inf.Bill(ctx, req)
		return err
	}, func(cl *client) (err error) {
		rep, err = readValue(ctx, cl, apipb.CellClient.Bill, req)
		return err
	})
	if err != nil {
		return err
	}
	return a.writeBill(f, from, to, rep)
}

// billPeriod is [--from, --to), or the month of --period.
func (f *billFlags) billPeriod(now time.Time) (from, to time.Time, err error) {
	if from, err = parseTime(f.from, now); err != nil {
		return from, to, usageErr("--from: %v", err)
	}
	if to, err = parseTime(f.to, now); err != nil {
		return from, to, usageErr("--to: %v", err)
	}
	if f.period != "" {
		p, err := time.Parse("2006-01", f.period)
		if err != nil {
			return from, to, usageErr("--period %q: want a month, e.g. 2026-10", f.period)
		}
		from, to = p, p.AddDate(0, 1, 0)
	}
	if !from.Before(to) {
		return from, to, usageErr("--to (%s) must be after --from (%s)", to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	return from, to, nil
}

// writeBill writes the bill to --out, or as exported with --format, or as
// a table (or -o json/yaml/csv).
func (a *app) writeBill(f *billFlags, from, to time.Time, rep *apipb.BillReply) error {
	if f.out != "" {
		if err := os.WriteFile(f.out, rep.Data, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout(), "bill of %s to %s (%s) written to %s (%d bytes)\n", from.Format(time.RFC3339), to.Format(time.RFC3339), rep.Format, f.out, len(rep.Data))
		return nil
	}
	if f.format != "" {
		_, err := a.stdout().Write(rep.Data)
		return err
	}
	// No --format: the CSV bill as a table (or -o json/yaml/csv).
	tab, rows, err := billTable(rep.Data)
	if err != nil {
		return err
	}
	if a.output == "table" {
		fmt.Fprintf(a.stdout(), "bill of %s to %s, by %s\n", from.Local().Format("2006-01-02 15:04"), to.Local().Format("2006-01-02 15:04"), orDefault(f.groupBy, "user"))
		if len(rows) == 0 {
			fmt.Fprintln(a.stdout(), "no usage recorded in the period")
			return nil
		}
	}
	if a.output == "csv" {
		_, err := a.stdout().Write(rep.Data)
		return err
	}
	return a.show(tab, rows)
}

// billTable reads a CSV bill into a table of the columns people read, and
// into rows of every column for -o json and yaml.
func billTable(data []byte) (*table, []map[string]string, error) {
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(recs) == 0 {
		return nil, nil, fmt.Errorf("reading the bill: %v", err)
	}
	cols := recs[0]
	keep := []string{"group", "band", "basis", "tasks", "cpu_core_hours_limit", "cpu_core_hours_usage", "memory_gib_hours_limit", "memory_gib_hours_usage", "charge", "currency"}
	idx := map[string]int{}
	for i, c := range cols {
		idx[c] = i
	}
	tab := &table{}
	for _, k := range keep {
		if _, ok := idx[k]; ok {
			tab.cols = append(tab.cols, strings.ToUpper(strings.ReplaceAll(k, "_", " ")))
		}
	}
	var rows []map[string]string
	for _, r := range recs[1:] {
		var cells []string
		m := map[string]string{}
		for i, c := range cols {
			if i < len(r) {
				m[c] = r[i]
			}
		}
		rows = append(rows, m)
		for _, k := range keep {
			if i, ok := idx[k]; ok && i < len(r) {
				cells = append(cells, trimZeros(r[i]))
			}
		}
		tab.add(cells...)
	}
	return tab, rows, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// trimZeros shortens "1.250000000" to "1.25" for tables.
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
