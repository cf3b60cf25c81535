// Package agentlink holds the agent link's decisions, pure, for the
// leader's link (commands/master) and the simulation alike: the caller
// polls and writes, this package says what to send and what to record.
//
//   - Requests: from what the projection places on a machine and what its
//     agent last reported, the starts, updates, stops and forgets that make
//     the agent match; at most MaxStarts starts per poll (an agent starts
//     them before it answers), stops and forgets in task order.
//   - Reports: one poll's answer as the ReportAgentState commands that
//     record it, in order: refused starts (each a failure of its task),
//     each agent event alone under its idempotency key (AgentEventKey),
//     then the full state with the closed usage window.
//   - News: whether a report would append anything, so a steady machine
//     costs no write.
//   - Usage: a machine's usage samples summed into windows.
//   - Due: when a machine is polled.
//   - LossRule and HoldLoss: when a machine's missed polls mark it down
//     (MissedPolls that count and Silence without an answer; a poll the
//     master started late, or made before its grace ended, counts
//     nothing), and when so many machines miss at once that the fault is
//     the master's own or the network's, and none is marked down (a loss
//     hold, at LossHoldPercent of the cell).
//
// Invariants: a task is never asked to run on two machines (a task placed
// elsewhere is stopped here); an ended task placed here again is started
// only once its end is in the log (synced); a run of another submission of
// the task than the placement's (StartTask.submission, or a later spec
// version) is stopped, never adopted nor waited for; an agent event is
// recorded at
// most once (its key), and none at or before the log's watermark of the
// machine's events (acknowledged, or the newest key the log holds) nor
// before a start the projection already has (RecordedStarts).
package agentlink
