package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/ops"
	"github.com/corralhq/corral/events/storeopen"
)

// openInfra opens the Infrastore file path, given by flag, or says why
// this binary cannot.
func (a *app) openInfra(ctx context.Context, flag, path string, opts InfraOptions) (Infra, error) {
	if a.env.OpenInfra == nil {
		return nil, errors.New("this corral binary was built without the Infrastore")
	}
	if !opts.ReadOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	inf, err := a.env.OpenInfra(ctx, path, opts)
	if err != nil {
		if strings.Contains(err.Error(), "lock") {
			instead := "query it through the master, without " + flag
			if flag == "--infrastore" {
				instead = "replay the cell's log with --data or --store instead"
			}
			return nil, fmt.Errorf("%w\n(a running master holds %s: %s, or stop it first)", err, path, instead)
		}
		return nil, err
	}
	return inf, nil
}

// fromInfrastore decides where a read of the Infrastore is answered, for
// every verb that offers --db: with a file named, by that DuckDB file opened
// here read-only, and the master is not asked; else by the master, whose
// client the verb reads through.
func (a *app) fromInfrastore(ctx context.Context, db string, opts InfraOptions, here func(Infra) error, master func(*client) error) error {
	if db != "" {
		opts.ReadOnly = true
		inf, err := a.openInfra(ctx, "--db", db, opts)
		if err != nil {
			return err
		}
		defer inf.Close()
		return here(inf)
	}
	cl, err := a.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	return master(cl)
}

func (a *app) sqlCommand() *cobra.Command {
	var file, db string
	var timeout time.Duration
	var describe bool
	c := &cobra.Command{
		Use:   `sql "SELECT ..." | -f FILE | --describe [TABLE]`,
		Short: "query the cell's whole history with SQL (read-only, DuckDB)",
		Long: `Run one read-only query on the Infrastore: the master's (through its API), or
a DuckDB file directly with --db. --describe lists the tables, views and
macros there are to query, one line each; --describe TABLE lists a table's
columns with their DuckDB types and what they mean. The master's answers
admins only: its tables hold every user's usage and costs (a user reads their
own with corral bill).`,
		Example: `  corral sql --describe
  corral sql --describe task_usage
  corral sql "SELECT type, count(*) AS n FROM task_events GROUP BY type ORDER BY n DESC"
  corral sql -f report.sql -o csv
  corral sql --db corral-data/infrastore.duckdb "SELECT count(*) FROM events"`,
		Args: args(0, 1, "one query, or -f FILE, or --describe [TABLE]"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			var query string
			switch {
			case describe && file != "":
				return usageErr("--describe takes a table's name, not -f FILE")
			case describe:
			case file != "" && len(argv) == 0:
				b, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				query = string(b)
			case file == "" && len(argv) == 1:
				query = argv[0]
			default:
				return usageErr("give the query as one argument or with -f FILE, not both")
			}
			ctx := cmd.Context()
			req := &apipb.QueryRequest{Sql: query, TimeoutMs: timeout.Milliseconds()}
			if describe {
				req.Describe = &apipb.DescribeRequest{}
				if len(argv) == 1 {
					if req.Describe.Table = strings.TrimSpace(argv[0]); req.Describe.Table == "" {
						return usageErr("--describe TABLE: the table's name is empty; --describe alone lists the tables")
					}
				}
			}
			var res *apipb.QueryReply
			err := a.fromInfrastore(ctx, db, InfraOptions{}, func(inf Infra) (err error) {
				res, err = inf.Query(ctx, req)
				return err
			}, func(cl *client) (err error) {
				if timeout > cl.AttemptTimeout() {
					cl.SetAttemptTimeout(timeout + 5*time.Second)
				}
				// The master cuts a reply to fit this, never past it.
				res, err = readValue(ctx, cl, apipb.CellClient.Query, req, grpc.MaxCallRecvMsgSize(auth.MaxReplyMsgSize))
				return err
			})
			if err != nil {
				return queryTimeLimit(err)
			}
			if res.Truncated {
				by := res.TruncatedBy
				if by == "" {
					by = "a limit"
				}
				defer a.note("(only the first %d rows are shown, cut by %s: add LIMIT or aggregate)", len(res.Rows), by)
			}
			if res.Title != "" && a.output == "table" {
				fmt.Fprintf(a.stdout(), "%s\n\n", res.Title)
			}
			return a.show(queryTable(res), queryJSON(res))
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "", "read the query from this file")
	c.Flags().StringVar(&db, "db", "", "query this Infrastore (DuckDB) file directly rather than the master's")
	c.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "cancel the query after this long")
	c.Flags().BoolVar(&describe, "describe", false, "list the tables, or with TABLE its columns, instead of running a query")
	return c
}

// queryTimeLimit words a query the Infrastore stopped at its time limit
// as that (the reply names the limit and the flags that set it), not as a
// master that did not answer.
func queryTimeLimit(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "time limit") {
		return err
	}
	return errors.New(st.Message())
}

func queryTable(r *apipb.QueryReply) *table {
	t := &table{cols: r.Columns}
	for _, row := range r.Rows {
		t.add(row.Values...)
	}
	if len(t.cols) == 0 {
		t.cols = []string{"(no columns)"}
	}
	return t
}

// queryJSON renders rows as objects; values that read as JSON numbers stay
// numbers, NULL is null, the rest are strings.
func queryJSON(r *apipb.QueryReply) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, row := range r.Rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('{')
		for j, col := range r.Columns {
			if j > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(col)
			b.Write(k)
			b.WriteByte(':')
			switch v := row.Values[j]; {
			case j < len(row.Null) && row.Null[j]:
				b.WriteString("null")
			case json.Valid([]byte(v)) && isNumber(v):
				b.WriteString(v)
			default:
				s, _ := json.Marshal(v)
				b.Write(s)
			}
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes()
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && !strings.ContainsAny(s, "xXnN")
}

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

func (a *app) infrastoreCommand() *cobra.Command {
	c := &cobra.Command{Use: "infrastore", Short: "rebuild the Infrastore from the log, or load the public Google trace into it"}
	var db, store, data string
	paths := func() (string, string) {
		d := a.dataDir(data)
		dbp, st := db, store
		if dbp == "" {
			dbp = filepath.Join(d, "infrastore.duckdb")
		}
		if st == "" {
			st = a.getenv("CORRAL_STORE")
		}
		if st == "" {
			st = filepath.Join(d, "events.db")
		}
		return dbp, st
	}
	rebuild := &cobra.Command{
		Use:   "rebuild",
		Short: "re-derive every Infrastore table from the log (stop the master holding the file first)",
		Args:  args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			dbp, st := paths()
			log, err := storeopen.Open(ctx, st, storeopen.Options{NoMigrate: true})
			if err != nil {
				return fmt.Errorf("--store %s: %w", st, err)
			}
			defer log.Close()
			inf, err := a.openInfra(ctx, "--db", dbp, InfraOptions{})
			if err != nil {
				return err
			}
			defer inf.Close()
			head, err := log.Head(ctx)
			if err != nil {
				return fmt.Errorf("--store %s: %w", st, err)
			}
			start := time.Now()
			showing, stop := context.WithCancel(ctx)
			shown := make(chan struct{})
			go func() {
				defer close(shown)
				showProgress(showing, a.stderr(), isTerminal(a.stderr()), head, func() (int64, error) { return inf.Position(showing) })
			}()
			pos, err := inf.Rebuild(ctx, log)
			stop()
			<-shown
			if err != nil {
				return err
			}
			took := time.Since(start)
			fmt.Fprintf(a.stdout(), "%s rebuilt from %s up to position %d in %s (%s events/s)\n", dbp, st, pos,
				took.Truncate(time.Millisecond), groupDigits(int64(float64(pos)/max(took.Seconds(), 1e-9))))
			return nil
		},
	}
	imp := &cobra.Command{
		Use:     "import-google-trace DIR",
		Short:   "load the public Google cluster trace (clusterdata-2011-2 task_events and job_events) as a cell's history",
		Example: "  corral infrastore import-google-trace --db trace.duckdb ~/traces/google-clusterdata-2011-2",
		Args:    args(1, 1, "the trace directory"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			dbp, _ := paths()
			inf, err := a.openInfra(cmd.Context(), "--db", dbp, InfraOptions{})
			if err != nil {
				return err
			}
			defer inf.Close()
			msg, err := inf.ImportGoogleTrace(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "%s: %s\n", dbp, msg)
			a.note("next: corral sql --db %s \"SELECT event_type, count(*) FROM task_events GROUP BY ALL ORDER BY 1\"", dbp)
			return nil
		},
	}
	for _, x := range []*cobra.Command{rebuild, imp} {
		x.Flags().StringVar(&db, "db", "", "the Infrastore file (default DATA/infrastore.duckdb)")
		x.Flags().StringVar(&data, "data", "", "the data directory `DIR` of a cell run by corral up (default $CORRAL_DATA or "+DefaultData+")")
	}
	rebuild.Flags().StringVar(&store, "store", "", "the event log: postgres://... or a SQLite file (default $CORRAL_STORE or DATA/events.db)")
	c.AddCommand(rebuild, imp, a.infrastoreServeCommand())
	return c
}

// infrastoreServeCommand is the Infrastore process a master runs: it holds
// the DuckDB file, ingests the log into it and answers the master's Query
// and Bill on a unix socket. The master starts it (see infraProcess); it is
// not meant to be run by hand.
func (a *app) infrastoreServeCommand() *cobra.Command {
	var db, store, sock string
	var opts InfraOptions
	c := &cobra.Command{
		Use:    "serve",
		Short:  "run the Infrastore process of a master (started by the master)",
		Hidden: true,
		Args:   args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if store == "" {
				store = a.getenv("CORRAL_STORE") // from its master: a password in argv would show in ps
			}
			if db == "" || store == "" || sock == "" {
				return usageErr("--db, --store (or CORRAL_STORE) and --socket are required")
			}
			if err := joinCgroup(); err != nil {
				return err
			}
			log, err := a.serverLogger(a.stderr())
			if err != nil {
				return err
			}
			log = log.With("process", "infrastore")
			// The master may die without a word (SIGKILL): the kernel's
			// parent-death signal ends this process then, and this check
			// covers a parent that exits another way.
			parent := os.Getppid()
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				for ctx.Err() == nil && os.Getppid() == parent {
					time.Sleep(time.Second)
				}
				cancel()
			}()
			st, err := storeopen.Open(ctx, store, storeopen.Options{NoMigrate: true})
			if err != nil {
				return fmt.Errorf("--store %s: %w", store, err)
			}
			defer st.Close()
			inf, err := a.openInfra(ctx, "--db", db, opts)
			if err != nil {
				return fmt.Errorf("--db %s: %w", db, err)
			}
			defer inf.Close()
			_ = os.Remove(sock)
			lis, err := net.Listen("unix", sock)
			if err != nil {
				return fmt.Errorf("--socket %s: %w", sock, err)
			}
			defer lis.Close()
			if err := os.Chmod(sock, 0o600); err != nil {
				return err
			}
			timeout := opts.QueryTimeout
			if timeout <= 0 {
				timeout = 30 * time.Second
			}
			g := grpc.NewServer(ops.NewRecovery(log, nil).ServerOptions()...)
			apipb.RegisterCellServer(g, &infraServer{inf: inf, timeout: timeout + 10*time.Second, log: log})
			go func() {
				// Ingestion stopping is logged; queries answer from what
				// the file holds.
				if err := inf.Run(ctx, st); err != nil && ctx.Err() == nil {
					log.Error("Infrastore ingestion stopped; `corral sql` answers from what it holds", "err", err)
				}
			}()
			go func() {
				<-ctx.Done()
				g.Stop()
			}()
			log.Info("Infrastore serving", "db", db, "socket", sock, "memory_limit", opts.MemoryLimit, "threads", opts.Threads,
				"max_rows", opts.MaxRows, "max_result_bytes", opts.MaxResultBytes, "query_timeout", timeout, "memory_budget", opts.MemoryBudget)
			if err := g.Serve(lis); err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&db, "db", "", "the Infrastore file")
	f.StringVar(&store, "store", "", "the event log (default $CORRAL_STORE)")
	f.StringVar(&sock, "socket", "", "the unix socket to answer on")
	f.StringVar(&opts.Cell, "cell", "", "the cell's name, in FOCUS exports")
	f.StringVar(&opts.MemoryLimit, "memory-limit", "", "DuckDB's memory_limit")
	f.IntVar(&opts.Threads, "threads", 0, "DuckDB's threads")
	f.IntVar(&opts.MaxRows, "max-rows", 0, "rows per result")
	f.Int64Var(&opts.MaxResultBytes, "max-result-bytes", 0, "bytes of values per result")
	f.DurationVar(&opts.QueryTimeout, "query-timeout", 0, "default and longest query")
	f.Int64Var(&opts.MemoryBudget, "memory-budget", 0, "bytes this process may hold (its cgroup's limit): queries are interrupted as it nears them")
	return c
}
