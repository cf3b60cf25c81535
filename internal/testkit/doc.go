// Package testkit holds the helpers the tests of several packages share:
// a buffer a process or logger writes while the test reads it
// (SyncBuffer), waiting for a condition by polling it (Eventually,
// EventuallyEvery for one that is costly to ask), checking that one holds
// for a while (Consistently), and removing the cgroups a test made
// (RemoveCgroups).
//
// Invariants: only tests import it; nothing here sleeps for a fixed time to
// let something happen; a condition is polled until it holds or the time
// given runs out, and the failure names what was waited for.
package testkit
