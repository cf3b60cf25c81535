// Package history drives a corral cell with random commands,
// deterministically from a seed, to produce valid event histories: the
// golden histories under projections/testdata/histories that the
// projections' tests read (written by this package's test with -rewrite),
// and the large history their benchmarks read (cmd histgen). Every event
// comes out of commands.Decide against the evolving state, so a history is
// one the master could have written; it lives on the commands side so
// that no test of the fold imports the decider. A crude scheduler (first
// fit over a few random machines, some deliberately stale versions, some
// preemptions) and crude agents (starts, exits, failures, OOM kills,
// usage) stand in for the real ones: the histories need variety, not the
// real scheduler's choices.
package history
