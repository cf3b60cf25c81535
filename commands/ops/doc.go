// Package ops is how people run a cell: Prometheus metrics for the master,
// structured logs, health and readiness endpoints, a loopback-only profiling
// listener, and `corral doctor`.
//
// # Owns
//
//   - Metrics of a master replica (Master): gRPC interceptors (requests by
//     service, method and code, latency histograms, and an access log),
//     the scheduler's and the link's hooks (master.SchedulerMetrics,
//     master.LinkMetrics), and a collector that reads the projection, the
//     store's head and each consumer's position when scraped (leader,
//     epoch, log position and lag, tasks by band and state, pending tasks by
//     why-pending reason, machines up, down and draining, whether the link
//     holds machine loss).
//   - InstrumentStore: an events.Store decorator counting events appended
//     (by type), store operations (by result) and their latency, and the
//     newest checkpoint's position and age. Every method delegates.
//   - NewLogger (text or JSON, a slog.LevelVar settable at run time through
//     LevelHandler or SIGUSR1), the Readyz handler (MasterReady
//     checks the store, the projection's lag behind the head and a leader),
//     ServeDebug (net/http/pprof on a loopback address only).
//   - Doctor: the checks of `corral doctor` (masters, store, migrations,
//     leader, agents, machine loss held by the link, clocks, cgroups,
//     crash-looping tasks, Infrastore, disk), each with what is wrong in plain words and the fix; one file
//     per group of checks.
//   - Recovery: gRPC interceptors (outermost in Master.ServerOptions, and
//     on the agent's server) and an HTTP middleware (the master's HTTP
//     port, the agent's, the debug listener) that turn a panic in a
//     request handler into an Internal / 500 answer, logged with the
//     request and its stack and counted (corral_handler_panics_total).
//
// The agent's metrics and endpoints are in package agent (Collector,
// HTTPHandler): this package imports the master, which imports the agent.
//
// # Invariants
//
//   - Labels are bounded: service, method, code, band, state, reason,
//     consumer, event type, store operation. Never a job, task, user or
//     machine name on the master's series, so 10,000 machines and a million
//     tasks cost the same series as ten.
//   - Names follow Prometheus conventions: corral_ prefix, _total for
//     counters, _seconds and _bytes for units.
//   - Scraping never changes anything: gauges are read under the state's
//     read lock or from the store with a short timeout; a store that does
//     not answer shows as corral_store_up 0, not as a failed scrape.
//   - No request ends the process: a handler's panic is that request's
//     error (Recovery).
//   - No DuckDB: the Infrastore's position comes in as a function
//     (Master.Consumer).
package ops
