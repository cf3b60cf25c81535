// Package fauxmaster replays a window of a cell's log through the cell's own
// code with a change, and says what would have been different (Borg's
// Fauxmaster, §3.1 and §5 of the paper: "would this have fit", capacity
// planning, a configuration checked before it reaches production).
//
// # What it owns
//
//   - Recording: a window of the log taken apart (Load, FromEvents; Load
//     reads any projections.Source: the cell's store, or an Infrastore
//     file's events table through infrastore's Log): the
//     state at its start, the requests people and operators made, the
//     scheduler's passes (the position each read, which seeds it,
//     TaskScheduled.pass_position), every task's runs and the usage
//     reports that moved a reservation.
//   - Sim and Run: the replay, on a simulated clock in one goroutine.
//   - GoogleTrace: the public Google trace (clusterdata-2011-2) as a
//     recorded cell's log, for FromEvents: its machines on the published
//     mix, prod quotas as its users' prod jobs held at their peak (scaled
//     to the cell), its jobs, placements, evictions, failures, finishes,
//     kills and losses. Assumed where the trace is silent: the machines'
//     sizes, a job's tasks submitted together, no constraints.
//   - Change: what the replay does differently (machines removed or added,
//     the pass's policy and pool size, selected jobs' priority or requests,
//     quotas in place of the recorded ones).
//   - Report: recorded against simulated, per user and band (pending
//     time p50/p90/p99, tasks placed and still pending at the end,
//     evictions and preemptions), the CPU and memory held against the
//     capacity, machines used, and each placement that differs with why.
//
// # The same code the cell runs
//
// Every request is a command decided by commands.Decide and folded by
// projections.Apply, as the writer does; every pass is
// master.SchedulingCore's (the adapter, the pass, PlaceTasks, the rolling
// update steps); every agent answer is a ReportAgentState, the link's
// command. There is no second scheduler and no second fold. The recorded
// and simulated metrics come from one observer reading the events and the
// state they were folded into.
//
// # How a replay runs
//
//   - Requests (submissions, updates, kills of jobs and tasks, machines
//     registered, drained or removed, quotas) are made again at their
//     recorded times, by their recorded actors. A machine that stopped
//     answering in the recording stops answering at the same moment, and
//     a process its agent lost (an agent restarted) is lost then, if the
//     replay runs it on that machine.
//   - Passes run when the recorded passes did, on the state just after the
//     position each read, seeded with it, and their placements land when
//     the recorded ones did (the handler re-checks them against the state
//     then, as it did). Work that no recorded pass is about to take (within
//     2 s) gets a pass of the simulation's own PassDelay after the change
//     that made it, seeded by the simulated log's position.
//   - The simulated agents start a run after the recorded run's delay from
//     placement to start (the recording's median for new runs). A run the
//     recording placed on the same machine and never started there (its
//     agent waits for the task's previous run to stop before it starts the
//     next) does not start in the replay either. A run ends
//     as the task's next run in the recording that ended by its own doing
//     (finished, or failed and not restarted in place), after as long as
//     that run ran; a task with none left runs past the window's end.
//     Evictions, losses and kills are not replayed as outcomes: they come
//     from the simulated cell (its passes, its machines, the replayed
//     kills). Usage windows that moved a reservation in the recording, the
//     health check's answers and the exits the agent restarted in place
//     are reported at the same offsets into the run, so reservations,
//     rolling updates and their rollbacks move as they did; a run the
//     recording does not have turns healthy after the recording's median.
//   - A run killed or evicted while placed holds its machine's room (see
//     projections) until as long after as its recorded TaskStopped came:
//     its simulated agent reports it stopping (the oldest run of the task
//     stopping, as a real agent starts no other meanwhile) until then, or
//     for ever when the window has no TaskStopped of it.
//   - The recorded scheduler's rolling-update steps run when they ran;
//     the simulation adds its own only when none is due.
//   - Unchanged, a replay reproduces the recorded placements: the same
//     passes read the same states with the same seeds.
//
// # What it does not model
//
//   - Usage other than the windows that moved a reservation (held
//     resources are limits), agents refusing a start, the link's polling
//     delays, master failovers; the pass's own clock is not in the log, so
//     a recorded pass runs at its placements' time.
//   - Faults of the masters (crashes, pauses, clock jumps): the passes of
//     a deposed leader and time going backwards are not replayed as such;
//     a recording with them replays, but its placements agree less
//     (unchanged: 100% on calm simulated cells, 16-99% with faults on).
//   - Price sheets and billing periods are counted in Report.NotReplayed,
//     not made: they change no placement.
//   - Why-pending records (RecordPendingReasons): they change no placement,
//     and the replay's passes skip explaining (scheduler.Config's
//     NoExplanations).
//
// # Invariants
//
//   - Deterministic: a Recording, Options and seed give the same Report.
//   - The recording is read only; a replay folds its own copy of the state.
//   - Pure: no I/O but Load's reads of the log, no wall clock in the
//     replay (Report.WallSeconds is measured around it).
package fauxmaster
