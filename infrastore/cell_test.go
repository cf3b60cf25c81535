package infrastore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestExportsOfACopyNameTheCell: the master records its cell's name in
// the store; an export of a copy of the file, opened read-only and given
// no cell (corral bill --db), is byte for byte the master's export of the
// same period, in CSV and Parquet. A cell given that is not the recorded
// one is refused, naming the field; a name that is not a DNS label is
// refused and changes nothing; a rebuild keeps the name.
func TestExportsOfACopyNameTheCell(t *testing.T) {
	ctx := context.Background()
	h, s, store := billingStore(t)
	if err := s.SetCell(ctx, "Not A Label"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "cell") {
		t.Fatalf("SetCell of a bad name: %v, want ErrInvalid naming the cell", err)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM cell`); n != 0 {
		t.Fatalf("after a refused name the store records %d names, want none", n)
	}
	if err := s.SetCell(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rebuild(ctx, store); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM cell WHERE name = 'dev'`); n != 1 {
		t.Fatalf("after a rebuild the store records dev %d times, want once", n)
	}
	requests := []FocusRequest{
		{From: h.jan, To: h.mar, Idle: IdleShare, AccountBy: "label:team"},
		{From: h.jan, To: h.mar, Granularity: "job", Format: FormatParquet},
	}
	var master [][]byte
	for _, req := range requests {
		req.Cell = "dev" // as the master's Infrastore process asks
		master = append(master, exportFocus(t, s, req))
	}
	rows := readCSV(t, master[0])
	for _, col := range []string{"BillingAccountId", "BillingAccountName", "InvoiceIssuerName", "ProviderName", "PublisherName", "RegionId"} {
		if rows[0][col] != "dev" {
			t.Errorf("the master's export: %s %q, want the cell's name dev", col, rows[0][col])
		}
	}
	if !strings.HasPrefix(rows[0]["InvoiceId"], "dev-") {
		t.Errorf("the master's export: InvoiceId %q, want dev-MONTH", rows[0]["InvoiceId"])
	}

	// A copy of the file, as corral bill --db reads it.
	path := s.path
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.duckdb")
	copyFile(t, path, cp)
	ro, err := Open(ctx, cp, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for i, req := range requests {
		for _, cell := range []string{"", "dev"} {
			req.Cell = cell
			if got := exportFocus(t, ro, req); !bytes.Equal(got, master[i]) {
				t.Errorf("the copy's export %d with cell %q differs from the master's: %s", i, cell, firstDiff(got, master[i]))
			}
		}
		req.Cell = "prod"
		err := ro.ExportFocus(ctx, req, io.Discard)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `cell: "prod"`) || !strings.Contains(err.Error(), `"dev"`) {
			t.Errorf("an export of the copy as cell prod: %v, want it refused naming both cells", err)
		}
	}
	if _, err := ro.Costs(ctx, CostsRequest{From: h.feb, To: h.mar, Cell: "prod"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("the costs of the copy as cell prod: %v, want ErrInvalid", err)
	}
	if err := ro.SetCell(ctx, "prod"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("SetCell on a read-only store: %v, want ErrReadOnly", err)
	}
}
