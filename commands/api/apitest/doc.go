// Package apitest starts master replicas that serve the Cell API on
// loopback, over each event store backend: the harness of the replica's
// tests (commands/master) and of the API's (commands/api).
//
// Every replica and store is the test's own (a database of the test
// binary's PostgreSQL, whose TestMain must call pgtest.Main, or a file in
// its temporary directory) and is stopped when the test ends.
package apitest
