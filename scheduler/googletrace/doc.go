// Package googletrace reads the public Google cluster trace
// (clusterdata-2011-2): its task_events parts, row by row, and the cell's
// machine mix as Reiss et al. (SoCC 2012) published it, since the trace
// gives the tasks' requests but not the machines' capacities. The
// compaction harness (scheduler/workload) and the Fauxmaster's replay of
// the trace (fauxmaster) both read it from here.
//
// Invariants: rows come in the files' order (the trace's time order); a
// malformed row is an error naming its file and line, never skipped
// silently; capacities and requests are scaled by the one assumption
// below (CPU, Memory).
package googletrace
