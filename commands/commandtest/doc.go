// Package commandtest is a test kit: it carries commands out against an
// in-memory state as the master's writer does (writer.Plan: Decide, then
// Apply with positions), for tests that build a cell out of commands
// rather than by hand.
package commandtest
