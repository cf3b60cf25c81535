/*
Package cellsim is a deterministic simulation of a whole corral cell, driven by
one seed: three master replicas sharing an event log, a handful of
machines with their agents and processes, clients sending requests, and the
faults Borg lives with (§4 of the paper: failures are the norm), all in one
goroutine on a simulated clock, so that a seed that breaks an invariant
breaks it again, step for step, when it is replayed.

# What is real and what is simulated

Real, the code the master runs: commands.Decide for every command (clients'
requests, the scheduler's placements, the link's agent reports),
projections.Apply, Load (checkpoint and tail), Encode and the checkpoints;
the writer's decisions (commands/writer: group commit with speculative
applies, what to answer, when to reload, ErrFenced, idempotency, refusals
recorded); the agent link's decisions (commands/agentlink: the requests
that make an agent match, the reports that record its answer under their
idempotency keys, usage windows, pacing and missed polls); the agent
registry's (master.Registration); the scheduling loop's core
(master.SchedulingCore: the adapter master.BuildCell, the pass, the
PlaceTasks); the append rules of the stores (events.ValidateBatch,
CheckAppend, AssignRows, DecideAcquire: the in-memory store,
events/memstore, passes events/storetest like pgstore and sqlitestore do).

Simulated: the I/O around those decisions, as messages that can be
delayed, lost or cut off (the masters' lease, tail and store calls, the
link's polls), the agent (agent/: restart policy and backoff, stops through STOPPING,
state saved before each poll's reply, re-adoption of live processes after
a restart, sweeping the others), processes (services that crash or are
OOM-killed now and then, batch tasks that finish or fail), the network
(delays, stalls, losses, partitions), the database's availability and each
master host's clock. The harness's masters and link cannot be the real
processes: those run goroutines on timers and gRPC, which no seed can
replay; they drive the same decisions.

# Faults

Each seed draws a fault profile (most kinds on, at rates that differ) and
injects, at exponentially distributed times: master crashes (kill -9: a
new incarnation reloads from the newest checkpoint and the tail, and wins
the lease with a new epoch; what the old one had in flight still reaches
the store and is fenced), master pauses (SIGSTOP: it resumes believing it
leads, and its late appends are fenced), a master paused while a supervisor
starts it again under the same name (a second process: it must wait the
old lease out and lead at a new epoch; the old one resumes, is fenced, and
is killed later), clock jumps on a master's host
(back by up to an hour, forward by up to 30 s), the database going down,
a master cut off the database, agent crashes (tasks run on and are
re-adopted), machine reboots (processes die, nothing is re-adopted),
machines cut off every master, and lost and delayed messages throughout.
After the fault phase everything heals, clients stop, tasks stop exiting
on their own, and the cell gets Settle to converge.

# Invariants, checked after every step

See checker: every master's readable state equals the replay of the log up
to its position; no machine holds prod limits above its capacity; every
task is in exactly one state and on at most the one machine it names; every
acknowledged request's events are in the log where acknowledged, and a
request answered with a refusal appended nothing; appends carry
non-decreasing epochs, and no two processes append under one epoch; no machine runs a task twice, and a process of a
task the projection does not place on its machine is gone within the
reconciliation window (three polls of that machine by the current leader,
plus the stop's grace). At the end: a leader leads, every running task has
its process with the recorded pid on its machine, nothing placed on an up
machine is left unstarted, and a full replay and a load from the newest
checkpoint equal the state folded event by event.

# Running it

make test runs TestSim for a wall-time budget (-sim.budget, 15 s by
default, 3 s with -short) over fresh seeds, two at a time; a failure prints
its seed. To replay one seed exactly, with its trace:

	go test ./internal/cellsim -run 'TestSim$' -seed N -v
	CORRAL_SIM_SEED=N go test ./internal/cellsim -run 'TestSim$' -v

The flag is this package's: `go test ./... -seed N` cannot work, because
every other test binary refuses a flag it does not define; the environment
variable works from anywhere (CORRAL_SIM_SEED=N go test ./...). To run a
fixed batch, set CORRAL_SIM_BASE: the batch's seeds are BASE+1, BASE+2, ...
BenchmarkSim reports seeds and steps per minute.
*/
package cellsim
