/*
Package commands is the only way into a corral cell's log: each command is
checked against the projection of the log and, when accepted, becomes the
events that carry it out. It owns the command types (one per file, each
with its handler), Decide, admission control (quota per user and band),
capabilities, job spec decoding and validation, and the typed refusals the
API maps to gRPC status codes.

Decide(state, command, clock) is pure: it reads the state, never changes
it, reads the clock once and does no I/O. Its events are all stamped with
that time, the actor and the request id (as causation id).

The read rules every surface asks (the API, the web UI, the CLI) live
here too, one function each: MayReadLogs (a task's logs: owner or admin),
MayReadMetrics (the master's /metrics: admin), CostsScope (bills, the
costs page, the FOCUS export: a user their own, an admin anyone's or
all), MayQueryCell (SQL over the Infrastore: admin, as it holds every
user's usage) and CheckPastMoment (a moment asked of the log: after
1970, not in the future).

# Where things are

	commands/            Decide: one command per file (submit_job.go, ...),
	                     draft.go (a command's events before they are
	                     appended), spec decoding, validation, admission
	commands/writer      the leader's group commit, decided purely
	commands/agentlink   the agent link's decisions, pure
	commands/master      a replica's I/O: lease, tail, the writer's appends,
	                     the scheduler loop (scheduling.go), the link's
	                     polls (link.go), the agent registry
	commands/api         the gRPC API over one replica (depends on master,
	                     never the other way); commands/api/apitest starts
	                     replicas serving it for tests
	commands/apipb       the API's protobuf; commands/client the one client
	commands/webui       the web UI; commands/nameservice DNS
	commands/ops         metrics, health, doctor; commands/auth security
	scheduler/           the pure pass (its fit and constraint rules serve
	                     PlaceTasks); agent/ the machine's agent and the task
	                     lifecycle's rule; projections/ the fold; events/ the
	                     log; infrastore/ DuckDB
	fauxmaster/          what-if replays through this package, the writer,
	                     the link and the replica's scheduling core; above
	                     commands, below commands/webui (its /sim page)
	internal/cellsim     the deterministic simulation of a cell, which drives
	                     all of the above; internal/history the golden
	                     histories' generator (test kits: only tests import
	                     them)

Which of these may import which is scripts/archcheck/rules.go, checked by
make verify and drawn in the README.

# Usage

The master, for every command:

 1. Authenticates the caller and builds the command with Meta{Actor,
    RequestID}. The actor is the caller's identity, never taken from the
    request body: a spec's user is replaced by it. The scheduler and the
    agent link act as an admin.
 2. Calls Decide(s, cmd, clock) on its current projection s. A refusal is
    an *Error with a Code, the field at fault and a message a person can
    act on; invalid specs list every violation in Details. Nothing is
    emitted with a refusal. No events and no error means nothing to do.
 3. Appends the events with ExpectedPosition = s.Position,
    IdempotencyKey = Meta.Key() (the request id in the actor's namespace:
    users' ids never collide) and the request's Fingerprint, so a retried
    request appends nothing and gets the first result, and the same id sent
    for another request is refused (ReusedRequestID).
 4. Applies the appended events to s (projections.Apply), then replies
    with their positions.
 5. On its tick, sends RollingUpdateStep (advances rolling updates and
    drains held by disruption budgets), the
    agent link's ReportAgentState for each poll (agentlink.Reports), and
    the scheduler's PlaceTasks for each pass. PlaceTasks.Check says which
    proposals the handler would refuse; what an agent runs that the
    projection does not place there, the link stops (agentlink.Requests).

Spec files are decoded by DecodeSpecJSON (the CLI turns Jsonnet and YAML into JSON first);
specs that arrive as protobuf are checked by ValidateSpec.

# Invariants

  - Every accepted command's events, applied in order to the state Decide
    read, fit it: projections.Apply skips none of them.
  - Admission happens at submission (and update), never in the scheduler:
    a job is refused at once when its demand plus what the user's live
    jobs in its band are charged exceeds the user's quota in that band.
    Best-effort quota is unlimited. Production and monitoring quota in
    total never exceeds the cell's capacity (SetQuota refuses it).
  - An admin may change any job; a user only their own. Machine commands,
    quota, placements and agent reports need the admin capability.
  - Voluntary evictions (a rolling update's restarts, a drain) keep the
    job's disruption budget (disruption.go, one rule for both): they never
    stop a serving task while the job has max_disruptions (default 1)
    tasks that do not serve (stopped, waiting, placed and not started,
    failing their health check, or a roll's or drain's replacement not yet
    healthy, or without a check not yet run for min_healthy_time). A task
    that does not serve may be stopped at once. Batch jobs (appclass
    batch) leave a draining machine at once, as Nomad drains batch
    allocations; DrainMachine with Force evicts everything. Preemption and
    machine loss are not voluntary and do not ask the budget. A draining
    machine stays draining; RollingUpdateStep evicts more as replacements
    settle, and evicts its allocs once no task is left on it.
  - A rolling update's changes that need no restart (priority, labels,
    count, policies) move tasks in place and commit at once. One uncommitted update per
    job; it can be rolled back until committed. A task of the new version
    that fails before it is healthy, or no progress by progress_deadline,
    halts the update (JobUpdateHalted) and, with auto_revert (default on
    for services), rolls it back; an update whose every task serves the
    new version commits itself (auto_commit, default on); canaries wait
    for PromoteUpdate.
  - A placement is accepted only against the machine version it was
    computed from, on an up machine that is not draining, meeting the hard
    constraints, fitting (prod by limits, others by reservations) after
    its preemptions, with free ports. Prod tasks never preempt prod tasks.
    Stale or infeasible placements are refused one by one.
  - A task the job still wants is resubmitted in the same command that
    ends it: always after an eviction or loss, as the restart policy says
    after a failure or a clean exit. A job none of whose tasks is left
    finishes, and the jobs deferred until it finished start.
  - A death of the task's own making (a failure: exit, signal, a start the
    agent refused, an OOM kill, which the agent reports as an eviction
    with reason "oom" and is recorded as TaskFailed "OOMKilled") counts
    against max_restarts across reschedules, and its resubmission waits
    RestartPolicy.Backoff of its failures in a row (TaskSubmitted
    not_before_us, fail_streak), the rule the agent's restarts in place
    follow too; a run healthy for twice the longest backoff starts the
    doubling over. The scheduler leaves a task alone until then.
  - A kill, or an eviction the master decides (a drain, an update's
    replacement; not a preemption, whose preemptor takes the room in the
    same command, nor an eviction the agent did), of a placed task is
    stopping: its machine holds the task's resources until the agent no
    longer reports that run (its end, another run of the task, or none),
    when ReportAgentState records TaskStopped; a machine down frees them.
  - Every failure the agent restarts in place is a TaskFailed, a start
    that failed included (no such file, permission denied, not
    executable, a sandbox or cgroup the agent could not make): a placed
    task that never ran has no start to fail from, so a report of a run
    past Task.RunsSeen in backoff is news, recorded once however many
    polls repeat it.
*/
package commands
