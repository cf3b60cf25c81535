// Package shareddata finds the data that lives beside a checkout, never in
// it: the neutral workloads (shared/workloads), the public traces
// (shared/traces) and the FOCUS specification (shared/focus-spec). Tests,
// benchmarks and tools find them here and only here, one way:
// $CORRAL_SHARED when it is set, else the folder named shared in the first
// ancestor of the working directory that has one (a checkout with shared/
// beside it, or a clone next to it).
//
// Invariant: nothing here copies or caches the data; it only names where it
// is. A test that needs data that is missing fails under CI=true (CI has
// it beside the clone) and skips, saying what is missing, elsewhere.
package shareddata
