package infrastore

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
)

// docSources are the documents whose SQL examples are run.
func docSources(t *testing.T) []string {
	t.Helper()
	files := []string{"../README.md", "README.md", "doc.go"}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, docs...)
}

var (
	// corral sql [--flags] "QUERY", on one line or several.
	corralSQL = regexp.MustCompile(`corral sql[^"\n]*"([^"]+)"`)
	// A fenced block of SQL: each statement ends with ';'.
	sqlBlock = regexp.MustCompile("(?s)```sql\n(.*?)```")
)

// docExamples returns every SQL example of the documents, by where it is.
func docExamples(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range docSources(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if strings.HasSuffix(f, ".go") {
			// Doc comments: the examples are in the comment's text.
			text = regexp.MustCompile(`(?m)^//\s?`).ReplaceAllString(text, "")
		}
		for _, m := range corralSQL.FindAllStringSubmatch(text, -1) {
			q := strings.Join(strings.Fields(m[1]), " ")
			if strings.HasPrefix(strings.ToUpper(q), "SELECT ") || strings.HasPrefix(strings.ToUpper(q), "WITH ") {
				out[f+": "+q] = q
			}
		}
		for _, m := range sqlBlock.FindAllStringSubmatch(text, -1) {
			for _, st := range strings.Split(m[1], ";") {
				if q := strings.Join(strings.Fields(st), " "); q != "" {
					out[f+": "+q] = q
				}
			}
		}
	}
	return out
}

// TestDocumentedSQLRuns: every SQL example of the README, docs/ and the
// Infrastore's README and doc comments runs, through the same guard as a
// user's query, on a store of a real cell's history with prices, a closed
// month and preemptions, and the ones over tables the history fills
// answer rows. The README's preemption query among them: its view once
// read `AND payload->>'$.reason' = ...`, which DuckDB parses as a ->> of
// the AND.
func TestDocumentedSQLRuns(t *testing.T) {
	h, s, _ := billingStore(t)
	preempted := 0
	for _, e := range h.evs {
		if ev, ok := e.Data.(*events.TaskEvicted); ok && ev.Reason == "preempted" {
			preempted++
		}
	}
	if preempted == 0 {
		t.Fatal("the history preempts no task: the preemption example would prove nothing")
	}
	examples := docExamples(t)
	if len(examples) < 10 {
		t.Fatalf("found only %d SQL examples in the docs: %v", len(examples), examples)
	}
	mustAnswer := []string{"preemption_losses", "priced_usage", "task_events"}
	for where, q := range examples {
		res, err := s.Query(context.Background(), q, time.Minute)
		if err != nil {
			t.Errorf("%s\n\t%v", where, err)
			continue
		}
		for _, table := range mustAnswer {
			if strings.Contains(q, table) && len(res.Rows) == 0 {
				t.Errorf("%s\n\tanswered no rows", where)
			}
		}
	}
}
