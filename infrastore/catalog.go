package infrastore

// The catalogue: what every table, view and macro of the schema is for and
// what each of its columns means, written once here. Describe joins it to
// the database's own catalog (the names and DuckDB types that exist), and
// everything that shows the schema reads Describe: `corral sql
// --describe`, the web console's schema panel and docs/sql.md's table
// reference (generated). TestCatalogueMatchesDatabase fails when a table,
// view, macro or column exists without a description here, or is
// described here and does not exist.
//
// A column's description is looked up in its own entry, then in the
// entries its table is "like" (views and macros that return another
// table's columns), then in commonColumns (names that mean the same
// wherever they appear).

// Kinds of the schema's objects.
const (
	KindTable      = "table"
	KindView       = "view"
	KindTableMacro = "table macro"
	KindMacro      = "macro"
)

// tableDoc describes one table, view or macro.
type tableDoc struct {
	name    string
	kind    string
	params  []string // a macro's parameters, in order
	summary string   // one line
	like    []string // entries whose same-named columns mean the same here
	columns []columnDoc
}

type columnDoc struct{ name, desc string }

// commonColumns mean the same in every table that has them, unless the
// table's own entry says otherwise.
var commonColumns = map[string]string{
	"user":             "the job's owner; a job is (user, job)",
	"job":              "the job's name, unique per user while it lives (the trace's job ID in an imported trace)",
	"task_index":       "the task's index within its job, from 0",
	"source":           "where the row comes from: 'log' (this cell's event log) or 'google-clusterdata-2011-2' (an imported trace, in its units: normalised resources, hashed names, relative times)",
	"priority":         "the job's priority (0-11 on the log, Borg's bands: 0-1 best-effort, 2-8 batch, 9-10 production, 11 monitoring)",
	"band":             "the priority band: monitoring, production, batch or best-effort",
	"spec_version":     "the job spec version in force (1 at submission, +1 per update)",
	"scheduling_class": "latency sensitivity, 0 (least) to 3 (most), as in the trace",
	"machine":          "the machine's name (NULL while not placed)",
	"cpu_milli":        "CPU in thousandths of a core",
	"memory_bytes":     "memory in bytes",
	"disk_bytes":       "disk space in bytes",
	"gpu_milli":        "GPUs in thousandths of a GPU",
	"ports":            "host ports",
	"labels":           "the job's labels",
	"actor":            "who did it: the authenticated user, or the component (scheduler, agent link) for events of its own",
}

// catalogue lists every table, view and macro the schema creates.
var catalogue = []tableDoc{
	{name: "ingest_state", kind: KindTable, summary: "where ingestion stands: one row, written in the same transaction as the rows it accounts for", columns: []columnDoc{
		{"schema_version", "the schema version the file was written by; another version needs `corral infrastore rebuild`"},
		{"position", "the last log position applied: positions 1..position are in the file exactly once"},
	}},
	{name: "cell", kind: KindTable, summary: "the cell's name (one row), recorded by the master, named by every bill; not derived from the log, so a rebuild keeps it", columns: []columnDoc{
		{"name", "the cell's name, a DNS label"},
	}},
	{name: "events", kind: KindTable, summary: "the event log itself, one row per log position", columns: []columnDoc{
		{"position", "the event's position in the log: gap-free, from 1"},
		{"time", "when it occurred (UTC); the only TIMESTAMP time of the trace-shaped tables, the rest are microseconds"},
		{"recorded_at", "when the master appended it (UTC)"},
		{"type", "the event type, e.g. JobSubmitted, TaskScheduled, TaskEvicted"},
		{"schema_version", "the version of the event type's payload"},
		{"stream", "the entity the event belongs to, e.g. job/alice/web, machine/m1"},
		{"stream_version", "the event's number within its stream"},
		{"causation_id", "the id of the command or event that caused it"},
		{"correlation_id", "the id shared by everything one request caused"},
		{"idempotency_key", "the client's key that makes a retried request apply once"},
		{"payload", "the event as JSON (protojson, proto field names): a field at its zero value is absent, 64-bit integers are strings; parenthesise a read next to an operator, (payload->>'$.reason') = 'x'"},
	}},
	{name: "job_specs", kind: KindTable, summary: "every spec version of every job, so a task's limits come from the version it runs", columns: []columnDoc{
		{"position", "the log position of the event that set this version (JobSubmitted or an update)"},
		{"time", "when it was set, in microseconds since the Unix epoch"},
		{"task_count", "how many tasks the version asks for"},
		{"cpu_milli", "each task's CPU limit, in thousandths of a core"},
		{"memory_bytes", "each task's memory limit in bytes"},
		{"disk_bytes", "each task's disk limit in bytes"},
		{"ports", "host ports each task asks for"},
		{"gpu_milli", "each task's GPUs, in thousandths of a GPU"},
		{"appclass", "the application class: latency-sensitive or batch (empty: from the band)"},
		{"command", "the command each task runs"},
		{"spec", "the whole spec as JSON (protojson)"},
	}},
	{name: "jobs", kind: KindTable, summary: "the current state of every job, one row per (user, job)", like: []string{"job_specs"}, columns: []columnDoc{
		{"status", "running, killed or finished"},
		{"submit_time", "when it was submitted, in microseconds since the Unix epoch"},
		{"end_time", "when it was killed or finished (NULL while running)"},
		{"end_reason", "why it ended, as its kill or last event says (NULL while running)"},
		{"submit_position", "the position of its JobSubmitted: a name can be used again after a job ends"},
		{"time", "the time of the last event that changed it, in microseconds"},
		{"position", "the position of the last event that changed it"},
	}},
	{name: "tasks", kind: KindTable, summary: "the current state of every task, one row per (user, job, task_index)", columns: []columnDoc{
		{"state", "pending, running, or how it ended: finished, failed, killed, evicted, lost"},
		{"cpu_limit_milli", "its CPU limit (the spec version it runs, with its index's override), thousandths of a core"},
		{"memory_limit_bytes", "its memory limit in bytes"},
		{"disk_limit_bytes", "its disk limit in bytes"},
		{"cpu_reservation_milli", "the CPU reserved for it: the master's last estimate since it was placed or its spec changed, else the limit"},
		{"memory_reservation_bytes", "the memory reserved for it, as cpu_reservation_milli"},
		{"disk_reservation_bytes", "the disk reserved for it, as cpu_reservation_milli"},
		{"reservation_estimated", "whether the reservation differs from the limit (the master's estimate moved it)"},
		{"restarts", "restarts in place plus reschedules after a failure of its own, across reschedules (the projection's count, as corral task get says)"},
		{"pid", "its process id on the machine, at its last start"},
		{"event_type", "the trace code of its last event (0 SUBMIT ... 8 UPDATE_RUNNING)"},
		{"submit_time", "when it was last submitted or made pending, in microseconds"},
		{"start_time", "when it last started running, in microseconds"},
		{"health", "healthy or unhealthy, as its check last said in this run (NULL: not checked yet, or no check)"},
		{"health_message", "the failing check's error ('' when healthy)"},
		{"healthy_since", "when it last turned healthy in this run, in microseconds (NULL: not in this run)"},
		{"time", "the time of the last event that changed it, in microseconds"},
		{"position", "the position of the last event that changed it"},
	}},
	{name: "machines", kind: KindTable, summary: "the current state of every machine, one row per machine", columns: []columnDoc{
		{"machine", "the machine's name"},
		{"address", "the agent's address"},
		{"cpu_milli", "CPU capacity, in thousandths of a core"},
		{"memory_bytes", "memory capacity in bytes"},
		{"disk_bytes", "disk capacity in bytes"},
		{"ports", "host ports it offers"},
		{"gpu_milli", "GPU capacity, in thousandths of a GPU"},
		{"attributes", "its attributes (failure domain, platform...), matched by job constraints"},
		{"state", "up or down (a removed machine leaves the table; machine_events keeps its history)"},
		{"draining", "whether it is being drained: nothing new is placed on it"},
		{"reason", "why it is down or draining"},
		{"time", "the time of the last event that changed it, in microseconds"},
		{"position", "the position of the last event that changed it"},
	}},
	{name: "allocs", kind: KindTable, summary: "the current state of every alloc of the alloc sets alive, one row per (user, name, alloc_index)", columns: []columnDoc{
		{"name", "the alloc set's name"},
		{"alloc_index", "the alloc's index within its set, from 0"},
		{"machine", "where it is placed (NULL while pending)"},
		{"priority", "the alloc set's priority"},
		{"cpu_milli", "each alloc's CPU, in thousandths of a core"},
		{"memory_bytes", "each alloc's memory in bytes"},
		{"disk_bytes", "each alloc's disk in bytes"},
		{"gpu_milli", "each alloc's GPUs, in thousandths of a GPU"},
		{"ports", "host ports each alloc holds"},
		{"used_cpu_milli", "what the limits of the tasks inside use of its CPU"},
		{"used_memory_bytes", "what the limits of the tasks inside use of its memory"},
		{"used_disk_bytes", "what the limits of the tasks inside use of its disk"},
		{"used_gpu_milli", "what the limits of the tasks inside use of its GPUs"},
		{"time", "the time of the last event that changed it, in microseconds"},
		{"position", "the position of the last event that changed it"},
	}},
	{name: "fold_checkpoint", kind: KindTable, summary: "the ingester's fold of the log (the projection's checkpoint encoding) at a position, one row, so a restart replays only the events after it", columns: []columnDoc{
		{"position", "the log position the fold was taken at"},
		{"state", "the projection's checkpoint encoding"},
	}},
	{name: "task_events", kind: KindTable, summary: "one row per task event, the Google trace's task_events columns first, with the task's state after the event", columns: []columnDoc{
		{"time", "when, in microseconds since the Unix epoch (the trace's own relative microseconds for an imported trace)"},
		{"missing_info", "the trace's missing-info flag (NULL on the log)"},
		{"machine", "the machine it is on or was on (NULL while pending)"},
		{"event_type", "the trace code: 0 SUBMIT, 1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH, 5 KILL, 6 LOST, 7 UPDATE_PENDING, 8 UPDATE_RUNNING"},
		{"cpu_request", "the CPU limit in force, in cores (the spec version it runs, with its index's override)"},
		{"memory_request", "the memory limit in force, in bytes"},
		{"disk_request", "the disk limit in force, in bytes"},
		{"different_machines_restriction", "whether its job's tasks must run on distinct machines"},
		{"position", "the log position of the event (the row's order within an imported trace)"},
		{"type", "the corral event type, e.g. TaskScheduled"},
		{"state", "its state after the event: pending, running, evicted, failed, finished, killed or lost (a FAIL the agent restarts in place leaves it running)"},
		{"reason", "why, as the event says (evictions, kills, failures)"},
		{"exit_code", "the process's exit code, for an exit"},
		{"message", "the event's message, e.g. the agent's words on a failure"},
	}},
	{name: "job_events", kind: KindTable, summary: "one row per job event, the Google trace's job_events columns first", columns: []columnDoc{
		{"time", "when, in microseconds since the Unix epoch"},
		{"missing_info", "the trace's missing-info flag (NULL on the log)"},
		{"event_type", "the trace code: 0 SUBMIT, 5 KILL, 4 FINISH, 7 UPDATE_PENDING"},
		{"job_name", "the job's name (hashed in the trace)"},
		{"logical_job_name", "the trace's logical job name (the job's name on the log)"},
		{"position", "the log position of the event"},
		{"type", "the corral event type, e.g. JobSubmitted"},
		{"task_count", "how many tasks the spec in force asks for"},
		{"reason", "why, as the event says (a kill's reason)"},
	}},
	{name: "machine_events", kind: KindTable, summary: "one row per machine event, the Google trace's machine_events columns first, with the machine's whole state after it", like: []string{"machines"}, columns: []columnDoc{
		{"time", "when, in microseconds since the Unix epoch"},
		{"event_type", "the trace code: 0 ADD (registered, up), 1 REMOVE (down, removed), 2 UPDATE (changed, drain set)"},
		{"platform_id", "the trace's platform id (NULL on the log)"},
		{"cpus", "CPU capacity in cores"},
		{"memory", "memory capacity in bytes"},
		{"position", "the log position of the event"},
		{"type", "the corral event type, e.g. MachineRegistered"},
		{"reason", "why, as the event says (a machine marked down)"},
	}},
	{name: "task_usage", kind: KindTable, summary: "one row per task per usage window the agent measured, with the limits, reservation and billing quantities in force", columns: []columnDoc{
		{"start_time", "the start of the task's own interval in its machine's usage window (the part its run held resources in; the whole window in logs older than per-task intervals), in microseconds since the Unix epoch"},
		{"end_time", "the end of the task's own interval, in microseconds: a machine's windows tile its time, and a task's intervals never overlap"},
		{"position", "the log position of the usage report"},
		{"spec_position", "the job_specs row in force (its position)"},
		{"cpu_core_seconds", "CPU used in the window, core-seconds"},
		{"memory_mean_bytes", "mean memory used in the window"},
		{"memory_max_bytes", "peak memory used in the window"},
		{"disk_bytes", "disk space used at the window's end"},
		{"memory_byte_seconds", "memory used times time, byte-seconds (exact)"},
		{"cpu_limit_milli", "the CPU limit in force (the spec version it runs, with its index's override)"},
		{"memory_limit_bytes", "the memory limit in force"},
		{"disk_limit_bytes", "the disk limit in force"},
		{"cpu_reservation_milli", "the CPU reservation in force: the master's last estimate since the task was placed or its spec changed, else the limit"},
		{"memory_reservation_bytes", "the memory reservation in force"},
		{"disk_reservation_bytes", "the disk reservation in force"},
		{"cpu_limit_core_hours", "CPU on the limit over the window, core-hours (rounded half up to 1e-9 once)"},
		{"cpu_reservation_core_hours", "CPU on the reservation, core-hours"},
		{"cpu_usage_core_hours", "CPU used, core-hours"},
		{"memory_limit_gib_hours", "memory on the limit, GiB-hours"},
		{"memory_reservation_gib_hours", "memory on the reservation, GiB-hours"},
		{"memory_usage_gib_hours", "memory used (mean), GiB-hours"},
		{"disk_usage_gib_hours", "disk used, GiB-hours"},
		{"gpu_limit_milli", "GPUs allocated, thousandths of a GPU"},
		{"gpu_limit_hours", "GPU-hours allocated: GPUs are charged as allocated, agents do not measure them"},
	}},
	{name: "scheduling_decisions", kind: KindTable, summary: "one row per placement the scheduler made (TaskScheduled)", columns: []columnDoc{
		{"time", "when, in microseconds since the Unix epoch"},
		{"position", "the log position of the TaskScheduled"},
		{"machine", "the machine chosen"},
		{"spec_version", "the spec version placed"},
		{"score", "the chosen machine's score"},
		{"machines_examined", "how many machines the pass examined for it"},
		{"preemptions", "how many tasks it preempted"},
		{"preempted", "user/job/index of each task it preempted"},
		{"alloc_index", "the alloc it was placed into, if any"},
		{"machine_version", "the machine's version the placement was decided against"},
	}},
	{name: "usage_hours", kind: KindTable, summary: "the hourly rollup: partial sums of task_usage's billing quantities per hour, job, spec, band and priority, appended as the log goes", columns: []columnDoc{
		{"hour", "the windows' start, down to the hour, in microseconds"},
		{"spec_position", "the job_specs row in force (its position)"},
		{"band", "the priority band ('unknown' for usage of jobs never seen)"},
		{"cpu_limit", "sum of cpu_limit_core_hours"},
		{"cpu_reservation", "sum of cpu_reservation_core_hours"},
		{"cpu_usage", "sum of cpu_usage_core_hours"},
		{"memory_limit", "sum of memory_limit_gib_hours"},
		{"memory_reservation", "sum of memory_reservation_gib_hours"},
		{"memory_usage", "sum of memory_usage_gib_hours"},
		{"disk_usage", "sum of disk_usage_gib_hours"},
		{"gpu_limit", "sum of gpu_limit_hours"},
		{"pfirst", "the position of the first window summed"},
		{"plast", "the position of the last window summed"},
		{"windows", "how many windows were summed"},
	}},
	{name: "price_sheets", kind: KindView, summary: "every price sheet set (PriceSheetSet), with the span it is in force", columns: []columnDoc{
		{"position", "the log position of the PriceSheetSet"},
		{"set_at", "when it was set"},
		{"effective_time", "when it takes effect, in microseconds"},
		{"valid_to", "when the next sheet takes effect, in microseconds (the largest BIGINT for the last)"},
		{"currency", "the currency of its prices, e.g. USD"},
		{"note", "the note it was set with"},
		{"sheet", "the whole sheet as JSON"},
	}},
	{name: "band_prices", kind: KindView, summary: "each sheet's prices per priority band", columns: []columnDoc{
		{"sheet_position", "the sheet's position (price_sheets.position)"},
		{"currency", "the sheet's currency"},
		{"valid_from", "when the sheet takes effect, in microseconds"},
		{"valid_to", "when the next sheet takes effect, in microseconds"},
		{"band", "the priority band priced (or 'unknown')"},
		{"basis", "what CPU and memory are billed on: limit, reservation or usage"},
		{"cpu_core_hour", "price of a CPU core-hour"},
		{"memory_gib_hour", "price of a GiB-hour of memory"},
		{"disk_gib_hour", "price of a GiB-hour of disk"},
		{"gpu_hour", "price of a GPU-hour"},
	}},
	{name: "machine_prices", kind: KindView, summary: "each sheet's prices of machine capacity, which price idle capacity", like: []string{"band_prices"}, columns: []columnDoc{
		{"cpu_core_hour", "price of a machine's CPU core-hour"},
		{"memory_gib_hour", "price of a machine's GiB-hour of memory"},
		{"disk_gib_hour", "price of a machine's GiB-hour of disk"},
		{"gpu_hour", "price of a machine's GPU-hour"},
	}},
	{name: "billing_periods_closed", kind: KindView, summary: "every billing period closed (BillingPeriodClosed): its export is fixed from then on", columns: []columnDoc{
		{"period_start", "the period's start, in microseconds"},
		{"period_end", "the period's end, in microseconds"},
		{"closed_at", "the log position of the close: windows recorded after it are corrections of a later month"},
		{"closed_time", "when it was closed"},
	}},
	{name: "priced_usage", kind: KindView, summary: "task_usage of the log priced by the sheet in force at each window's start, on its band's basis: the one pricing rule of every bill", like: []string{"task_usage"}, columns: []columnDoc{
		{"billed_band", "the band billed: band, or 'unknown' for usage of jobs never seen"},
		{"basis", "the basis of the band's price: limit, reservation or usage ('none' where no sheet prices it)"},
		{"sheet_position", "the sheet that prices the window (NULL: none)"},
		{"cpu_core_hours", "CPU core-hours billed, on the basis"},
		{"memory_gib_hours", "memory GiB-hours billed, on the basis"},
		{"disk_gib_hours", "disk GiB-hours billed (as used)"},
		{"gpu_hours", "GPU-hours billed (as allocated)"},
		{"cpu_price", "the price of a CPU core-hour (0 where none)"},
		{"memory_price", "the price of a memory GiB-hour"},
		{"disk_price", "the price of a disk GiB-hour"},
		{"gpu_price", "the price of a GPU-hour"},
	}},
	{name: "preemption_losses", kind: KindView, summary: "per preempted task, the priced usage of the run the eviction ended, and who preempted it", columns: []columnDoc{
		{"evicted_at", "the log position of the TaskEvicted"},
		{"evicted_time", "when it was evicted"},
		{"machine", "the machine it was evicted from"},
		{"preemptor_user", "the owner of the task that preempted it"},
		{"preemptor_job", "the job of the task that preempted it"},
		{"preemptor_index", "the index of the task that preempted it"},
		{"run_start_position", "the position of the placement that started the lost run"},
		{"windows", "how many usage windows the run had"},
		{"cpu_core_hours_used", "CPU the run used, core-hours"},
		{"memory_gib_hours_used", "memory the run used, GiB-hours"},
		{"cost_lost", "what the run's usage was billed: the work lost"},
	}},
	{name: "pending_reasons", kind: KindView, summary: "why each task waited, as intervals of the reasons and hints the scheduler recorded", columns: []columnDoc{
		{"reason", "why it could not be placed, e.g. no machine has enough memory"},
		{"hint", "what would help ('' when the scheduler had none)"},
		{"since", "when the scheduler recorded the reason"},
		{"until", "the next record for the task or the end of its wait, whichever came first (NULL while it still waits for this reason)"},
		{"position", "the log position of the PendingReasonsChanged"},
	}},
	{name: "tasks_at", kind: KindTableMacro, params: []string{"ts"}, summary: "tasks pending or running at ts (a TIMESTAMP, or a string DuckDB casts to one): each one's last task_events row at or before it", like: []string{"task_events"}},
	{name: "machines_at", kind: KindTableMacro, params: []string{"ts"}, summary: "machines not removed (up or down) at ts: each one's last machine_events row at or before it", like: []string{"machine_events"}},
	{name: "jobs_at", kind: KindTableMacro, params: []string{"ts"}, summary: "jobs submitted and not ended at ts, with the spec version in force then", like: []string{"job_events", "job_specs"}, columns: []columnDoc{
		{"event_type", "the trace code of its last job event at or before ts"},
		{"time", "the time of its last job event at or before ts, in microseconds"},
		{"submit_time", "when it was submitted, in microseconds"},
	}},
	{name: "quotas_at", kind: KindTableMacro, params: []string{"ts"}, summary: "each user's quota per band at ts (the last QuotaSet; a quota set to nothing is absent)", columns: []columnDoc{
		{"band", "the priority band the quota is for"},
		{"cpu_milli", "CPU quota, in thousandths of a core"},
		{"memory_bytes", "memory quota in bytes"},
		{"disk_bytes", "disk quota in bytes"},
		{"gpu_milli", "GPU quota, in thousandths of a GPU"},
		{"ports", "host ports quota"},
		{"time", "when the quota was set"},
	}},
	{name: "prices_at", kind: KindTableMacro, params: []string{"ts"}, summary: "the price sheet in force at ts, a row per band", like: []string{"band_prices"}, columns: []columnDoc{
		{"effective", "when the sheet took effect"},
	}},
	{name: "allocs_at", kind: KindTableMacro, params: []string{"ts"}, summary: "each alloc of the alloc sets alive at ts, with its machine (NULL while pending)", columns: []columnDoc{
		{"name", "the alloc set's name"},
		{"alloc_index", "the alloc's index within its set, from 0"},
		{"priority", "the alloc set's priority"},
		{"cpu_milli", "each alloc's CPU, in thousandths of a core"},
		{"memory_bytes", "each alloc's memory in bytes"},
	}},
	{name: "pending_reasons_at", kind: KindTableMacro, params: []string{"ts"}, summary: "why each task waiting at ts waited then (pending_reasons at an instant)", like: []string{"pending_reasons"}},
	{name: "state_diff", kind: KindTableMacro, params: []string{"t1", "t2"}, summary: "what changed between t1 and t2: jobs submitted, ended or re-specified, tasks started, moved, pending again or ended, machines added, removed or changed state, quotas set", columns: []columnDoc{
		{"kind", "job, task, machine or quota"},
		{"name", "user/job, user/job/index, the machine, or user/band"},
		{"change", "what changed, e.g. submitted, started, moved, added, now down, set"},
		{"before", "its state at t1 (NULL: absent)"},
		{"after", "its state at t2 (NULL: absent)"},
	}},
	{name: "billed_quantity", kind: KindMacro, params: []string{"basis", "limit_q", "reservation_q", "usage_q"}, summary: "the quantity a basis bills: reservation_q for 'reservation', usage_q for 'usage', else limit_q"},
}
