package migrations

import (
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/database/cockroachdb"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Flavor names a family of SQL the files are written for.
type Flavor string

const (
	// Postgres files run unchanged on PostgreSQL and CockroachDB.
	Postgres Flavor = "postgres"
	// SQLite files run on the embedded store.
	SQLite Flavor = "sqlite"
)

// Files returns the migration files of a flavor.
func Files(f Flavor) (fs.FS, error) {
	return fs.Sub(files, string(f))
}

// UpStatements returns the text of every up migration of a flavor, in order:
// what a parser test checks.
func UpStatements(f Flavor) (map[string]string, []string, error) {
	sub, err := Files(f)
	if err != nil {
		return nil, nil, err
	}
	names, err := fs.Glob(sub, "*.up.sql")
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(names)
	out := make(map[string]string, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(sub, n)
		if err != nil {
			return nil, nil, err
		}
		out[n] = string(b)
	}
	return out, names, nil
}

// UpPostgres applies every pending migration to a PostgreSQL or CockroachDB
// database. It closes db when done. CockroachDB has no advisory locks, so golang-migrate's
// cockroachdb driver (a lock table) is used there and its pgx driver on
// PostgreSQL.
func UpPostgres(db *sql.DB, cockroach bool) error {
	var (
		drv database.Driver
		err error
	)
	if cockroach {
		drv, err = cockroachdb.WithInstance(db, &cockroachdb.Config{})
	} else {
		drv, err = migratepgx.WithInstance(db, &migratepgx.Config{})
	}
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return up(drv, Postgres, "postgres")
}

// UpSQLite applies every pending migration to the embedded store's database.
// It closes db when done.
func UpSQLite(db *sql.DB) error {
	drv, err := migratesqlite.WithInstance(db, &migratesqlite.Config{})
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return up(drv, SQLite, "sqlite")
}

func up(drv database.Driver, f Flavor, name string) error {
	sub, err := Files(f)
	if err != nil {
		return err
	}
	src, err := iofs.New(sub, ".")
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, name, drv)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	// Closing releases the driver's dedicated connection (and its *sql.DB).
	defer m.Close()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrations: applying %s migrations: %w", name, err)
	}
	return nil
}

// Latest returns the newest migration version a flavor's files hold.
func Latest(f Flavor) (uint, error) {
	_, names, err := UpStatements(f)
	if err != nil {
		return 0, err
	}
	if len(names) == 0 {
		return 0, nil
	}
	var v uint
	last := names[len(names)-1]
	if _, err := fmt.Sscanf(strings.SplitN(last, "_", 2)[0], "%d", &v); err != nil {
		return 0, fmt.Errorf("migrations: file %s: version: %w", last, err)
	}
	return v, nil
}
