// Package storeopen opens the event log named by a store URL: the one place
// that knows every backend, so commands and tests share it.
//
//	postgres://..., postgresql://..., cockroachdb://...  -> pgstore
//	sqlite:///path/to/events.db, /path/to/events.db       -> sqlitestore
//
// Open applies the migrations before returning, as `corral master` must.
package storeopen
