// Package pgtest gives tests real PostgreSQL: each test its own fresh
// database on a server the test binary starts for itself, so that `make
// test` needs only the server binaries installed and touches no shared
// server (a developer's running cell or database survives it).
//
// The server: the first NewDatabase of a test binary runs initdb into a new
// temporary directory and starts postgres there on a free loopback port,
// with its unix socket in the same directory (server.go). PostgreSQL
// refuses to run as root: as root, the server runs as the postgres account
// (or nobody), which owns the directory. The binaries are
// CORRAL_TEST_POSTGRES_BIN's, else the first of PATH with initdb and
// postgres, else the newest of /usr/lib/postgresql/*/bin (Debian),
// /usr/pgsql-*/bin, /usr/local/pgsql/bin (binaries.go). The shared server
// skips fsync, synchronous_commit and full-page writes, which only protect
// data across a crash; a benchmark run (-test.bench) and Options.Durable
// keep PostgreSQL's defaults. NewServer gives a test a server of its own
// to Stop (immediate shutdown, as `pg_ctl stop -m immediate`) and Start
// again.
//
// Invariants:
//   - Nothing outlives the test binary. Main (every package calling
//     NewDatabase has `func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }`,
//     and NewDatabase fails without it) stops the server and removes its
//     directory after the tests; a test's own server is closed by its
//     Cleanup. If the binary dies first (SIGKILL, a -timeout panic, a
//     crash), a watchdog (watchdog.go: a shell reading a pipe only the
//     binary writes) sees the pipe close, stops the postmaster and removes
//     the directory.
//   - CORRAL_TEST_DATABASE_URL, when set, is used instead of a private
//     server: databases are created on it and dropped after each test.
//   - A missing part (no server binaries, no account to run them as, the
//     given server unreachable) skips the test, naming what to install
//     (`apt-get install postgresql`) or start, except under CI=true, where
//     it fails: CI never passes by silently skipping the real database.
//     Other failures to start a server fail the test.
package pgtest
