package infrastoreapi

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
)

// TestDescribeThroughQuery: a Query that says describe answers the
// schema of a real file as a query's reply (the tables; every column; one
// table's columns with its title), and bad requests are refused naming
// the field.
func TestDescribeThroughQuery(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "infra.duckdb"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	describe := func(d *apipb.DescribeRequest) (*apipb.QueryReply, error) {
		return s.Query(ctx, &apipb.QueryRequest{Describe: d})
	}
	tables, err := describe(&apipb.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tables.Columns, []string{"name", "kind", "description"}) || len(tables.Rows) < 20 {
		t.Fatalf("tables: %v, %d rows", tables.Columns, len(tables.Rows))
	}
	names := map[string]bool{}
	for _, r := range tables.Rows {
		names[r.Values[0]] = true
		if r.Values[2] == "" || len(r.Null) != 3 {
			t.Errorf("table row %v", r.Values)
		}
	}
	if !names["task_usage"] || !names["tasks_at(ts)"] || !names["state_diff(t1, t2)"] {
		t.Errorf("tables: %v", names)
	}
	all, err := describe(&apipb.DescribeRequest{Columns: true})
	if err != nil {
		t.Fatal(err)
	}
	one, err := describe(&apipb.DescribeRequest{Table: "task_usage"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(one.Title, "task_usage (table): ") || !slices.Equal(one.Columns, []string{"column", "type", "description"}) {
		t.Errorf("task_usage: title %q, columns %v", one.Title, one.Columns)
	}
	var fromAll [][]string
	for _, r := range all.Rows {
		if r.Values[0] == "task_usage" {
			fromAll = append(fromAll, r.Values[1:])
		}
	}
	if len(fromAll) != len(one.Rows) || len(one.Rows) == 0 {
		t.Fatalf("task_usage: %d columns alone, %d among all", len(one.Rows), len(fromAll))
	}
	for i, r := range one.Rows {
		if !slices.Equal(r.Values, fromAll[i]) {
			t.Errorf("task_usage column %d: %v alone, %v among all", i, r.Values, fromAll[i])
		}
	}
	for _, bad := range []struct {
		req   *apipb.QueryRequest
		field string
	}{
		{&apipb.QueryRequest{Describe: &apipb.DescribeRequest{Table: "nope"}}, `table: no table, view or macro is named "nope"`},
		{&apipb.QueryRequest{Describe: &apipb.DescribeRequest{Table: "events", Columns: true}}, "describe.columns:"},
		{&apipb.QueryRequest{Sql: "SELECT 1", Describe: &apipb.DescribeRequest{}}, "sql: give a query or describe"},
	} {
		t.Run(bad.field, func(t *testing.T) {
			_, err := s.Query(ctx, bad.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), bad.field) {
				t.Errorf("%v: %v, want InvalidArgument naming %s", bad.req, err, bad.field)
			}
		})
	}
}
