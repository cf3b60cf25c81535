// Package memstore is an in-memory events.Store for the projections' tests
// and benchmarks. It keeps events decoded (payloads are shared with the
// caller, never copied) and follows the append rules of the real backends
// through events.ValidateAppend and events.CheckAppend; leases are not
// fenced by time. Safe for concurrent use.
package memstore
