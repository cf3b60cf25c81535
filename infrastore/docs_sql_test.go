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

// docSources are the documents whose SQL examples are run: the README,
// docs/, the Infrastore's README and its doc comments.
func docSources(t *testing.T) []string {
	t.Helper()
	files := []string{"../README.md", "README.md"}
	for _, glob := range []string{"../docs/*.md", "*.go"} {
		more, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range more {
			if !strings.HasSuffix(f, "_test.go") {
				files = append(files, f)
			}
		}
	}
	return files
}

// commentBlocks are a Go file's doc-comment code blocks (lines "//\t...")
// that hold SQL: the statements, with their "--" comments left out.
func commentBlocks(text string) []string {
	var out []string
	var block []string
	flush := func() {
		if len(block) > 0 {
			q := strings.Join(block, " ")
			if u := strings.ToUpper(q); strings.HasPrefix(u, "SELECT ") || strings.HasPrefix(u, "WITH ") {
				out = append(out, q)
			}
		}
		block = nil
	}
	for _, line := range strings.Split(text, "\n") {
		code, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			flush()
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(code), "--") {
			continue
		}
		block = append(block, strings.TrimSpace(code))
	}
	flush()
	return out
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
			for _, block := range commentBlocks(text) {
				for _, st := range strings.Split(block, ";") {
					if q := strings.Join(strings.Fields(st), " "); q != "" {
						out[f+": "+q] = q
					}
				}
			}
			continue
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
	t.Logf("%d SQL examples", len(examples))
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
