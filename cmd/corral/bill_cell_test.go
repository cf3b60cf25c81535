package main_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBillOfACopyNamesTheCell: a cell named acme, its FOCUS export from
// the master, then the cell stopped and the same period exported by
// `corral bill --db` from a copy of its Infrastore file: the same bytes,
// naming acme as billing account, invoice issuer and region. A
// $CORRAL_CELL that is not the file's cell is refused, naming both, and
// --cell without --db is a usage error.
func TestBillOfACopyNamesTheCell(t *testing.T) {
	bin := buildCorral(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	grpcAddr, httpAddr, dnsAddr := freeTCP(t), freeTCP(t), freeUDPAndTCP(t)
	env := append(os.Environ(), "CORRAL_USER=alice", "CORRAL_MASTER="+grpcAddr, "CORRAL_CELL=acme", "CORRAL_DATA="+data)
	up := startUp(t, bin, root, env, []string{"up", "--cell", "acme", "--data", data, "--listen", grpcAddr, "--http", httpAddr,
		"--dns", dnsAddr, "--port-base", strconv.Itoa(freeTaskPorts(t, 3))})
	corral := func(env []string, args ...string) (string, int) { return runCorral(t, bin, root, env, args...) }
	now := time.Now().UTC()
	from, to := now.Add(-time.Hour).Truncate(time.Hour).Format(time.RFC3339), now.Add(2*time.Hour).Truncate(time.Hour).Format(time.RFC3339)
	tryExport := func(env []string, extra ...string) ([]byte, string) {
		out := filepath.Join(t.TempDir(), "focus.csv")
		args := append([]string{"bill", "--format", "focus", "--from", from, "--to", to, "--out", out}, extra...)
		if msg, code := corral(env, args...); code != 0 {
			return nil, fmt.Sprintf("corral %s: exit %d\n%s", strings.Join(args, " "), code, msg)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b, ""
	}
	export := func(env []string, extra ...string) []byte {
		t.Helper()
		b, msg := tryExport(env, extra...)
		if msg != "" {
			t.Fatal(msg)
		}
		return b
	}
	// The idle cell's log comes to rest once its machines are in (and the
	// Infrastore process answers): two exports a while apart that agree
	// cover the same positions.
	var master, last []byte
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the cell's export did not settle in 60 s:\n%s", last)
		}
		b, msg := tryExport(env)
		if msg != "" {
			last = []byte(msg)
			time.Sleep(time.Second)
			continue
		}
		if bytes.Equal(b, last) && bytes.Count(b, []byte("\n")) > 1 {
			master = b
			break
		}
		last = b
		time.Sleep(2 * time.Second)
	}
	up.stop(t)

	// A copy of the file, and of its write-ahead log when it has one.
	cp := filepath.Join(t.TempDir(), "copy.duckdb")
	for _, suffix := range []string{"", ".wal"} {
		orig, err := os.ReadFile(filepath.Join(data, "infrastore.duckdb"+suffix))
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
	var noCell []string
	for _, e := range env {
		if !strings.HasPrefix(e, "CORRAL_CELL=") {
			noCell = append(noCell, e)
		}
	}
	if got := export(noCell, "--db", cp); !bytes.Equal(got, master) {
		t.Errorf("bill --db on a copy differs from the master's export of the same period:\nmaster:\n%s\n--db:\n%s", master, got)
	}
	if got := export(env, "--db", cp, "--cell", "acme"); !bytes.Equal(got, master) {
		t.Errorf("bill --db --cell acme differs from the master's export")
	}
	rows, err := csv.NewReader(bytes.NewReader(master)).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("the export is not a CSV with rows (%v)", err)
	}
	for i, c := range rows[0] {
		switch c {
		case "BillingAccountId", "InvoiceIssuerName", "RegionId":
			if rows[1][i] != "acme" {
				t.Errorf("%s is %q, want the cell's name acme", c, rows[1][i])
			}
		}
	}
	other := append(append([]string{}, noCell...), "CORRAL_CELL=other")
	out, code := corral(other, "bill", "--format", "focus", "--from", from, "--to", to, "--db", cp)
	if code == 0 || !strings.Contains(out, `"other"`) || !strings.Contains(out, `"acme"`) || !strings.Contains(out, "--cell") {
		t.Errorf("bill --db as another cell: exit %d, want it refused naming --cell and both cells:\n%s", code, out)
	}
	out, code = corral(env, "bill", "--format", "focus", "--cell", "acme")
	if code != 2 || !strings.Contains(out, "--cell") {
		t.Errorf("bill --cell without --db: exit %d, want a usage error naming --cell:\n%s", code, out)
	}
}
