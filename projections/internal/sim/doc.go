// Package sim drives a corral cell with random commands, deterministically
// from a seed, to produce valid event histories for the projections' tests
// and benchmarks. Every event comes out of commands.Decide against the
// evolving state, so a history is one the master could have written. A
// crude scheduler (first fit over a few random machines, some deliberately
// stale versions, some preemptions) and crude agents (starts, exits,
// failures, OOM kills, usage) stand in for the real ones.
package sim
