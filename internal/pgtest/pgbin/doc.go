// Command pgbin prints the directory of the PostgreSQL server binaries the
// tests start their servers from (pgtest.FindBinaries); when there is none,
// it prints what to install and exits 1. scripts/test-deps runs it, so that
// `make test` looks for the binaries by the rule the tests use.
package main
