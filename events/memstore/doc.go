// Package memstore is an event log in memory: one Log (the database) and
// any number of connections to it (Store, an events.Store each with the
// clock of the process that holds it). The whole-cell simulation and the
// projections' tests use it; the binary never does.
//
// Invariants:
//   - It follows the append rules of the real backends through the same
//     helpers (events.ValidateBatch, CheckAppend, AssignRows,
//     DecideAcquire) and passes the events/storetest conformance suite, so
//     what a test proves against it holds for pgstore and sqlitestore.
//   - Payloads are stored encoded and decoded on every read: no two
//     readers ever share a payload, as with a real database.
//   - SetDown makes every call fail (ErrStoreDown) without losing anything
//     stored: a database that cannot be reached.
package memstore
