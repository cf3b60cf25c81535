// Package client is the one client of a cell's masters, for the corral
// command and any Go program: reads go to the first master that answers
// (every master serves them), mutations to the leader, followed when a
// follower names it.
//
// Invariants:
//   - A mutation keeps one request id across every attempt, at whichever
//     master, so a write that a hung, deposed or dead master applied is
//     applied exactly once (the masters' idempotency keys).
//   - Only unavailability (Unavailable, or an attempt that hangs while the
//     caller still waits) is retried; any other answer, a refusal included,
//     is the caller's.
//   - Retries are bounded: by the caller's context, by MaxAttempts when
//     set, and at once when no master process answers (GiveUpWhenDown).
package client
