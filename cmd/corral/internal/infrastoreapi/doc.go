// Package infrastoreapi adapts the Infrastore (DuckDB) to the master's API
// (api.Analytics: Query and Bill) and to the corral command's direct
// uses of an Infrastore file (sql --db, infrastore rebuild and
// import-google-trace).
//
// It is the only package of the corral command that imports DuckDB, so
// the other packages build and test without linking it.
//
// Invariants:
//   - Errors leave as gRPC statuses a person can act on: a refused query is
//     InvalidArgument, one past its time limit DeadlineExceeded, a store
//     that needs a rebuild FailedPrecondition naming the command to run.
//   - Query results travel as text rendered exactly as the Infrastore's own
//     writers render each value, with the column's DuckDB type and NULL
//     flagged apart from the empty string.
//   - One cell identity: opened for writing with a cell (the master's
//     Infrastore process), the cell's name is recorded in the file; opened
//     read-only (bill --db), exports name the recorded cell, and a cell the
//     caller gives must be that one.
package infrastoreapi
