package infrastore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// Table is a table, view or macro of the schema, as Describe reports it.
type Table struct {
	Name        string
	Kind        string   // KindTable, KindView, KindTableMacro or KindMacro
	Params      []string // a macro's parameters, in order
	Description string   // one line; empty when the catalogue has none
	Columns     []Column // in the table's order; a scalar macro has none
}

// Column is one column of a Table.
type Column struct {
	Name        string
	Type        string // DuckDB's, e.g. BIGINT, MAP(VARCHAR, VARCHAR), DECIMAL(18,9)
	Description string
}

// Signature is how the object is called: tasks_at(ts) for a macro, the
// name for a table or view.
func (t Table) Signature() string {
	if t.Kind == KindTableMacro || t.Kind == KindMacro {
		return t.Name + "(" + strings.Join(t.Params, ", ") + ")"
	}
	return t.Name
}

// maxTableName bounds the name Describe is asked for.
const maxTableName = 256

// Describe reports the schema as the file holds it: with table "", every
// table, view and macro; else the one named (case-insensitively; a
// macro's "(...)" may follow its name). Names, kinds and column types are
// the database's own catalog, descriptions the catalogue's (catalog.go),
// so what a file written by another version holds is reported as it is.
// An unknown name is ErrInvalid naming it and listing what exists.
func (s *Infrastore) Describe(ctx context.Context, table string) ([]Table, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	want := strings.TrimSpace(table)
	if i := strings.IndexByte(want, '('); i > 0 && strings.HasSuffix(want, ")") {
		want = strings.TrimSpace(want[:i])
	}
	want = strings.ToLower(want)
	if len(want) > maxTableName {
		return nil, fmt.Errorf("%w: table: longer than %d bytes", ErrInvalid, maxTableName)
	}
	var out []Table
	err := s.inReadOnly(ctx, func(conn *sql.Conn) error {
		all, err := schemaObjects(ctx, conn)
		if err != nil {
			return err
		}
		if want != "" {
			i := slices.IndexFunc(all, func(t Table) bool { return strings.ToLower(t.Name) == want })
			if i < 0 {
				names := make([]string, len(all))
				for j, t := range all {
					names[j] = t.Name
				}
				return fmt.Errorf("%w: table: no table, view or macro is named %q; there are: %s", ErrInvalid, strings.TrimSpace(table), strings.Join(names, ", "))
			}
			all = all[i : i+1]
		}
		if err := schemaColumns(ctx, conn, all); err != nil {
			return err
		}
		out = all
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// schemaObjects lists the tables, views and macros of the file's main
// schema (not DuckDB's own, nor a connection's temporary ones), in the
// catalogue's order, then any the catalogue does not know by name.
func schemaObjects(ctx context.Context, conn *sql.Conn) ([]Table, error) {
	rows, err := conn.QueryContext(ctx, `
SELECT table_name, 'table', [] FROM duckdb_tables()
WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal AND NOT temporary
UNION ALL
SELECT view_name, 'view', [] FROM duckdb_views()
WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal AND NOT temporary
UNION ALL
SELECT DISTINCT function_name, CASE function_type WHEN 'table_macro' THEN 'table macro' ELSE 'macro' END, parameters
FROM duckdb_functions()
WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal AND function_type IN ('macro', 'table_macro')`)
	if err != nil {
		return nil, fmt.Errorf("infrastore: reading the catalog: %w", err)
	}
	defer rows.Close()
	var out []Table
	for rows.Next() {
		var t Table
		var params any
		if err := rows.Scan(&t.Name, &t.Kind, &params); err != nil {
			return nil, err
		}
		list, _ := params.([]any)
		for _, p := range list {
			t.Params = append(t.Params, fmt.Sprint(p))
		}
		if d := docOf(t.Name); d != nil {
			t.Description = d.summary
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	order := func(name string) int {
		if i := slices.IndexFunc(catalogue, func(d tableDoc) bool { return d.name == name }); i >= 0 {
			return i
		}
		return len(catalogue)
	}
	slices.SortFunc(out, func(a, b Table) int {
		if c := order(a.Name) - order(b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// schemaColumns fills in the columns of ts: DuckDB's catalog for tables
// and views, DuckDB's DESCRIBE of a call with NULL arguments for table
// macros (they cast them, so the types are those of any call).
func schemaColumns(ctx context.Context, conn *sql.Conn, ts []Table) error {
	byName := map[string]*Table{}
	for i := range ts {
		byName[ts[i].Name] = &ts[i]
	}
	rows, err := conn.QueryContext(ctx, `
SELECT table_name, column_name, data_type FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal
ORDER BY table_name, column_index`)
	if err != nil {
		return fmt.Errorf("infrastore: reading the catalog's columns: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var table string
		var c Column
		if err := rows.Scan(&table, &c.Name, &c.Type); err != nil {
			return err
		}
		if t := byName[table]; t != nil {
			t.Columns = append(t.Columns, c)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range ts {
		t := &ts[i]
		if t.Kind == KindTableMacro {
			nulls := strings.TrimSuffix(strings.Repeat("NULL, ", len(t.Params)), ", ")
			cols, err := describeQuery(ctx, conn, `SELECT * FROM `+quoteIdent(t.Name)+`(`+nulls+`)`)
			if err != nil {
				return fmt.Errorf("infrastore: describing %s: %w", t.Name, err)
			}
			t.Columns = cols
		}
		d := docOf(t.Name)
		for j := range t.Columns {
			t.Columns[j].Description = d.column(t.Columns[j].Name)
		}
	}
	return nil
}

// describeQuery is DuckDB's DESCRIBE of a query: its columns and types.
func describeQuery(ctx context.Context, conn *sql.Conn, query string) ([]Column, error) {
	rows, err := conn.QueryContext(ctx, `SELECT column_name, column_type FROM (DESCRIBE `+query+`)`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Column
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// docOf is the catalogue's entry for a name, or nil.
func docOf(name string) *tableDoc {
	for i := range catalogue {
		if catalogue[i].name == name {
			return &catalogue[i]
		}
	}
	return nil
}

// column is the description of a column of d's table: its own, else that
// of the entries it is like, else the common one; empty when none has one.
func (d *tableDoc) column(name string) string {
	if d == nil {
		return ""
	}
	if desc := d.ownColumn(name); desc != "" {
		return desc
	}
	return commonColumns[name]
}

// ownColumn is the description d or the entries it is like give a column.
func (d *tableDoc) ownColumn(name string) string {
	if d == nil {
		return ""
	}
	for _, c := range d.columns {
		if c.name == name {
			return c.desc
		}
	}
	for _, like := range d.like {
		if desc := docOf(like).ownColumn(name); desc != "" {
			return desc
		}
	}
	return ""
}
