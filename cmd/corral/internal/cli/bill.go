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

func (a *app) billCommand() *cobra.Command {
	var from, to, groupBy, format, out, rates, db, period string
	var focus focusFlags
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
			now := time.Now()
			f, err := parseTime(from, now)
			if err != nil {
				return usageErr("--from: %v", err)
			}
			t, err := parseTime(to, now)
			if err != nil {
				return usageErr("--to: %v", err)
			}
			if period != "" {
				p, err := time.Parse("2006-01", period)
				if err != nil {
					return usageErr("--period %q: want a month, e.g. 2026-10", period)
				}
				f, t = p, p.AddDate(0, 1, 0)
			}
			if !f.Before(t) {
				return usageErr("--to (%s) must be after --from (%s)", t.Format(time.RFC3339), f.Format(time.RFC3339))
			}
			switch {
			case cmd.Flags().Changed("cell") && db == "":
				return usageErr("--cell: only with --db (the master's bills name its own cell)")
			case cmd.Flags().Changed("cell") && !nameRE(focus.cell):
				return usageErr("--cell %q: want a DNS label (lowercase letters, digits and '-')", focus.cell)
			case db != "" && focus.cell == "":
				focus.cell = a.getenv("CORRAL_CELL")
			}
			switch format {
			case "", "csv", "json", "parquet":
			case "focus", "focus-parquet":
				return a.exportFocus(cmd.Context(), f, t, format, out, db, focus)
			default:
				return usageErr("--format %q: want csv, json, parquet, focus or focus-parquet", format)
			}
			if focus.explain != "" {
				return usageErr("--explain needs --format focus")
			}
			if format == "parquet" && out == "" && isTerminal(a.stdout()) {
				return usageErr("parquet is binary: give --out FILE")
			}
			req := &apipb.BillRequest{FromUs: f.UnixMicro(), ToUs: t.UnixMicro(), GroupBy: groupBy, Format: format, User: focus.user}
			if req.Format == "" {
				req.Format = "csv"
			}
			if rates != "" {
				b, err := os.ReadFile(rates)
				if err != nil {
					return err
				}
				req.RatesJson = string(b)
			}
			ctx := cmd.Context()
			var rep *apipb.BillReply
			err = a.fromInfrastore(ctx, db, InfraOptions{}, func(inf Infra) (err error) {
				rep, err = inf.Bill(ctx, req)
				return err
			}, func(cl *client) (err error) {
				rep, err = readValue(ctx, cl, apipb.CellClient.Bill, req)
				return err
			})
			if err != nil {
				return err
			}
			if out != "" {
				if err := os.WriteFile(out, rep.Data, 0o644); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout(), "bill of %s to %s (%s) written to %s (%d bytes)\n", f.Format(time.RFC3339), t.Format(time.RFC3339), rep.Format, out, len(rep.Data))
				return nil
			}
			if format != "" {
				_, err := a.stdout().Write(rep.Data)
				return err
			}
			// No --format: the CSV bill as a table (or -o json/yaml/csv).
			recs, err := csv.NewReader(bytes.NewReader(rep.Data)).ReadAll()
			if err != nil || len(recs) == 0 {
				return fmt.Errorf("reading the bill: %v", err)
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
			if a.output == "table" {
				fmt.Fprintf(a.stdout(), "bill of %s to %s, by %s\n", f.Local().Format("2006-01-02 15:04"), t.Local().Format("2006-01-02 15:04"), orDefault(groupBy, "user"))
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
		},
	}
	c.Flags().StringVar(&from, "from", "today", "start of the period (RFC 3339, a date, today, 1d for a day ago, ...)")
	c.Flags().StringVar(&to, "to", "now", "end of the period, excluded")
	c.Flags().StringVar(&groupBy, "group-by", "user", "user, job or label:KEY")
	c.Flags().StringVar(&format, "format", "", "export as csv, json or parquet instead of a table")
	c.Flags().StringVar(&out, "out", "", "write the export to this file")
	c.Flags().StringVar(&rates, "rates", "", "what-if: price the period by this rate table (JSON or YAML) instead of the cell's price sheets")
	c.Flags().StringVar(&db, "db", "", "bill from this Infrastore (DuckDB) file directly rather than the master's")
	c.Flags().StringVar(&period, "period", "", "a billing period (month, UTC) instead of --from/--to, e.g. 2026-10")
	c.Flags().StringVar(&focus.granularity, "granularity", "task", "FOCUS rows per task or job")
	c.Flags().StringVar(&focus.accountBy, "account-by", "user", "FOCUS SubAccount: user or label:KEY")
	c.Flags().StringVar(&focus.idle, "idle", "separate", "idle capacity in FOCUS: none, separate or share")
	c.Flags().StringVar(&focus.explain, "explain", "", "with --format focus: the usage windows behind the row with this x_RowId")
	c.Flags().StringVar(&focus.user, "user", "", "only this user's costs (default: yours; an admin's default is every user's)")
	c.Flags().StringVar(&focus.cell, "cell", "", "with --db: the cell's name, which must be the one the file records (default $CORRAL_CELL; names the cell of a file that records none)")
	c.AddCommand(a.billCloseCommand())
	return c
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
