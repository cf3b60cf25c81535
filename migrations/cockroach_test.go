package migrations_test

import (
	"strings"
	"testing"

	"github.com/cockroachdb/cockroachdb-parser/pkg/sql/parser"

	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/migrations"
)

// Constructs CockroachDB lacks or that would tie the store to PostgreSQL.
var postgresOnly = []string{"LISTEN", "NOTIFY", "PG_ADVISORY", "SERIAL", "NEXTVAL", "RETURNING CTID", "FOR UPDATE SKIP LOCKED", "TXID_CURRENT", "CURRVAL"}

func checkCockroach(t *testing.T, name, sql string) int {
	t.Helper()
	stmts, err := parser.Parse(sql)
	if err != nil {
		t.Fatalf("%s does not parse as CockroachDB SQL: %v\n%s", name, err, sql)
	}
	upper := strings.ToUpper(sql)
	for _, bad := range postgresOnly {
		if strings.Contains(upper, bad) {
			t.Errorf("%s uses %s, which CockroachDB lacks", name, bad)
		}
	}
	return len(stmts)
}

func TestMigrationsParseAsCockroachDB(t *testing.T) {
	files, names, err := migrations.UpStatements(migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no postgres migrations found")
	}
	total := 0
	for _, n := range names {
		total += checkCockroach(t, n, files[n])
	}
	// Down migrations must parse too: an operator may run them.
	sub, err := migrations.Files(migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	downs, _ := fsGlob(sub, "*.down.sql")
	for n, sql := range downs {
		total += checkCockroach(t, n, sql)
	}
	if total < 6 {
		t.Fatalf("parsed only %d statements from the migrations", total)
	}
}

func TestStoreStatementsParseAsCockroachDB(t *testing.T) {
	stmts := pgstore.Statements()
	if len(stmts) < 10 {
		t.Fatalf("pgstore lists only %d statements", len(stmts))
	}
	for i, sql := range stmts {
		if n := checkCockroach(t, "pgstore statement "+sql, sql); n != 1 {
			t.Errorf("statement %d holds %d statements, want 1", i, n)
		}
	}
}

func TestParserRejectsPostgresOnlySyntax(t *testing.T) {
	// Guards the guard: the parser must refuse what CockroachDB cannot run.
	if _, err := parser.Parse(`CREATE TABLE t (a INT) WITH OIDS`); err == nil {
		t.Fatal("CockroachDB's parser accepted WITH OIDS")
	}
}
