// Package storetest is the conformance suite every events.Store passes:
// ordering, gap-free positions under concurrent appenders, conflicts,
// fencing after a lease takeover, idempotency, tailing, reopening, large
// payloads and long reads. It runs over each shipped backend (Memory,
// SQLite, Postgres; Backends lists them) in that backend's tests, and over
// each decorator of a store (ops.InstrumentStore) through Decorated, so
// that what the master writes through is what the suite checked.
package storetest
