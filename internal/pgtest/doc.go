// Package pgtest gives each test its own fresh PostgreSQL database.
//
// The server is CORRAL_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable). When the
// server cannot be reached the test is skipped, except under CI=true, where it
// fails: CI never passes by silently skipping the real database.
package pgtest
