// Package sqlitestore is the event log in one SQLite file, for a cell on one
// machine (`corral up`). It uses modernc.org/sqlite (pure Go, no cgo).
//
// Invariants:
//   - The file is in WAL mode with synchronous=FULL: an acknowledged append
//     survives a crash and a power loss; readers (subscriptions) run beside
//     the writer.
//   - Appends run in BEGIN IMMEDIATE transactions, serialized inside the
//     process by a mutex and across processes by SQLite's write lock, so the
//     head read inside the transaction is the head the events are written
//     after: positions are gap-free and exactly one of several appenders
//     expecting the same head wins.
//   - Open applies the migrations (migrations/sqlite) before returning.
//   - Times are stored as Unix microseconds.
package sqlitestore
