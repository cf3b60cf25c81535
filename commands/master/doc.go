// Package master is one replica of the cell's master: it keeps a projection
// of the log current, campaigns for the leader lease, and, while it leads,
// is the only writer of the log. It serves the Cell gRPC API (apipb).
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
//   - Reads with min_position wait until it is applied: read-your-writes on
//     any replica. Followers refuse writes with Unavailable, naming the
//     leader and its address (trailer x-corral-leader).
//
// Operations (hooks.go): SchedulerConfig.Metrics and LinkConfig.Metrics are
// told of every scheduling pass and every poll (package ops makes them
// Prometheus series); the leader keeps what its link last saw of each
// agent (Agent: last poll, missed polls, clock skew, cgroup mode), and
// whether its link holds machine loss (LossHold: most machines miss at
// once, so none is marked down; recorded as MachineLossHeld), which
// ListMachines shows; Status says why the log's head could not be read and
// since when the leader leads.
//
// Logs (logs.go): every read of a task's logs, the API's TaskLogs and the
// web UI's TailLogs and FollowLogs, takes one path (readLogs): the caller
// must be the task's owner or an admin (commands.MayReadLogs), holds a
// slot under Service.StreamCaps (per user and per cell, refused with
// ResourceExhausted past either) while it reads, and reads from the agent
// over AgentLogs' connections: one per agent, never the link's, so a flood
// of streams cannot queue a poll. A stream ends on the agent when its
// client goes away. An earlier run (TaskLogs previous or run, the web
// UI's RunLogs) is read from the machine where it ran: TaskRuns folds the
// task's stream into its runs, and the agent finds a run by its placement
// on that machine and its run marker; a run whose machine is removed or
// down, or whose agent no longer keeps it, is FailedPrecondition naming
// the run, the machine and why. Bills, costs and the FOCUS export keep
// commands.CostsScope; Query needs the admin capability
// (commands.MayQueryCell).
//
// Who a caller is (Master.ActorOf) is one answer for the API and the
// HTTP endpoints that take a token (the /metrics gate of the corral
// command, commands.MayReadMetrics). A moment asked of the past (StateAt,
// StateDiff, WhyPending and PlanUpdate at a time) must pass
// commands.CheckPastMoment, as the CLI's parse does: a future moment or
// one before 1970 is InvalidArgument naming the field, never answered
// with the present.
package master
