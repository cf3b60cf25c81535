// Package events owns the cell's log: the envelope of every event, the
// catalogue of event types, their encoding, and the Store interface that the
// backends (pgstore for CockroachDB and PostgreSQL, sqlitestore for one
// machine) implement.
//
// The vocabulary every layer shares lives here too: the priority bands and
// what is prod (bands.go, with BandSQL for the Infrastore), the restart
// policy's backoff (restart.go), a health check's defaults (healthcheck.go),
// the resource ceilings (limits.go) and the syntax of label keys and values
// (labels.go).
//
// # The one rule
//
// State changes only by appending events. Every in-memory structure of corral
// is a projection of this log and can be rebuilt by replaying it.
//
// # Caller's duties (the master's write path)
//
//  1. Decide against a projection at position P (commands.Decide); stamp
//     OccurredAt from the injected clock, never time.Now inside the core.
//  2. Append with ExpectedPosition P, the leader's Epoch, and the client's
//     request id as IdempotencyKey.
//  3. On ErrConflict, refresh the projection and decide again; on ErrFenced,
//     stop writing: another master leads.
//  4. Apply the appended events to the projection only after Append returned
//     (the store assigns Position, StreamVersion and RecordedAt).
//  5. Reply with AppendResult.Last so the client can read its own writes.
//
// # Invariants
//
//   - Positions are 1, 2, 3, ... with no gap and no duplicate. The single
//     writer assigns head+1... inside the append transaction, under
//     SERIALIZABLE isolation, so a transaction that commits position N+1 has
//     read N committed: no reader can ever see N+1 without N, and tailing by
//     position (Subscription) never misses an event.
//   - An append is atomic: all of its events or none.
//   - ExpectedPosition other than AnyPosition must equal the head, else
//     ErrConflict; of concurrent appenders expecting the same head exactly
//     one wins.
//   - Once a leader lease exists, an append must carry its current epoch
//     (ErrFenced otherwise), checked in the same transaction: a deposed
//     leader's late append never lands. Before any lease, appends carry 0.
//   - Every acquisition of a lease raises its epoch (DecideAcquire), and a
//     live lease is taken only by its own holder; renewal matches holder
//     and epoch. A holder is one process's incarnation, not a replica's
//     name, so no two processes ever write under one epoch.
//   - An idempotency key seen before returns the original positions with
//     Duplicate set and appends nothing, unless both appends carry a
//     fingerprint and they differ: then ErrRequestReused, nothing appended.
//   - Stream versions are 1, 2, 3, ... per stream, assigned with positions.
//   - A stored event that cannot be decoded (unknown type, corrupt payload,
//     schema version from the future) is an ErrCorrupt naming its position
//     and type. Reads never skip it.
//   - Bad input (empty append, empty stream, nil payload, zero OccurredAt) is
//     ErrInvalid naming the event's index and field, and appends nothing.
//   - Times are kept to the microsecond, in UTC.
//
// # Encoding and schema versions (upcasting)
//
// Payloads are protobuf messages (catalogue.proto), encoded deterministically.
// A message's name is its stored type. Every stored event carries the schema
// version it was written with. Protobuf already reads old bytes when fields
// are only added, so most changes need no version bump. A change that cannot
// be expressed by adding a field (a field changing meaning or type) bumps the
// type's version with RegisterUpcaster(type, n, f), where f rewrites version
// n-1's bytes into version n's. Decode runs the chain of upcasters from the
// stored version to the current one before unmarshalling, so old events are
// read as current ones and the log itself is never rewritten.
//
// Each task event names the Google cluster trace event code it maps to
// (TraceCodeOf): SUBMIT 0, SCHEDULE 1, EVICT 2, FAIL 3, FINISH 4, KILL 5,
// LOST 6, UPDATE_PENDING 7, UPDATE_RUNNING 8.
//
// # The sequential position on CockroachDB
//
// A gap-free global position means every append writes to the tail of one
// primary-key range, and reads max(position): on CockroachDB that is a
// single-range hot spot. corral accepts it by design rather than avoiding it:
// there is exactly one writer (the leader, fenced by its epoch), so there is
// no write contention to spread, and the leader batches (one transaction per
// command, and the scheduler's placements of a pass in one append), which
// keeps the range's write rate in appends per second rather than events per
// second. The range splits by load as it grows, and only the tail range is
// hot. Followers read by position ranges (no hot spot for reads), and a
// hash-sharded secondary index is unnecessary because nothing looks events up
// by anything but position and stream. If one writer ever stopped being
// enough, the log would be partitioned per cell, not per row.
//
// # Subscriptions
//
// Store.Subscribe(after) returns a Subscription whose Next blocks until
// events after `after` are committed and returns them in order. It is woken
// at once by appends made through the same Store value and polls for the
// appends of other processes (PollInterval). No LISTEN/NOTIFY is used, so the
// same code runs on CockroachDB. To resume after a restart, subscribe again
// after the last position applied.
package events
