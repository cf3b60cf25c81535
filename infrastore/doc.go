// Package infrastore is a cell's analytical store: every event of the log,
// and tables derived from them, in one DuckDB file, for SQL debugging,
// capacity planning, state at any time T and usage-based bills. It also
// loads the public Google cluster trace as a cell's history.
//
// It owns the DuckDB file and everything in it. It is derived data: the log
// is the truth, and Rebuild recreates the file from it at any time (a schema
// change is always met by a rebuild). Only this package (and cmd/) imports
// DuckDB.
//
// # Using it
//
//  1. Open(ctx, path, Options{}) opens or creates the file.
//  2. Run(ctx, store) catches up from the stored position, then follows the
//     cell's events.Store through the event feed (events/feed: retries, a
//     poison queue) until ctx ends, rebuilding first a file of another
//     schema version; the corral command's Infrastore process runs it.
//     CatchUp applies up to the head and returns. Only one ingester runs at
//     a time (ErrBusy).
//  3. Query(ctx, sql, timeout) answers read-only SQL; Result.Cell gives
//     each value as the text the API sends.
//  4. Bill(ctx, BillRequest{From, To, GroupBy}) prices a period by the
//     log's price sheets; Bill.Export writes it as csv, json or parquet.
//     ExportFocus(ctx, FocusRequest{...}, w) streams the FOCUS dataset.
//  5. ImportGoogleTrace(ctx, dir) loads clusterdata-2011-2 task_events and
//     job_events; Rebuild(ctx, store) re-derives everything from the log.
//  6. WaitPosition(ctx, p) waits until position p is applied, so a client
//     can read its own writes.
//  7. Log() reads the log back out of the events table (a
//     projections.Source), so that a copied file can be replayed without
//     the cell's store (`corral sim --infrastore`).
//
// # Invariants
//
//   - Exactly once: each batch of events is applied, with the last position
//     applied (ingest_state.position), in one DuckDB transaction. After any
//     crash, the file holds positions 1..p exactly once, and ingestion
//     resumes at p+1. Batches are checked to continue the log with no gap.
//   - Rows are appended with DuckDB's appender, never inserted one by one.
//   - Within a source, position orders rows as they happened (the log's
//     order, or the trace files' order); the state at a time is the last
//     row at or before it by position, so equal times are never ambiguous.
//   - Billing quantities are exact decimals computed once per usage window
//     at ingestion; a bill is a plain sum of them, so it reconciles exactly
//     with task_usage and a closed period always exports the same bytes.
//   - Queries cannot write, read files, load extensions or change settings:
//     see Query. The guard reads DuckDB's own parse of the whole statement
//     (json_serialize_sql) before anything is prepared: one SELECT, table
//     functions from an allow-list only (guard.go), an EXPLAIN run as
//     EXPLAIN of the text that was checked; nothing that shows the
//     server's paths or settings (current_setting, DuckDB's views over
//     refused table functions). A result stops at Options.MaxRows rows or
//     Options.MaxResultBytes bytes of values and says which limit cut it;
//     the limits are in the statement DuckDB runs (bounded.go), so no
//     result past them is ever built. With Options.MemoryBudget, a query
//     that grows the process past its high-water mark (85% of it, at
//     least 128 MiB below it) is interrupted (memwatch.go).
//
// # One process holds the file
//
// DuckDB lets one process open a file for writing, so ingestion and
// queries share one database in one process: the Infrastore process
// (`corral infrastore serve`), which the master starts and restarts and
// talks to over a unix socket beside the file (FILE.sock, 0600; the
// corral command's infraProcess places it, so nothing of a cell is
// written outside its data dir, even by a master killed with SIGKILL).
// Ingestion writes in its own transactions
// through one connection at a time (writeMu); each query runs on a fresh
// connection in a READ ONLY transaction, so it sees the last committed
// batch and never blocks ingestion. The master's process never opens the
// file: a query that exhausts the process's memory (its cgroup and
// DuckDB's memory_limit) or will not stop ends that process, not the
// master, and the restarted process resumes ingestion at the stored
// position (exactly once, below).
//   - The ingester never stops on an odd event: an event that names an
//     unknown job or task still gets its rows, with NULLs where nothing is
//     known. Only a log gap or a DuckDB failure stops it.
//   - One fold: the ingester applies every event to a projections.State
//     with projections.Apply, the master's own fold, and reads every fact
//     of the current-state tables (jobs, tasks, machines, allocs) and the
//     task's state, spec, limit and reservation on task_events and
//     task_usage rows from it; it keeps no model of its own. An event the
//     fold skips (an unknown task) changes no current-state row. The fold
//     is recovered from the file: fold_checkpoint (written in a batch's
//     transaction every 200,000 events) and the events after it, read back
//     from the events table; a property test over the projections' golden
//     histories holds every column to the fold at the same position.
//
// # Tables
//
// Every table, view and macro, and each of its columns, is described once,
// in the catalogue (catalog.go). Describe joins it to the file's own
// catalog (names, kinds, DuckDB types) and is what shows the schema:
// `corral sql --describe [TABLE]` and the web console's schema panel
// (through the Query call, with its authorization), and docs/sql.md's
// table reference, generated from it. TestCatalogueMatchesDatabase fails
// when something exists without a description or a description names what
// does not exist; TestSQLReference when docs/sql.md is stale.
//
// Times: events.time and events.recorded_at are TIMESTAMPs (UTC); every
// BIGINT time column is microseconds since the Unix epoch, as in the
// Google trace (make_timestamp(time) converts). Rows from the log have
// source = 'log'; rows of an imported trace have source =
// 'google-clusterdata-2011-2', the trace's units (normalised resources,
// hashed names) and its relative times. task_events, job_events and
// machine_events start with the trace's columns, in its order, with its
// event codes (events.TraceCodeOf).
//
// events.payload is protojson with proto field names; 64-bit integers are
// JSON strings, so cast them: (payload->>'$.spec.resources.cpu_milli')::BIGINT.
// Parenthesise a field read next to another operator: DuckDB's ->> binds
// more loosely than AND, so `type = 'X' AND payload->>'$.f' = 'y'` reads
// ->> of the AND's result (docs/sql.md). No view or macro here does
// (TestNoViewMisreadsArrows looks in DuckDB's parse of each).
//
// cell is not derived from the log: the master's Infrastore records it at
// start (SetCell), so a rebuild keeps it. Every FOCUS export and the costs
// name it, so an export of a copy of the file (corral bill --db) is the
// master's bytes; a request naming another cell is refused. A file that
// records none (older than the table) is named by the request, else
// "corral".
//
// jobs, tasks, machines and allocs are the current state, one row per
// entity the projection holds, each column read from projections.State as
// the master's own fold leaves it after the last event applied (one fold:
// the ingester applies every event with projections.Apply, so SQL and the
// CLI cannot disagree), with the time and position of the last event that
// changed it. A dead job's name used again replaces its row and its
// tasks' rows; a removed machine leaves the table (machine_events keeps
// its history). fold_checkpoint holds the fold's checkpoint for recovery.
//
// # Where ingestion spends its time
//
// Three goroutines work on consecutive batches (catchUp): one reads the log
// and writes each payload's JSON, one folds the events into the
// projection's State (projections.Apply) and builds the rows, and one writes them to DuckDB on the ingester's
// connection. The writer is the one that cannot be split (a transaction is
// one connection) and sets the pace. CPU profile of BenchmarkIngest (a
// million events of internal/history's Large cell, from memory), per event:
//   - the writer, 5.4 µs: DuckDB's appender 3.1 µs, of which 1.5 µs copy
//     strings into DuckDB's vectors (a cgo call per string value) and 0.9
//     µs flush the appended rows (the query appenders' INSERT ... SELECT);
//     the current-state tables' replacement 1.4 µs; commit, position and
//     rollup the rest;
//   - the fold and the rows, 2.0 µs;
//   - the payloads' JSON, 0.7 µs (payload_json.go: it was 2.0 µs through
//     protojson's generic encoder, for the same bytes);
//   - garbage collection, about a tenth of all.
//
// Tried and measured, not kept: rows written as CSV and read by DuckDB's
// own reader in the batch's transaction (2 µs a row for events, slower than
// the appender: DuckDB's parse of the quoted JSON payloads); batches of
// 10,000 or 125,000 events (50,000 is fastest); GOGC at 400 (within noise).
// Arrow record batches instead of the appender (the driver's duckdb_arrow
// build tag; the batch registered as a view and inserted by one INSERT ...
// SELECT per table, the current-state tables by INSERT OR REPLACE without a
// staging table): the writer's inserts took 5.3 µs an event instead of 8.0,
// but building the Arrow columns took 2.5 µs on the builder's goroutine,
// and the whole ran at 93,000 events/s (111,000 with DuckDB on one thread)
// against 101,000 (102,000) for the appender in the same sitting: not worth
// a build tag on every command.
//
// DuckDB's own floor, measured inside it (INSERT ... SELECT of the same
// rows from a temporary table, commit included): events 1.2 µs a row, half
// of it the payload's 128 bytes on average; task_events 1.45 µs a row. About
// 4 µs an event before any Go work, so on two cores 250,000 events/s would
// need one core for DuckDB's copy alone at its floor and the other for all
// of the reading, folding and encoding.
//
// The current-state tables (jobs, tasks, machines, allocs) have primary
// keys, and a batch's new rows replace the old ones by an upsert from a
// staging table (replaceCurrent); the rows of entities the fold dropped are
// deleted by key. They were appended and the older rows deleted by
// a join, which scanned the whole tables every batch: following a log at
// 10,000 events/s on top of a million events, 28 ms of each 50 ms batch,
// and the p99 of the time until a committed event could be queried was a
// second. A bulk catch-up pays about a tenth more for the index upkeep.
//
// # State at a time
//
// The table macros tasks_at(ts), machines_at(ts) and jobs_at(ts) take a
// TIMESTAMP, or a string DuckDB casts to one, and return what was in force
// then: tasks pending or running with their machine and requests, machines
// not removed (up or down), and jobs submitted and not ended with the spec
// version in force. For a trace, pass its microseconds:
// tasks_at(make_timestamp(3600000000)) is an hour in.
//
//	SELECT state, count(*) FROM tasks_at('2026-03-16 12:00:00') GROUP BY ALL;
//	SELECT machine, state FROM machines_at(now()::TIMESTAMP - INTERVAL 1 DAY);
//
// So do allocs_at(ts) (each alloc of the sets then alive, with its machine
// or NULL while pending), quotas_at(ts) (each user's quota per band), prices_at(ts) (the
// price sheet in force, a row per band), pending_reasons_at(ts) (why each
// waiting task waited then) and state_diff(t1, t2) (what changed between
// two times: jobs submitted, ended or re-specified, tasks started, moved,
// pending again or ended, machines added, removed or changed state,
// quotas set; asof.go). A property test holds quotas_at, tasks_at,
// machines_at, allocs_at and prices_at to the projection's fold of the log
// at the same time.
//
// # Bills
//
// Prices come from the log: PriceSheetSet events (the views price_sheets,
// band_prices, machine_prices) and BillingPeriodClosed (the view
// billing_periods_closed). The view priced_usage is the one pricing rule:
// each task_usage window is priced by the sheet in force when it started
// (latest effective time at or before it, the later of two equal ones), on
// its band's basis (limit, reservation or usage for CPU and memory; disk
// as used; GPUs as allocated). A window belongs to the period it starts in.
//
// Bill groups priced_usage by user, job (user/job) or label:KEY (the label
// of the spec version the task ran) and priority band (monitoring,
// production, batch, best-effort; "unknown" for usage of jobs never seen);
// with a Rates table (ParseRates) it prices a what-if instead.
//
// ExportFocus writes the FinOps FOCUS dataset (focus.go; held to the
// FinOps Foundation's FOCUS 1.2 rules by TestFocusRules, the README's
// FOCUS section says which apply): a row per billing
// period, charge hour, task or job, account, band, priority, sheet, charge
// class and meter, each citing the log positions of its windows; idle
// capacity (machines not removed, at the machine prices of the sheet in
// force at each instant, less what the hour's charges priced by that sheet
// took: a sheet that takes effect mid-hour splits the hour into a row per
// sheet, as it splits the windows by their starts) as rows of its own or
// shared by charge. A closed
// month bills only windows recorded at or before its closing position, so
// its export is the same bytes on any store rebuilt from the log; a window
// recorded later is billed as a Correction in the first open month from its
// arrival. An export is computed in slices of hours (about 250,000 rows
// each, a month's corrections first), all in one read-only transaction:
// DuckDB formats the CSV, Go copies it out slice by slice, so memory holds
// a slice, never the month. Parquet is converted from that CSV by a
// private one-thread DuckDB in
// a scratch directory beside the file (PATH.exports, swept of what a killed
// export left when the store opens for writing).
//
// The hourly rollup (rollup.go, table usage_hours): the ingester appends,
// in the batch's transaction, partial sums of the windows recorded since
// the last roll per hour, job, spec, band and priority, rolling once the
// log's time has moved on an hour or a million windows wait, and always up
// to a BillingPeriodClosed before going past it. A bill per job reads the
// partials for the positions they hold and task_usage for the tail after
// them and for the hours a sheet takes effect within (a partial keeps an
// hour whole, those windows are priced by two sheets); late windows are
// read from task_usage too. How the windows were cut into rolls never
// shows: the bill is the same bytes on a store rolled otherwise.
//
// Costs (costs.go) is the showback of a period, the web UI's costs page:
// the FOCUS rows per job grouped by bucket and user, team label or band,
// idle capacity, corrections and the top jobs.
//
// What a month's FOCUS export spends its time on, measured with DuckDB's
// profiler (the README's Performance section has the figures): summing
// every window per hour, which the rollup cuts to its partials; then
// formatting, now most of it: each row's meter-independent columns are
// computed once and its lines (a meter each, returned as a column each)
// share them; times come from a per-hour table; quantities under a
// billion are turned into text through DECIMAL(18,9), seven times faster
// than DuckDB's 128-bit DECIMAL(38,9); lines are joined with concat_ws,
// not ||, which copied the growing line once per column; count(DISTINCT)
// per row was dropped (it cost five times the sums). A slice of 250,000
// rows takes DuckDB about 0.9 s, of which the two formatting projections
// are 1 CPU-second and the grouping and the sort 0.15 s each; reading its
// half gigabyte of lines into Go takes another 0.5 s. What remains: the
// text of the costs (128-bit), the copy of 1.6 GB of lines into Go, and
// DuckDB's driver materializing each result before it is read, so that a
// slice's formatting and its copy into Go do not overlap, and small slices
// lose DuckDB's second thread.
//
// pending_reasons (waits.go): why each task waited, as intervals of the
// reasons and hints the scheduler recorded (PendingReasonsChanged, only on
// change): user, job, task_index, reason, hint, since, until (NULL while it
// still waits), position. "Why was X pending between 13:50 and 14:10" and
// "which reason cost the most pending task-hours" are queries of it.
//
// preemption_losses: per preempted task, the priced usage of the run the
// eviction ended, and who preempted it.
package infrastore
