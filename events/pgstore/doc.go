// Package pgstore is the event log on CockroachDB or PostgreSQL, through
// pgx. It owns the SQL the log sends; Statements lists it so a test can parse
// every statement with CockroachDB's own parser.
//
// Invariants:
//   - Every read-write transaction is SERIALIZABLE and retried on
//     serialization failures with cockroach-go's retry loop: crdbpgx.ExecuteTx
//     on CockroachDB; on PostgreSQL, whose RELEASE SAVEPOINT does not commit
//     (so ExecuteTx would ignore a failing COMMIT) and whose retry after a
//     serialization failure needs a new snapshot, crdb.ExecuteCtx around a
//     whole transaction, so COMMIT errors surface and retries start fresh.
//   - An append is one transaction: one pipelined round trip reads the leader
//     epoch, the idempotency key, the head and each stream's version; one
//     INSERT ... SELECT FROM unnest(...) writes the whole batch.
//   - No LISTEN/NOTIFY, advisory locks, sequences or PostgreSQL-only
//     functions: the same statements run on both databases.
//   - Open does not change the schema; Migrate applies the migrations
//     (golang-migrate's cockroachdb driver on CockroachDB, which has no
//     advisory locks, and its pgx driver on PostgreSQL).
package pgstore
