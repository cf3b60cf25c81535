package main_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// TestBillOfACopyNamesTheCell: a cell named acme, its FOCUS export from
// the master, then the cell stopped and the same period exported by
// `corral bill --db` from a copy of its Infrastore file: the same bytes,
// naming acme as billing account, invoice issuer and region. A
// $CORRAL_CELL that is not the file's cell is refused, naming both, and
// --cell without --db is a usage error.
func TestBillOfACopyNamesTheCell(t *testing.T) {
	c := startCell(t, cellOptions{cell: "acme"})
	now := time.Now().UTC()
	e := &focusExport{t: t, c: c, from: now.Add(-time.Hour).Truncate(time.Hour).Format(time.RFC3339),
		to: now.Add(2 * time.Hour).Truncate(time.Hour).Format(time.RFC3339)}
	master := e.settled()
	c.stop(t)

	cp := copyOfTheInfrastore(t, c)
	var noCell []string
	for _, env := range c.env {
		if !strings.HasPrefix(env, "CORRAL_CELL=") {
			noCell = append(noCell, env)
		}
	}
	if got := e.export(noCell, "--db", cp); !bytes.Equal(got, master) {
		t.Errorf("bill --db on a copy differs from the master's export of the same period:\nmaster:\n%s\n--db:\n%s", master, got)
	}
	if got := e.export(c.env, "--db", cp, "--cell", "acme"); !bytes.Equal(got, master) {
		t.Errorf("bill --db --cell acme differs from the master's export")
	}
	rows, err := csv.NewReader(bytes.NewReader(master)).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("the export is not a CSV with rows (%v)", err)
	}
	for i, col := range rows[0] {
		switch col {
		case "BillingAccountId", "InvoiceIssuerName", "RegionId":
			if rows[1][i] != "acme" {
				t.Errorf("%s is %q, want the cell's name acme", col, rows[1][i])
			}
		}
	}
	other := append(append([]string{}, noCell...), "CORRAL_CELL=other")
	out, code := runCorral(t, c.root, other, time.Minute, "bill", "--format", "focus", "--from", e.from, "--to", e.to, "--db", cp)
	if code == 0 || !strings.Contains(out, `"other"`) || !strings.Contains(out, `"acme"`) || !strings.Contains(out, "--cell") {
		t.Errorf("bill --db as another cell: exit %d, want it refused naming --cell and both cells:\n%s", code, out)
	}
	out, code = c.run(t, "bill", "--format", "focus", "--cell", "acme")
	if code != 2 || !strings.Contains(out, "--cell") {
		t.Errorf("bill --cell without --db: exit %d, want a usage error naming --cell:\n%s", code, out)
	}
}

// focusExport is `corral bill --format focus` of one period.
type focusExport struct {
	t        *testing.T
	c        *testCell
	from, to string
}

// try exports the period in env, with extra flags; a failure is the
// command's exit and output.
func (e *focusExport) try(env []string, extra ...string) ([]byte, string) {
	out := filepath.Join(e.t.TempDir(), "focus.csv")
	args := append([]string{"bill", "--format", "focus", "--from", e.from, "--to", e.to, "--out", out}, extra...)
	if msg, code := runCorral(e.t, e.c.root, env, time.Minute, args...); code != 0 {
		return nil, fmt.Sprintf("corral %s: exit %d\n%s", strings.Join(args, " "), code, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		e.t.Fatal(err)
	}
	return b, ""
}

// export is try failing the test on a failure.
func (e *focusExport) export(env []string, extra ...string) []byte {
	e.t.Helper()
	b, msg := e.try(env, extra...)
	if msg != "" {
		e.t.Fatal(msg)
	}
	return b
}

// settled is the master's export once the idle cell's log has come to
// rest (its machines in, and the Infrastore process answering): two
// exports two seconds apart that agree cover the same positions.
func (e *focusExport) settled() []byte {
	e.t.Helper()
	var last []byte
	testkit.EventuallyEvery(e.t, 60*time.Second, 2*time.Second, "the cell's export settles", func() (bool, string) {
		b, msg := e.try(e.c.env)
		if msg != "" {
			last = nil
			return false, msg
		}
		settled := bytes.Equal(b, last) && bytes.Count(b, []byte("\n")) > 1
		last = b
		return settled, string(b)
	})
	return last
}

// copyOfTheInfrastore copies the stopped cell's Infrastore file, and its
// write-ahead log when it has one.
func copyOfTheInfrastore(t *testing.T, c *testCell) string {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "copy.duckdb")
	for _, suffix := range []string{"", ".wal"} {
		orig, err := os.ReadFile(filepath.Join(c.data, "infrastore.duckdb"+suffix))
		if suffix != "" && os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cp+suffix, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cp
}
