package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
