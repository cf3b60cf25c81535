// Package api is the Cell gRPC API (apipb) over one master replica
// (commands/master): NewService(m).Register(g). It decides nothing and
// keeps no state of the cell: reads answer from the replica's state (the
// views, views.go), mutations become commands sent down the replica's
// write path (Master.Do), and what is not in the state is read from the
// log (histories, past states) or from the agents (logs). It depends on
// the replica, never the other way; the web UI reads through the same
// Service.
//
// Who calls: the authenticated identity (commands/auth), else in insecure
// mode the UserHeader; either is one answer, Master.ActorOf. Errors of the
// core reach callers through master.Status, as for the agents.
//
// Invariants:
//   - A mutation's request id is the caller's (commands.Meta.Key) and
//     carries the request's fingerprint, so a retry gets the first
//     result and the same id sent for another request is refused.
//   - Reads with min_position wait until the replica applied it
//     (Service.ReadWait bounds the wait): read-your-writes on any replica.
//   - A moment asked of the past (StateAt, StateDiff, WhyPending and
//     PlanUpdate at a time) must pass commands.CheckPastMoment, as the
//     CLI's parse does: a future moment or one before 1970 is
//     InvalidArgument naming the field, never answered with the present.
//     Replays of the log (a whole state each) and plans run a few at a
//     time; more wait.
//   - Plans (PlanUpdate) are master.PlanCommand on a copy of the state:
//     the writer's and the scheduling core's own decisions, nothing
//     appended.
//
// Status tells which replica answers, whether it leads, the log's head (or
// why it could not be read) and since when the leader leads; ListMachines
// adds what the leader's link last saw of each agent and its machine-loss
// hold.
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
package api
