// Package apipb is the corral master's public API (the Cell service), used
// by the `corral` command, the web UI and any other client, generated from
// api.proto.
//
// Mutations go to the leader; reads are served by every master and accept
// "at least position P", so a client reads its own writes. The caller's
// user comes from its credentials, never from a request body.
//
// Invariants: fields are only ever added, never renumbered or retyped; the
// generated files are committed, regenerated with `make proto`, and `make
// verify` fails when they are stale.
package apipb
