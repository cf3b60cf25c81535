package infrastore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// allowedTableFunctions are the table functions a query may call: ones
// that only compute or read this database's catalog and tables. Everything
// else DuckDB offers as a table function (checkpoint, enable_logging,
// query, read_csv, ...) can change the database, read outside it or show
// other users' queries, and is refused.
var allowedTableFunctions = map[string]bool{
	"range": true, "generate_series": true, "unnest": true, "repeat": true, "repeat_row": true,
	"tasks_at": true, "machines_at": true, "jobs_at": true,
	"quotas_at": true, "prices_at": true, "allocs_at": true, "pending_reasons_at": true, "state_diff": true,
	"json_each": true, "json_tree": true,
	"duckdb_tables": true, "duckdb_columns": true, "duckdb_views": true, "duckdb_schemas": true,
	"duckdb_types": true, "duckdb_functions": true, "duckdb_constraints": true, "duckdb_indexes": true,
	"duckdb_keywords": true, "duckdb_macros": true, "pragma_table_info": true, "test_all_types": true,
}

// serializedSQL is DuckDB's own parse of a statement, as json_serialize_sql
// returns it.
type serializedSQL struct {
	Error        bool              `json:"error"`
	ErrorType    string            `json:"error_type"`
	ErrorMessage string            `json:"error_message"`
	Statements   []json.RawMessage `json:"statements"`
}

// checkQuery decides from DuckDB's parse of the whole statement whether it
// may run, and returns the text to run. A SELECT (WITH, VALUES, FROM-first,
// DESCRIBE, SHOW, SUMMARIZE) may call only allowed table functions,
// anywhere in it. An EXPLAIN [ANALYZE] runs as EXPLAIN of the statement
// that was checked, rebuilt here: the text after the EXPLAIN options is
// checked as a SELECT and nothing else of the user's text runs. Nothing is
// prepared before it passes, so a refused statement (CREATE SECRET, say)
// never reaches DuckDB's binder.
func (s *Infrastore) checkQuery(ctx context.Context, conn *sql.Conn, query string) (string, error) {
	node, err := s.parse(ctx, conn, query)
	if err == nil {
		return query, s.checkNode(node)
	}
	if err != errNotSelect {
		return "", err
	}
	if words := statementWords(query); len(words) > 1 {
		return "", fmt.Errorf("%w: the query holds several statements (%s); send exactly one", ErrQueryRefused, strings.Join(words, ", "))
	}
	inner, analyze, ok := explained(query)
	if !ok {
		return "", fmt.Errorf("%w: the statement is %s; %s", ErrQueryRefused, firstWord(query), allowed)
	}
	node, err = s.parse(ctx, conn, inner)
	if err == errNotSelect {
		return "", fmt.Errorf("%w: EXPLAIN of %s; %s", ErrQueryRefused, firstWord(inner), allowed)
	}
	if err != nil {
		return "", err
	}
	if err := s.checkNode(node); err != nil {
		return "", err
	}
	if analyze {
		return "EXPLAIN ANALYZE " + inner, nil
	}
	return "EXPLAIN " + inner, nil
}

// errNotSelect: DuckDB's serializer takes only SELECT statements.
var errNotSelect = fmt.Errorf("%w: not a SELECT", ErrQueryRefused)

// parse returns DuckDB's parse tree of query, which must be exactly one
// SELECT statement.
func (s *Infrastore) parse(ctx context.Context, conn *sql.Conn, query string) (any, error) {
	var text string
	if err := conn.QueryRowContext(ctx, "SELECT json_serialize_sql(?::VARCHAR)::VARCHAR", query).Scan(&text); err != nil {
		return nil, err
	}
	var out serializedSQL
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return nil, fmt.Errorf("reading DuckDB's parse of the query: %w", err)
	}
	if out.Error {
		if out.ErrorType == "not implemented" {
			return nil, errNotSelect
		}
		return nil, fmt.Errorf("%w: %s", ErrInvalid, out.ErrorMessage)
	}
	switch len(out.Statements) {
	case 0:
		return nil, fmt.Errorf("%w: query: holds no statement", ErrInvalid)
	case 1:
	default:
		return nil, fmt.Errorf("%w: the query holds %d statements; send exactly one", ErrQueryRefused, len(out.Statements))
	}
	var node any
	if err := json.Unmarshal(out.Statements[0], &node); err != nil {
		return nil, fmt.Errorf("reading DuckDB's parse of the query: %w", err)
	}
	return node, nil
}

// refusedScalarFunctions are the scalar functions a query may not call:
// they answer with the server's settings, among them its paths
// (temp_directory, home_directory, extension_directory).
var refusedScalarFunctions = map[string]bool{"current_setting": true}

// checkNode walks the whole parse tree: every table-function reference,
// and every call of a function the catalog knows as a table function, must
// be allowed; no scalar function of refusedScalarFunctions is called; and
// no table named is one of DuckDB's views over a refused table function
// (duckdb_databases, pg_settings: they show the file's path and the
// settings).
func (s *Infrastore) checkNode(node any) error {
	var refused, scalars, views []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["type"] == "TABLE_FUNCTION" {
				if f, ok := x["function"].(map[string]any); ok {
					name := functionName(f)
					if !allowedTableFunctions[name] {
						refused = append(refused, name)
					}
				}
			}
			if x["type"] == "BASE_TABLE" {
				if name, _ := x["table_name"].(string); s.refusedViews[strings.ToLower(name)] {
					views = append(views, strings.ToLower(name))
				}
			}
			if x["class"] == "FUNCTION" {
				name := functionName(x)
				if s.tableFunctions[name] && !allowedTableFunctions[name] {
					refused = append(refused, name)
				}
				if refusedScalarFunctions[name] {
					scalars = append(scalars, name)
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(node)
	switch {
	case len(refused) > 0:
		return fmt.Errorf("%w: the table function %s may not be called in a query; allowed: %s", ErrQueryRefused, sortedList(refused), strings.Join(allowedList(), ", "))
	case len(scalars) > 0:
		return fmt.Errorf("%w: the function %s may not be called in a query: it shows the server's settings and paths", ErrQueryRefused, sortedList(scalars))
	case len(views) > 0:
		return fmt.Errorf("%w: the view %s may not be read in a query: it shows the server's files or settings", ErrQueryRefused, sortedList(views))
	}
	return nil
}

// sortedList names each of names once, sorted.
func sortedList(names []string) string {
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ", ")
}

func functionName(f map[string]any) string {
	name, _ := f["function_name"].(string)
	return strings.ToLower(name)
}

func allowedList() []string {
	out := make([]string, 0, len(allowedTableFunctions))
	for n := range allowedTableFunctions {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// loadTableFunctions reads the names of every table function, table macro
// and pragma the database knows, so that a call of one in any position is
// checked against the allow-list.
func loadTableFunctions(ctx context.Context, db *sql.DB) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type IN ('table', 'table_macro', 'pragma')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out[n] = true
	}
	return out, rows.Err()
}

// firstWord names a statement by its first keyword, for a refusal.
func firstWord(q string) string {
	w, _ := nextWord(skipSpace(q))
	if w == "" {
		return "not a SELECT"
	}
	return strings.ToUpper(w)
}

// statementWords names each ';'-separated piece of q by its first word.
// It only words a refusal (DuckDB has already said the query is not one
// SELECT), so a ';' inside a string literal at worst words it oddly.
func statementWords(q string) []string {
	var out []string
	for _, piece := range strings.Split(q, ";") {
		if strings.TrimSpace(skipSpace(piece)) != "" {
			out = append(out, firstWord(piece))
		}
	}
	return out
}

// loadRefusedViews names DuckDB's own views that read a table function a
// query may not call (duckdb_databases reads duckdb_databases(), which
// shows the file's path; pg_settings reads duckdb_settings()): a query may
// not read them either.
func (s *Infrastore) loadRefusedViews(ctx context.Context) (map[string]bool, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, `SELECT DISTINCT lower(view_name), sql FROM duckdb_views() WHERE internal`)
	if err != nil {
		return nil, err
	}
	views := map[string]string{}
	for rows.Next() {
		var name, text string
		if err := rows.Scan(&name, &text); err != nil {
			rows.Close()
			return nil, err
		}
		views[name] = text
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for name, text := range views {
		_, body, ok := strings.Cut(text, " AS ")
		if !ok {
			out[name] = true // unreadable: refused, to be safe
			continue
		}
		node, err := s.parse(ctx, conn, strings.TrimSuffix(strings.TrimSpace(body), ";"))
		if err != nil || s.checkNode(node) != nil {
			out[name] = true
		}
	}
	return out, nil
}
