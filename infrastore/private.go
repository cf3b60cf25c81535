package infrastore

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// privateDuckDB opens a DuckDB of its own at path (":memory:" or a file in
// a private temporary directory) for writing export files: it sees only
// what the caller puts in it, may write files (the store's own database
// may not), and runs one thread so the file it writes is the same bytes
// every time. close frees it.
func privateDuckDB(ctx context.Context, path string) (conn *sql.Conn, close func(), err error) {
	connector, err := duckdb.NewConnector(path+"?threads=1&memory_limit=256MB&autoinstall_known_extensions=false&autoload_known_extensions=false", nil)
	if err != nil {
		return nil, nil, err
	}
	db := sql.OpenDB(connector)
	if conn, err = db.Conn(ctx); err != nil {
		return nil, nil, errors.Join(err, db.Close(), connector.Close())
	}
	return conn, func() { conn.Close(); db.Close(); connector.Close() }, nil
}

// exportDir is where exports keep their scratch files: beside the store's
// file, so two cells on one machine never touch each other's.
func (s *Infrastore) exportDir() string { return s.path + ".exports" }

// newExportDir makes a private scratch directory for one export.
func (s *Infrastore) newExportDir() (string, error) {
	if err := os.MkdirAll(s.exportDir(), 0o700); err != nil {
		return "", err
	}
	return os.MkdirTemp(s.exportDir(), "focus-*")
}

// staleExport is how old a scratch directory must be before it is taken
// for one left by a process that was killed: older than any export may run.
const staleExport = time.Hour

// sweepExports removes the scratch directories of exports killed before
// they cleaned up (kill -9), which may hold a month's rows.
func (s *Infrastore) sweepExports() {
	entries, _ := os.ReadDir(s.exportDir())
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleExport {
			_ = os.RemoveAll(filepath.Join(s.exportDir(), e.Name()))
		}
	}
}
