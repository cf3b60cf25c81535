// Package cli is the corral command: the client verbs that talk to a cell's
// master over its gRPC API (job, task, why, machine, quota, events, state,
// sql, bill, status, whoami), the verbs that run a cell's parts (up,
// master, agent, migrate, infrastore), and version.
//
// Conventions every verb keeps:
//   - The master is --master or $CORRAL_MASTER (default 127.0.0.1:7070;
//     a comma-separated list names several replicas). The caller is the
//     name in the credentials (certificate or token), as the master's
//     WhoAmI answers: every verb that defaults to "my jobs" asks it
//     (client.me). Only a master without authentication trusts the name
//     sent instead, --user, $CORRAL_USER or $USER, in the x-corral-user
//     header.
//   - Output is an aligned table by default; -o json, yaml or csv give the
//     same data for programs. Results go to stdout, progress and errors to
//     stderr.
//   - Exit codes: 0 done, 1 failed, 2 usage (bad flags or arguments).
//     Every error says what to do next.
//   - Every mutating request carries a client request id, random and reused
//     on every retry, so a retry never applies twice. A follower's refusal
//     naming the leader (trailer x-corral-leader) is followed at once, with
//     the same request id.
//
// Each verb has a file named for it (machine.go; a big subverb its own,
// machine_drain.go), and what several verbs share sits in a file named for
// what it is (client.go, output.go, resource_flags.go, ...).
//
// The Infrastore (DuckDB) is reached through the Infra interface, so this
// package builds and tests without linking DuckDB; the main package passes
// the real one in.
package cli
