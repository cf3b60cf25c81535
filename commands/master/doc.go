// Package master is one replica of the cell's master: it keeps a projection
// of the log current (the tail), campaigns for the leader lease, and, while
// it leads, is the only writer of the log (the writer loop) and runs the
// scheduling loop (scheduling.go) and the agent link's I/O (link.go: the
// polls, and the agents' registration). It is the replica only: the Cell
// gRPC API over it is package commands/api, which depends on this package,
// never the other way; the simulation (internal/cellsim) runs this package
// without it.
//
// The write path, in order (the decisions are commands/writer's, which
// the simulation drives too; write.go does their I/O):
//  1. A command (from the API, the scheduler or the agent link) is queued to
//     the writer, which drains the queue into a group commit.
//  2. Under the state's write lock each command is decided against the
//     state including the batch's earlier commands (commands.Decide), and its
//     events are applied speculatively.
//  3. The batch is appended in one transaction (Store.AppendMany) with the
//     position before the batch as its expectation, the lease's epoch, and
//     each command's request id as its idempotency key.
//  4. On success every command gets its positions; on any failure the state
//     is reloaded from the log (so nothing uncommitted survives), and a batch
//     that held a request seen before is redone one command at a time so the
//     retried one gets its first result.
//
// Invariants:
//   - Readers never see uncommitted events: the write lock is held from the
//     first Decide of a batch until it is appended and applied.
//   - Only the lease holder appends, and every append carries its epoch: a
//     deposed leader's append fails with ErrFenced and it steps down. The
//     holder is this process (Holder: name#incarnation), so a replica
//     restarted under its name while the old process is paused leads at a
//     new epoch and the old one is fenced.
//   - The state equals a replay of the log up to State.Position; the tail
//     applies what others appended and skips what this replica applied.
//   - A retried request id returns the first result and appends nothing
//     (recent ids are answered from memory, older ones by the store). Ids
//     are scoped by the authenticated user (commands.Meta.Key), and an id
//     sent again for a different request (its fingerprint, a digest of the
//     API request) is refused with InvalidArgument naming request_id.
//   - Reads with min_position wait until it is applied (WaitFor): read-your-writes on
//     any replica. Followers refuse writes with Unavailable, naming the
//     leader and its address (trailer x-corral-leader).
//
// Operations (hooks.go): SchedulerConfig.Metrics and LinkConfig.Metrics are
// told of every scheduling pass and every poll (package ops makes them
// Prometheus series); the leader keeps what its link last saw of each
// agent (Agent: last poll, missed polls, clock skew, cgroup mode), and
// whether its link holds machine loss (LossHold: most machines miss at
// once, so none is marked down; recorded as MachineLossHeld), which the
// API shows.
//
// Who a caller is (Master.ActorOf) is one answer for the API and the
// HTTP endpoints that take a token (the /metrics gate of the corral
// command, commands.MayReadMetrics), from the identity and Config.Admins.
// How an error of the core reads as a gRPC status (Status, status.go) is
// one mapping for the API and the agents' registration: a follower's
// refusal of a write is Unavailable, naming the leader in LeaderHeader.
package master
