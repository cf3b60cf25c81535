// Package usagecheck checks that a log's usage windows tile time: the
// invariants of billing that the commands' usage rule
// (commands.ReportAgentState) must keep, checked over the events alone by
// the property tests and the cell simulation (internal/cellsim).
//
// It owns no rule of corral's: it follows the log with its own shadow
// projection and derives each task's runs from the task states the
// projection has always kept (a run is running on a machine from its first
// start until the task is no longer live there), not from the spans the
// rule itself reads. Invariants it checks:
//   - A machine's windows never overlap and leave no gap: each starts
//     where the machine's previous one ended (since it was last
//     registered), and ends after it starts.
//   - Every task in a window carries its own interval, inside the window.
//   - A task's intervals never overlap one another (on any machine).
//   - An interval lies inside one run of the task on that machine: never
//     before it started, never after it ended.
package usagecheck
