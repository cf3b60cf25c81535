// Package agent is corral's Borglet: everything that runs on a machine. It
// starts the tasks the master asks for as real processes, each in its own
// sandbox and resource container, restarts them by their restart policy,
// checks their health, samples their usage, and reports its full state
// whenever the master polls (Borg §3.3, §6).
//
// # Owns
//
//   - The Agent service (agentpb): Poll carries the master's requests
//     (start, stop, update, forget) and returns the agent's full state:
//     every task, the latest usage sample of each, and the events (starts,
//     exits, OOM kills, evictions) the master has not acknowledged yet.
//   - Registration: Run registers the machine (capacity detected or
//     configured, attributes, arch and os) with the first of the cell's
//     masters that answers, following a follower to the leader it names.
//   - Tasks as processes: a sandbox per task under DataDir/tasks/<user>/
//     <job>/<index> (work/, tmp/, logs/); an environment of only PATH, HOME,
//     PWD, TMPDIR, the spec's variables and CORRAL_TASK_INDEX, CORRAL_JOB,
//     CORRAL_USER, CORRAL_CELL, CORRAL_NAME, CORRAL_SANDBOX, PORT and
//     PORT_<name> (PORT_<i> for unnamed ports); stdout and stderr appended to
//     logs/ and rotated by size; each process the leader of its own process
//     group, so signals reach the whole tree.
//   - Isolation (Borg §6.1): with Config.TaskUIDs, an agent running as root
//     runs each task as a uid of its own (its group the same number, no
//     other groups). The sandbox and logs/ are root's with the task's group
//     (0750, logs 0640), work/ and tmp/ the task's (0700), the directories
//     above root's and 0711: a task reads and writes only its own files,
//     reads its own logs but cannot swap them for links the agent would
//     follow, and cannot read another task's files, logs or /proc/<pid>/
//     environ nor signal it. The agent moves the process into its
//     container before the task's code runs (a gate on fd 3). A forgotten
//     task's sandbox is closed to its uid and any process left as that uid
//     killed before the uid is given out again. Without it every sandbox is
//     0700 and log 0600, as the agent's own user. The state files are 0600:
//     they hold task specs with their secret values.
//   - Transport: Run serves with Config.ServerOptions and registers with
//     Config.MasterDialOptions (mutual TLS from package commands/auth: only
//     the cell's masters may poll; the master must show a master's
//     certificate).
//   - Containers (package cgroup): cgroup v2, else v1, else sampling /proc.
//     Memory limits are enforced by the kernel, or by the agent killing a
//     task over its limit when no cgroup can be used (it says so at start).
//     CPU limits are quotas; shares favour latency-sensitive tasks ten to
//     one over batch tasks of the same size.
//   - Operations: Collector (Prometheus: task events, restarts, OOM kills,
//     health-check failures, polls as the agent sees them; tasks by state,
//     CPU and memory per job and band read from the state when scraped),
//     Ready (polled by a master within ReregisterAfter) and HTTPHandler
//     (/metrics, /healthz, /readyz), served by Run on Config.HTTPAddr.
//     Records about a task carry user, job and task (its index).
//   - Logs: a task's stdout and stderr served over the protocol (Logs),
//     at most Config.MaxLogStreams streams at once (more are refused with
//     ResourceExhausted, never queued); a stream ends when its caller's
//     context does.
//   - The clients of the protocol: Dial for the master's link, the request
//     builders, ResolveSpec (job spec to task spec: the one rule, which the
//     master's link calls through agentlink.TaskSpec). What an agent event
//     records is the master's to decide (agentlink.AgentEventTask, then the
//     ReportAgentState command).
//
// # Task lifecycle
//
// RUNNING -> exit -> (BACKOFF -> RUNNING)* -> FINISHED | FAILED | KILLED |
// EVICTED. What an exit comes to is one pure rule, AfterExit (in
// lifecycle.go), which the agent, the cell simulation and agentsim all
// apply; the agent only does its effects (timers, events, cgroups). An exit 0 under "always", or a failure (non-zero exit, signal,
// failed health check, start failure) under "always" or "on-failure",
// restarts the task in place after a backoff of initial, 2x, 4x, ... up to
// the max (events.RestartPolicy.Backoff: 1 s to 5 minutes by default, the
// rule the master's reschedules follow), until max_restarts. Stop is SIGTERM to the process group and
// SIGKILL after the grace period: the spec's kill_timeout (the job's), else
// the stop's, else Config.DefaultGrace; the same for a replacement by an
// update and a failed health check (SIGKILL also reaches every process left
// in the container). A task over its memory limit is EVICTED with reason "oom"
// (the master records it as a failure of the task, OOMKilled); one killed
// to relieve machine memory or disk pressure with reason "overcommitted"
// (whom: pressureVictims, the one rule, in pressure.go). Both are
// ended: the master decides where and when they run next.
//
// # Invariants
//
//   - The master sees every event: events carry a sequence number and stay
//     in every reply until a poll acknowledges them (or MaxEvents overflows,
//     which the reply counts).
//   - The state a poll replies with is saved in DataDir before the reply is
//     sent, so a restarted agent never forgets a task the master was told of.
//     It is written alternately into two checksummed slot files (state.0,
//     state.1), so a crash mid-write leaves the previous state readable.
//   - A poll with an epoch older than the highest seen is refused: a deposed
//     master cannot start or stop anything. So is a poll naming another
//     machine: an address reused by another machine gets no requests meant
//     for the old one.
//   - Memory or disk pressure evicts only non-prod tasks (priority <
//     ProdPriority): those over their own limit first, then the lowest
//     priority, and only until the rest fit.
//   - Tasks never depend on the agent process: no pipes to it, no parent
//     death signal. When the master is unreachable nothing changes (the
//     agent is just not polled); when the agent stops, tasks keep running.
//   - Time comes from Config.Clock: backoff, grace periods, health periods
//     and sampling are driven by it.
//
// # Agent restart: re-adopt
//
// A restarted agent re-adopts its tasks rather than killing them, so an
// agent upgrade or crash costs no task its work. For every task its state
// file lists as running, the recorded pid must be alive, not a zombie, and
// have the recorded start time (field 22 of /proc/<pid>/stat) in the same
// boot (boot_id): then it is the same process, not a reused pid. It is
// adopted: reported RUNNING with adopted set, its container reopened, its
// usage sampled and its health checked again, and an ADOPTED event emitted.
// Otherwise the process ended unwatched: the task is reported as failed
// with reason "lost" and its restart policy applies. A task that was being
// stopped is SIGKILLed at once, its grace period having run. Every other
// container under the agent's cgroup parent is destroyed with what runs in
// it: processes the agent cannot account for are killed, never left
// unlimited. The parent names the cell and the machine
// (corral/<cell>-<cell id>/<machine>, Config.Cell and CellID), so this
// sweep never reaches another cell's containers on the same machine, even
// one with a machine of the same name or a copy of this cell's CA: the
// caller gives an id of the cell's own (the corral command mints one per
// data directory), never one derived from its certificates. An adopted
// process is not the agent's child, so its exit is noticed through a pidfd
// (or, where the kernel has none, by polling /proc) and its exit status is
// unknown ("exit-unknown", counted as a failure). Closing removes the
// parent (and the cell's level above it) once no container is left in it,
// so an agent that ended its tasks leaves no cgroup behind; one whose tasks
// run on for the next agent keeps it.
//
// No task holds an OS thread: exits are watched through pidfds parked in
// Go's netpoller (exitwatch.go) and a child is reaped only once its pidfd
// says it has exited, so the wait returns at once. A blocked wait per task
// would give one `corral up` running 10,000 tasks as many threads, past Go's
// limit of 10,000, and crash it.
//
// # Running
//
// The `corral agent` command and `corral up` call Run, the one main loop,
// with a Config built from their flags (and panic recovery as
// ServerOptions and HTTPMiddleware):
// --name (Name), --master (Masters), --listen (ListenAddr), --data
// (DataDir), --cpu, --memory, --disk and --ports (Capacity; what is not
// given is detected: cores, MemTotal, free space of DataDir, the port
// range), --attr k=v (Attributes; arch and os are detected). Several agents
// may run in one process (corral up) given distinct names, data dirs and
// listen addresses. With Config.StopTasksOnExit (what `corral up` wants on
// Ctrl-C) Run stops every task before it returns (StopAll: SIGTERM, SIGKILL
// after DefaultGrace; tasks end KILLED with reason "agent stopping");
// otherwise tasks run on and the next agent adopts them. Package agentsim
// provides simulated agents speaking the same protocol, with no processes,
// for benchmarks of the master's link.
package agent
