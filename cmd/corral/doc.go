// Command corral is the one binary of a corral cell: the client (job, task,
// why, machine, quota, events, state, sql, bill, status), the parts of a
// cell (master, agent, migrate, infrastore), and `corral up`, a whole cell
// on one machine. The verbs live in internal/cli; this package only wires
// in the Infrastore, the one part that links DuckDB.
package main
