/*
Package projections folds a corral cell's event log into the in-memory cell
state: machines, jobs with every spec version, tasks, alloc sets, quotas and
what is charged against them, and the leader's epoch. It owns State, the
pure fold Apply, the checkpoint codec and the ways to rebuild a state from a
store: Load (the head), StateAt (a position) and StateAtTime (a time).

The state is a projection: everything in it comes from events, and any of it
can be rebuilt by replaying the log. Apply is a type switch on the payload
that changes only the state (hallgren's Transition); it does no I/O, reads
no clock and draws no random number, so a replay always gives the same
state.

# Usage

A master (or a follower, or a tool) keeps a State and:

 1. Rebuilds it at start: s, err := Load(ctx, store) reads the newest
    checkpoint that decodes and replays every event after it.
 2. Decides against it: commands.Decide(s, cmd, clock) returns events that
    were checked against s at s.Position.
 3. Appends them with ExpectedPosition = s.Position, so that a state that
    moved meanwhile (another writer) fails with events.ErrConflict and
    nothing is appended; then decides again.
 4. Applies the appended events to s, in order: Apply(s, e) for each. An
    event carrying Position 0 is taken as the next one, so the decided
    events can be applied as they are.
 5. A reader that tails the log (a follower, the watermill handlers)
    applies what the subscription delivers. Events at or before s.Position
    are ignored, so at-least-once delivery is harmless; an event past the
    next position returns ErrGap and changes nothing: read the gap first.
 6. After applying, asks its Checkpointer: cp.Maybe(ctx, s) writes
    Encode(s) when EveryEvents events or Every of clock time have passed.
    The clock is the caller's.
 7. Holds its lock while readers read (the scheduler builds its pass's
    input under it). Apply is not safe for concurrent use with readers.

StateAt(ctx, store, p) returns the state after position p: the newest
checkpoint at or before p, then the events up to p. StateAtTime finds the
last event recorded at or before a time by binary search over positions
(PositionAt) and returns StateAt that position.

Diff(before, after, user) lists what differs between two states of one
cell (diff.go): jobs submitted, changed (the spec fields that differ) or
ended; tasks started, moved, restarted, ended or resubmitted; machines
added, removed, down, up, drained, resized; quotas and price sheets set.
It reads the two states only, in a fixed order, so the same two states
always give the same changes; `corral state diff` and the master's
StateDiff call it on two replays of the log.

# Invariants

  - s.Position is the position of the last event applied; the state equals
    the fold of events 1..s.Position from New(), whether it was reached by
    folding, by a checkpoint and its tail, or by StateAt. The property test
    checks this for random histories at every position.
  - Apply never fails on an event that does not fit (a task of an unknown
    job, a start reported for a task placed elsewhere): it moves the
    position and counts the event in s.Skipped. Unknown event types are
    ignored. Writers that go through commands.Decide never produce such
    events; Skipped > 0 means a writer bug, not a corrupt state.
  - A task is in exactly one state: pending (in the pending index, holding
    nothing), scheduled or running (in its machine's task index, its limit
    and reservation counted in the machine's Limits and Reserved, or in its
    alloc's Used when it runs in an alloc), or dead (finished, failed,
    killed, evicted or lost; holding nothing). FAIL, EVICT and LOST lead
    back to pending only through an explicit TaskSubmitted "rescheduled".
  - A run killed or evicted with stopping (its process may still run, for
    up to its job's kill_timeout) on an up machine and outside an alloc
    leaves a hold on its machine: Limits and Reserved count its limit and
    reservation until TaskStopped for that run (task and submission), or
    until the machine goes down or away. The task itself is dead (or
    pending again) at once; Task.StoppingOn names the machine while its
    last stopped run holds, and Status says "stopping".
  - Machine.UsageEndUS is the end of the machine's last UsageReported,
    and Machine.RunSpans the runs that held resources there since (from a
    run's first start to its end): the next window starts there and bills
    those, so windows never overlap, a new leader's included.
  - Machine.Version is the position of the last event that changed the
    machine or what is placed on it (placements, ends, reservations, spec
    changes of its tasks; not starts or usage). Positions never repeat, so
    a placement computed against a version is stale exactly when the
    version moved.
  - Charged[user, band] is the sum of the demands (task count times
    per-task limits, overrides applied) of the user's live jobs and alloc
    sets in that band; jobs inside an alloc set are not charged again.
  - Every spec version of a job is kept: a rollback may return to any.
  - Checkpoints hold the primary fields only; indexes, back pointers,
    sums, counters, charges and task limits are derived on decode.
    Encode is deterministic: equal states encode to equal bytes.
    CheckIndexes verifies the incremental indexes against a rebuild.

# Indexes

For the scheduler and the agent link: the pending tasks (PendingTasks,
RangePending, PendingCount) and allocs (PendingAllocs), the tasks placed on
each machine (Machine.Tasks, RangeTasks), the jobs of each user (JobsOf),
labels (SelectJobs, SelectTasks with a Kubernetes-style Selector), and the
jobs deferred until another finishes (WaitingOn). PendingOrder keeps the
pending tasks' order for a caller that asks every pass, from a log of the
tasks that entered the queue or changed their spec version since (trimmed
as it outgrows the queue; a reader behind the trim sorts afresh).
*/
package projections
