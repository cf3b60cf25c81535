// Package migrations owns the schema of the event log as golang-migrate
// files, embedded in the binary: postgres/ runs unchanged on CockroachDB and
// PostgreSQL (a test parses every statement with CockroachDB's parser), and
// sqlite/ is the embedded store's own set.
//
// Invariants:
//   - Files are only ever added; an applied file is never edited.
//   - Migrations create tables for the log, idempotency keys, leases and
//     checkpoints; they never rewrite events (the log is append-only).
//   - `corral migrate up --store URL` and `corral master` apply them.
package migrations
