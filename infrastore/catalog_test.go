package infrastore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestCatalogueMatchesDatabase: every table, view and macro the schema
// creates, and every column of each, has a description in the catalogue,
// and everything the catalogue describes exists, of the kind and with the
// parameters it says. A column added to a DDL without a description, or
// one dropped with its description left behind, fails here.
func TestCatalogueMatchesDatabase(t *testing.T) {
	s := openStore(t, Options{})
	ts, err := s.Describe(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Table{}
	for _, tb := range ts {
		got[tb.Name] = tb
		if tb.Description == "" {
			t.Errorf("%s %s exists in the database without a description: add it to catalogue (infrastore/catalog.go)", tb.Kind, tb.Name)
		}
		if tb.Kind != KindMacro && len(tb.Columns) == 0 {
			t.Errorf("%s %s: Describe found no columns", tb.Kind, tb.Name)
		}
		for _, c := range tb.Columns {
			if c.Description == "" {
				t.Errorf("column %s.%s (%s) exists in the database without a description: add it to catalogue (infrastore/catalog.go)", tb.Name, c.Name, c.Type)
			}
			if c.Type == "" {
				t.Errorf("column %s.%s: no type", tb.Name, c.Name)
			}
		}
	}
	used := map[string]bool{}
	for _, d := range catalogue {
		tb, ok := got[d.name]
		if !ok {
			t.Errorf("the catalogue describes %s %s, which does not exist in the database", d.kind, d.name)
			continue
		}
		if tb.Kind != d.kind {
			t.Errorf("the catalogue says %s is a %s; the database has a %s", d.name, d.kind, tb.Kind)
		}
		if !slices.Equal(tb.Params, d.params) {
			t.Errorf("the catalogue gives %s the parameters %v; the database %v", d.name, d.params, tb.Params)
		}
		if d.summary != "" && strings.Contains(d.summary, "\n") {
			t.Errorf("%s: the summary is more than one line", d.name)
		}
		for _, c := range d.columns {
			if !slices.ContainsFunc(tb.Columns, func(col Column) bool { return col.Name == c.name }) {
				t.Errorf("the catalogue describes the column %s.%s, which does not exist in the database", d.name, c.name)
			}
		}
		for _, like := range d.like {
			if docOf(like) == nil {
				t.Errorf("%s is like %s, which the catalogue does not describe", d.name, like)
			}
		}
		for _, c := range tb.Columns {
			used[c.Name] = true
		}
	}
	for name := range commonColumns {
		if !used[name] {
			t.Errorf("commonColumns describes %s, which no table has", name)
		}
	}
	if len(ts) != len(catalogue) {
		t.Errorf("Describe reports %d objects, the catalogue describes %d", len(ts), len(catalogue))
	}
}

// TestDescribeOneTable: a table, view or macro is found by its name in
// any case, with or without a macro's parentheses, with its columns and
// their DuckDB types; anything else is refused naming it and listing what
// exists, and changes nothing.
func TestDescribeOneTable(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	for _, tc := range []struct {
		ask, name, col, typ string
	}{
		{"events", "events", "payload", "JSON"},
		{"  EVENTS ", "events", "time", "TIMESTAMP"},
		{"task_usage", "task_usage", "cpu_usage_core_hours", "DECIMAL(18,9)"},
		{"priced_usage", "priced_usage", "cpu_price", "DECIMAL(18,9)"},
		{"tasks_at", "tasks_at", "state", "VARCHAR"},
		{"Tasks_At(ts)", "tasks_at", "cpu_request", "DOUBLE"},
		{"state_diff(t1, t2)", "state_diff", "change", "VARCHAR"},
		{"machines", "machines", "attributes", "MAP(VARCHAR, VARCHAR)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := s.Describe(ctx, tc.ask)
			if err != nil {
				t.Errorf("Describe(%q): %v", tc.ask, err)
				return
			}
			if len(ts) != 1 || ts[0].Name != tc.name {
				t.Errorf("Describe(%q) = %+v, want %s alone", tc.ask, ts, tc.name)
				return
			}
			i := slices.IndexFunc(ts[0].Columns, func(c Column) bool { return c.Name == tc.col })
			if i < 0 || ts[0].Columns[i].Type != tc.typ || ts[0].Columns[i].Description == "" {
				t.Errorf("Describe(%q): column %s = %+v, want type %s with a description", tc.ask, tc.col, ts[0].Columns, tc.typ)
			}
		})
	}
	if ts, err := s.Describe(ctx, "billed_quantity"); err != nil || len(ts) != 1 || len(ts[0].Columns) != 0 ||
		ts[0].Signature() != "billed_quantity(basis, limit_q, reservation_q, usage_q)" {
		t.Errorf("Describe(billed_quantity) = %+v, %v", ts, err)
	}
	before := queryInt(t, s, `SELECT count(*) FROM duckdb_tables() WHERE NOT temporary`)
	for _, bad := range []string{"nope", "events; DROP TABLE events", `"events"`, "task_events'--", "tasks_at(", "read_csv", "duckdb_tables", "temp.staged_jobs", strings.Repeat("x", 300)} {
		t.Run(bad, func(t *testing.T) {
			_, err := s.Describe(ctx, bad)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Describe(%q): %v, want ErrInvalid", bad, err)
				return
			}
			msg := err.Error()
			if !strings.Contains(msg, "table:") {
				t.Errorf("Describe(%q): %q does not name the field", bad, msg)
			}
			if len(bad) <= maxTableName && (!strings.Contains(msg, fmt.Sprintf("%q", bad)) || !strings.Contains(msg, "events, job_specs") || !strings.Contains(msg, "tasks_at")) {
				t.Errorf("Describe(%q): %q does not name it and list what exists", bad, msg)
			}
		})
	}
	if after := queryInt(t, s, `SELECT count(*) FROM duckdb_tables() WHERE NOT temporary`); after != before {
		t.Errorf("refused names changed the tables: %d, then %d", before, after)
	}
}

// TestDescribeReportsTheFile: Describe reports what the file holds, not
// what the catalogue says: on a file whose schema lacks a table the
// catalogue has, that table is not listed and asking for it names what
// exists; a store opened read-only describes the same as its writer.
func TestDescribeReportsTheFile(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	want, err := s.Describe(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	if _, err := s.db.ExecContext(ctx, `DROP TABLE cell`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro, err := Open(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got, err := ro.Describe(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want)-1 || slices.ContainsFunc(got, func(tb Table) bool { return tb.Name == "cell" }) {
		t.Errorf("a file without the cell table describes %d objects (the writer %d)", len(got), len(want))
	}
	if _, err := ro.Describe(ctx, "cell"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"cell"`) {
		t.Errorf("Describe(cell) on a file without it: %v", err)
	}
	i := slices.IndexFunc(want, func(tb Table) bool { return tb.Name == "task_usage" })
	if got, err := ro.Describe(ctx, "task_usage"); err != nil || len(got) != 1 || !slices.Equal(got[0].Columns, want[i].Columns) {
		t.Errorf("Describe(task_usage) read-only: %+v, %v; the writer: %+v", got, err, want[i])
	}
}
