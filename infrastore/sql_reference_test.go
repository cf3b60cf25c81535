package infrastore

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "write docs/sql.md's table reference again from the catalogue")

// The table reference of docs/sql.md lies between these lines.
const (
	referenceBegin = "<!-- table reference: generated from infrastore/catalog.go by `go test ./infrastore -run TestSQLReference -rewrite`; do not edit -->"
	referenceEnd   = "<!-- end of the table reference -->"
)

// reference renders the schema as Describe reports it, as markdown: a
// heading, the one line and a table of columns per table, view and macro.
func reference(ts []Table) string {
	var b strings.Builder
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, t := range ts {
		fmt.Fprintf(&b, "\n### `%s` (%s)\n\n%s.\n", t.Signature(), t.Kind, cell(t.Description))
		if len(t.Columns) == 0 {
			continue
		}
		b.WriteString("\n| column | type | description |\n| --- | --- | --- |\n")
		for _, c := range t.Columns {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", c.Name, cell(c.Type), cell(c.Description))
		}
	}
	return b.String()
}

// TestSQLReference: docs/sql.md's table reference is what the catalogue
// and the database say today.
func TestSQLReference(t *testing.T) {
	s := openStore(t, Options{})
	ts, err := s.Describe(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	const path = "../docs/sql.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	before, rest, ok1 := strings.Cut(doc, referenceBegin+"\n")
	_, after, ok2 := strings.Cut(rest, referenceEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no table reference between the lines\n%s\n%s", path, referenceBegin, referenceEnd)
	}
	want := before + referenceBegin + "\n" + reference(ts) + "\n" + referenceEnd + after
	if want == doc {
		return
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/sql.md's table reference is stale: run `go test ./infrastore -run TestSQLReference -rewrite`")
}
