// Package storetest is the conformance suite every events.Store backend
// passes: ordering, gap-free positions under concurrent appenders, conflicts,
// fencing after a lease takeover, idempotency, tailing, reopening, large
// payloads and long reads.
package storetest
