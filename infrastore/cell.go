package infrastore

// The cell's identity: the name the master gives the store, recorded in
// the file, so that a bill computed from a copy of the file (corral bill
// --db) names the same billing account, invoice and region as the
// master's bill of the same period.

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
)

// ddlCell is the cell's name: one row, written by SetCell. It is not
// derived from the log, so a Rebuild keeps it and it is no part of the
// schema version; a file written before it existed has no such table and
// records no name.
const ddlCell = `CREATE TABLE IF NOT EXISTS cell (name VARCHAR NOT NULL)`

// cellName is a cell's name as the master accepts it: a DNS label.
var cellName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// defaultBillingCell names the cell of a store that records none and of a
// request that names none.
const defaultBillingCell = "corral"

// SetCell records the cell's name in the file (the master's, at start).
// A name that is not a DNS label is refused and changes nothing.
func (s *Infrastore) SetCell(ctx context.Context, name string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if !cellName.MatchString(name) {
		return fmt.Errorf("%w: cell: %q is not a DNS label (lowercase letters, digits and '-', at most 63)", ErrInvalid, name)
	}
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return inTx(ctx, conn, func() error {
		if _, err := conn.ExecContext(ctx, `DELETE FROM cell`); err != nil {
			return err
		}
		_, err := conn.ExecContext(ctx, `INSERT INTO cell VALUES (?)`, name)
		return err
	})
}

// recordedCell reads the cell's name the file records into name, or
// leaves it empty when the file records none.
func recordedCell(ctx context.Context, conn *sql.Conn, name *string) error {
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_tables() WHERE table_name = 'cell' AND schema_name = 'main'`).Scan(&n); err != nil || n == 0 {
		return err
	}
	err := conn.QueryRowContext(ctx, `SELECT name FROM cell`).Scan(name)
	if err == sql.ErrNoRows {
		return nil
	}
	return err
}

// billingCell is the cell a bill names: the one the file records; a
// request's cell must be that one, and names the cell of a file that
// records none.
func (s *Infrastore) billingCell(ctx context.Context, requested string) (string, error) {
	var recorded string
	if err := s.inReadOnly(ctx, func(conn *sql.Conn) error { return recordedCell(ctx, conn, &recorded) }); err != nil {
		return "", err
	}
	switch {
	case recorded != "" && requested != "" && requested != recorded:
		return "", fmt.Errorf("%w: cell: %q is not this store's cell; it records %q", ErrInvalid, requested, recorded)
	case recorded != "":
		return recorded, nil
	case requested != "":
		return requested, nil
	}
	return defaultBillingCell, nil
}
