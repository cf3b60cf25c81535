package infrastore

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// What the documents' SQL examples claim, checked against what they
// answer, and the ->> trap looked for in the parse of every example, view
// and macro.

// parseTree is DuckDB's parse of one SELECT (json_serialize_sql), or nil
// with the parser's message.
func parseTree(t *testing.T, s *Infrastore, q string) (map[string]any, string) {
	t.Helper()
	var text string
	if err := s.db.QueryRowContext(context.Background(), "SELECT json_serialize_sql(?::VARCHAR)::VARCHAR", q).Scan(&text); err != nil {
		t.Fatalf("json_serialize_sql: %v", err)
	}
	var out struct {
		Error      bool             `json:"error"`
		Message    string           `json:"error_message"`
		Statements []map[string]any `json:"statements"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatal(err)
	}
	if out.Error || len(out.Statements) != 1 {
		return nil, out.Message
	}
	return out.Statements[0], ""
}

// claimedColumns are the names a SELECT's own select list gives its
// columns: an alias, or a column's name; "" where DuckDB makes the name
// up (an expression without an alias). ok is false where the list does
// not say how many columns there are (a *, a set operation, DESCRIBE).
func claimedColumns(tree map[string]any) (names []string, ok bool) {
	node, _ := tree["node"].(map[string]any)
	if node == nil || node["type"] != "SELECT_NODE" {
		return nil, false
	}
	list, _ := node["select_list"].([]any)
	for _, e := range list {
		x, _ := e.(map[string]any)
		if alias, _ := x["alias"].(string); alias != "" {
			names = append(names, alias)
			continue
		}
		switch x["class"] {
		case "STAR":
			return nil, false
		case "COLUMN_REF":
			parts, _ := x["column_names"].([]any)
			name, _ := parts[len(parts)-1].(string)
			names = append(names, name)
		default:
			names = append(names, "")
		}
	}
	return names, len(names) > 0
}

// misleadingArrows lists the ->> and -> of a parse whose operand is a
// comparison or a conjunction: what `a AND payload->>'$.f'` parses as,
// never what its writer meant.
func misleadingArrows(tree any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if f, _ := x["function_name"].(string); f == "->>" || f == "->" {
				children, _ := x["children"].([]any)
				for _, c := range children {
					if cm, _ := c.(map[string]any); cm != nil && (cm["class"] == "COMPARISON" || cm["class"] == "CONJUNCTION") {
						out = append(out, f+" of a "+strings.ToLower(cm["type"].(string)))
					}
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
	walk(tree)
	return out
}

// TestArrowTrapIsCaught: the check below finds the trap docs/sql.md
// explains, and passes its parenthesised form.
func TestArrowTrapIsCaught(t *testing.T) {
	s := openStore(t, Options{})
	for q, want := range map[string]bool{
		"SELECT count(*) FROM events WHERE type = 'TaskEvicted' AND payload->>'$.reason' = 'preempted'":   true,
		"SELECT count(*) FROM events WHERE type = 'X' OR payload->>'$.reason' = 'preempted'":              true,
		"SELECT count(*) FROM events WHERE type = 'TaskEvicted' AND (payload->>'$.reason') = 'preempted'": false,
		"SELECT (payload->>'$.spec.resources.cpu_milli')::BIGINT FROM events":                             false,
	} {
		tree, msg := parseTree(t, s, q)
		if tree == nil {
			t.Fatalf("%s: %s", q, msg)
		}
		if got := len(misleadingArrows(tree)) > 0; got != want {
			t.Errorf("%s: caught %v, want %v", q, got, want)
		}
	}
}

// TestNoViewMisreadsArrows: no view or macro of the schema holds a ->>
// or -> of a comparison or conjunction, as DuckDB parsed what it stored.
func TestNoViewMisreadsArrows(t *testing.T) {
	s := openStore(t, Options{})
	rows, err := s.db.Query(`
SELECT view_name, sql FROM duckdb_views() WHERE schema_name = 'main' AND NOT internal
UNION ALL
SELECT function_name, CASE function_type WHEN 'macro' THEN 'SELECT ' || macro_definition ELSE macro_definition END
FROM duckdb_functions() WHERE schema_name = 'main' AND NOT internal AND function_type IN ('macro', 'table_macro')`)
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		if _, body, ok := strings.Cut(def, " AS "); ok && strings.HasPrefix(def, "CREATE VIEW") {
			def = body
		}
		defs[name] = strings.TrimSuffix(strings.TrimSpace(def), ";")
	}
	rows.Close()
	if len(defs) < 15 {
		t.Fatalf("found %d views and macros", len(defs))
	}
	for name, def := range defs {
		tree, msg := parseTree(t, s, def)
		if tree == nil {
			t.Errorf("%s: DuckDB's parse of its definition: %s", name, msg)
			continue
		}
		if bad := misleadingArrows(tree); len(bad) > 0 {
			t.Errorf("%s reads %v: parenthesise the field, (payload->>'$.f') = 'x' (docs/sql.md)", name, bad)
		}
	}
}

// shownOutput is an example the documents show with its output: the
// query and the lines printed under it.
type shownOutput struct {
	where, query string
	lines        []string
}

// A fenced block that is not SQL, with a `$ corral sql "..."` in it.
// fencedBlocks are a Markdown file's fenced code blocks, each without its
// fences; a fence may name a language (```sh), so blocks are found by
// walking the fences in order, not by pairing them by a pattern.
func fencedBlocks(text string) []string {
	var out []string
	var block []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if in {
				out = append(out, strings.Join(block, "\n")+"\n")
				block = nil
			}
			in = !in
			continue
		}
		if in {
			block = append(block, l)
		}
	}
	return out
}

// shownOutputs finds each `$ corral sql "QUERY"` of a fenced block and
// the lines after it up to the next prompt or the block's end.
func shownOutputs(t *testing.T) []shownOutput {
	t.Helper()
	var out []shownOutput
	for _, f := range docSources(t) {
		if strings.HasSuffix(f, ".go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, block := range fencedBlocks(text) {
			for {
				i := strings.Index(block, `$ corral sql "`)
				if i < 0 {
					break
				}
				rest := block[i+len(`$ corral sql "`):]
				end := strings.IndexByte(rest, '"')
				if end < 0 {
					break
				}
				q := strings.Join(strings.Fields(rest[:end]), " ")
				after := strings.TrimPrefix(rest[end+1:], "\n")
				var lines []string
				for _, l := range strings.Split(after, "\n") {
					if strings.HasPrefix(l, "$ ") {
						break
					}
					if strings.TrimSpace(l) != "" && strings.TrimSpace(l) != "..." {
						lines = append(lines, l)
					}
				}
				out = append(out, shownOutput{f, q, lines})
				block = rest[end+1:]
			}
		}
	}
	return out
}

// TestDocumentedSQLShowsWhatItAnswers: every example whose select list
// names its columns answers those columns, in that order; and every
// example shown with its output shows the header `corral sql` prints for
// its answer and rows of its shape: a field per column, integers where
// the column is an integer.
func TestDocumentedSQLShowsWhatItAnswers(t *testing.T) {
	_, s, _ := billingStore(t)
	ctx := context.Background()
	checked := 0
	for where, q := range docExamples(t) {
		tree, _ := parseTree(t, s, q)
		if tree == nil {
			continue // TestDocumentedSQLRuns reports it
		}
		if bad := misleadingArrows(tree); len(bad) > 0 {
			t.Errorf("%s\n\treads %v: parenthesise the field (docs/sql.md)", where, bad)
		}
		claimed, ok := claimedColumns(tree)
		if !ok {
			continue
		}
		res, err := s.Query(ctx, q, 0)
		if err != nil {
			continue // TestDocumentedSQLRuns reports it
		}
		if len(res.Columns) != len(claimed) {
			t.Errorf("%s\n\tanswers %d columns %v; its select list has %d", where, len(res.Columns), res.Columns, len(claimed))
			continue
		}
		for i, name := range claimed {
			if name != "" && !strings.EqualFold(res.Columns[i], name) {
				t.Errorf("%s\n\tcolumn %d is %q; the example names it %q", where, i+1, res.Columns[i], name)
			}
		}
		checked++
	}
	if checked < 10 {
		t.Errorf("only %d examples had their columns checked", checked)
	}
	shown := 0
	for _, ex := range shownOutputs(t) {
		if len(ex.lines) == 0 {
			continue
		}
		shown++
		res, err := s.Query(ctx, ex.query, 0)
		if err != nil {
			t.Errorf("%s: %s\n\t%v", ex.where, ex.query, err)
			continue
		}
		if header := strings.Fields(ex.lines[0]); strings.Join(header, " ") != strings.Join(res.Columns, " ") {
			t.Errorf("%s: %s\n\tshows the header %q; it answers %q", ex.where, ex.query, header, res.Columns)
			continue
		}
		for _, line := range ex.lines[1:] {
			fields := strings.Fields(line)
			if len(fields) != len(res.Columns) {
				t.Errorf("%s: %s\n\tshows the row %q, %d fields for %d columns", ex.where, ex.query, line, len(fields), len(res.Columns))
				continue
			}
			for j, typ := range res.Types {
				if strings.Contains(typ, "INT") {
					if _, err := strconv.ParseInt(fields[j], 10, 64); err != nil {
						t.Errorf("%s: %s\n\tshows %q in the %s column %s", ex.where, ex.query, fields[j], typ, res.Columns[j])
					}
				}
			}
		}
	}
	if shown == 0 {
		t.Error("found no example shown with its output (the README shows one)")
	}
}
