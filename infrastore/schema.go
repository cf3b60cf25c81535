package infrastore

// The schema, one statement per table. catalog.go describes every table
// and column for users (a test holds it to the database); the comments
// here say why a column is the way it is. A change to
// any table or macro bumps schemaVersion: the ingester then refuses to run
// until a Rebuild re-derives everything from the log.

// schemaVersion is stored in ingest_state.
const schemaVersion = 6

// Sources of rows in the trace-shaped tables.
const (
	// SourceLog marks rows derived from the cell's own event log.
	SourceLog = "log"
	// GoogleTraceSource marks rows loaded by ImportGoogleTrace.
	GoogleTraceSource = "google-clusterdata-2011-2"
)

// ingest_state is one row: the last log position applied, written in the
// same transaction as that position's rows (exactly once).
const ddlIngestState = `CREATE TABLE IF NOT EXISTS ingest_state (
	schema_version INTEGER NOT NULL,
	position       BIGINT  NOT NULL
)`

// events is the log itself, one row per position. No primary key: the
// position check of every batch keeps it unique, and an index would slow
// every append.
const ddlEvents = `CREATE TABLE IF NOT EXISTS events (
	position        BIGINT    NOT NULL,
	time            TIMESTAMP NOT NULL, -- occurred_at, UTC
	recorded_at     TIMESTAMP,
	type            VARCHAR   NOT NULL,
	schema_version  INTEGER,
	stream          VARCHAR   NOT NULL,
	stream_version  BIGINT,
	actor           VARCHAR,
	causation_id    VARCHAR,
	correlation_id  VARCHAR,
	idempotency_key VARCHAR,
	payload         JSON              -- protojson, proto field names
)`

// job_specs keeps every spec version: tasks may run an older version during
// a rolling update, and their limits come from the version they run.
const ddlJobSpecs = `CREATE TABLE IF NOT EXISTS job_specs (
	position         BIGINT  NOT NULL,
	time             BIGINT  NOT NULL,
	user             VARCHAR NOT NULL,
	job              VARCHAR NOT NULL,
	spec_version     BIGINT  NOT NULL,
	priority         INTEGER,
	band             VARCHAR,
	scheduling_class INTEGER,
	task_count       INTEGER,
	cpu_milli        BIGINT,
	memory_bytes     BIGINT,
	disk_bytes       BIGINT,
	ports            INTEGER,
	gpu_milli        BIGINT,
	labels           MAP(VARCHAR, VARCHAR),
	appclass         VARCHAR,
	command          VARCHAR,
	spec             JSON
)`

// jobs, tasks, machines and allocs hold the current state, one row per
// entity the projection's fold holds (model.go): each batch upserts the
// rows of the entities it touched by key and deletes those the fold no
// longer holds (replaceCurrent), set-based, never a statement per row.
// Columns of the log's events only (submit_position, event_type,
// submit_time) are NULL in a batch that did not change them, and the
// upsert keeps the stored value (currentTables).
const ddlJobs = `CREATE TABLE IF NOT EXISTS jobs (
	user             VARCHAR NOT NULL,
	job              VARCHAR NOT NULL,
	spec_version     BIGINT,
	priority         INTEGER,
	band             VARCHAR,
	scheduling_class INTEGER,
	task_count       INTEGER,
	cpu_milli        BIGINT,
	memory_bytes     BIGINT,
	disk_bytes       BIGINT,
	labels           MAP(VARCHAR, VARCHAR),
	status           VARCHAR, -- running, killed, finished
	submit_time      BIGINT,
	end_time         BIGINT,
	submit_position  BIGINT, -- the JobSubmitted of this job (a name can be used again)
	end_reason       VARCHAR,
	time             BIGINT,
	position         BIGINT NOT NULL,
	PRIMARY KEY (user, job) -- a batch replaces its jobs' rows by key (replaceCurrent)
)`

const ddlTasks = `CREATE TABLE IF NOT EXISTS tasks (
	user                     VARCHAR NOT NULL,
	job                      VARCHAR NOT NULL,
	task_index               INTEGER NOT NULL,
	state                    VARCHAR,
	machine                  VARCHAR,
	spec_version             BIGINT,
	priority                 INTEGER,
	band                     VARCHAR,
	cpu_limit_milli          BIGINT,
	memory_limit_bytes       BIGINT,
	disk_limit_bytes         BIGINT,
	cpu_reservation_milli    BIGINT,
	memory_reservation_bytes BIGINT,
	disk_reservation_bytes   BIGINT,
	reservation_estimated    BOOLEAN, -- false: the reservation is the limit
	restarts                 INTEGER, -- the fold's: in place and across reschedules
	pid                      BIGINT,
	event_type               INTEGER, -- the last trace code
	submit_time              BIGINT,
	start_time               BIGINT,
	health                   VARCHAR, -- healthy, unhealthy; NULL: not checked in this run
	health_message           VARCHAR,
	healthy_since            BIGINT,
	time                     BIGINT,
	position                 BIGINT NOT NULL,
	PRIMARY KEY (user, job, task_index)
)`

const ddlMachines = `CREATE TABLE IF NOT EXISTS machines (
	machine      VARCHAR NOT NULL,
	address      VARCHAR,
	cpu_milli    BIGINT,
	memory_bytes BIGINT,
	disk_bytes   BIGINT,
	ports        INTEGER,
	gpu_milli    BIGINT,
	attributes   MAP(VARCHAR, VARCHAR),
	state        VARCHAR, -- up, down (a removed machine leaves the table)
	draining     BOOLEAN,
	reason       VARCHAR,
	time         BIGINT,
	position     BIGINT NOT NULL,
	PRIMARY KEY (machine)
)`

// allocs: every alloc of the alloc sets alive, its machine (NULL while
// pending), its set's resources and what its tasks' limits use of them.
const ddlAllocs = `CREATE TABLE IF NOT EXISTS allocs (
	user              VARCHAR NOT NULL,
	name              VARCHAR NOT NULL,
	alloc_index       INTEGER NOT NULL,
	machine           VARCHAR,
	priority          INTEGER,
	band              VARCHAR,
	cpu_milli         BIGINT,
	memory_bytes      BIGINT,
	disk_bytes        BIGINT,
	gpu_milli         BIGINT,
	ports             INTEGER,
	used_cpu_milli    BIGINT,
	used_memory_bytes BIGINT,
	used_disk_bytes   BIGINT,
	used_gpu_milli    BIGINT,
	time              BIGINT,
	position          BIGINT NOT NULL,
	PRIMARY KEY (user, name, alloc_index)
)`

// fold_checkpoint is one row: the projection's checkpoint encoding of the
// ingester's fold at a position at or before ingest_state's, written in a
// batch's transaction, so that a restart replays only the events after it
// from the events table (model_load.go).
const ddlFoldCheckpoint = `CREATE TABLE IF NOT EXISTS fold_checkpoint (
	position BIGINT NOT NULL,
	state    BLOB   NOT NULL
)`

// task_events starts with the thirteen columns of the Google trace's
// task_events, in its order, so that tools written for the trace work. Every
// row also carries the task's state after the event and the resources in
// force, so that tasks_at needs only the last row of each task.
const ddlTaskEvents = `CREATE TABLE IF NOT EXISTS task_events (
	time                           BIGINT  NOT NULL,
	missing_info                   INTEGER,
	job                            VARCHAR NOT NULL,
	task_index                     INTEGER NOT NULL,
	machine                        VARCHAR,
	event_type                     INTEGER NOT NULL,
	user                           VARCHAR,
	scheduling_class               INTEGER,
	priority                       INTEGER,
	cpu_request                    DOUBLE,
	memory_request                 DOUBLE,
	disk_request                   DOUBLE,
	different_machines_restriction BOOLEAN,
	source                         VARCHAR NOT NULL,
	position                       BIGINT  NOT NULL,
	type                           VARCHAR,
	state                          VARCHAR,
	spec_version                   BIGINT,
	reason                         VARCHAR,
	exit_code                      INTEGER,
	message                        VARCHAR
)`

// job_events starts with the eight columns of the trace's job_events.
const ddlJobEvents = `CREATE TABLE IF NOT EXISTS job_events (
	time             BIGINT  NOT NULL,
	missing_info     INTEGER,
	job              VARCHAR NOT NULL,
	event_type       INTEGER NOT NULL,
	user             VARCHAR,
	scheduling_class INTEGER,
	job_name         VARCHAR,
	logical_job_name VARCHAR,
	source           VARCHAR NOT NULL,
	position         BIGINT  NOT NULL,
	type             VARCHAR,
	spec_version     BIGINT,
	priority         INTEGER,
	task_count       INTEGER,
	reason           VARCHAR
)`

// machine_events starts with the six columns of the trace's machine_events
// (event_type 0 ADD, 1 REMOVE, 2 UPDATE) and carries the machine's whole
// state after the event.
const ddlMachineEvents = `CREATE TABLE IF NOT EXISTS machine_events (
	time         BIGINT  NOT NULL,
	machine      VARCHAR NOT NULL,
	event_type   INTEGER NOT NULL,
	platform_id  VARCHAR,
	cpus         DOUBLE,
	memory       DOUBLE,
	source       VARCHAR NOT NULL,
	position     BIGINT  NOT NULL,
	type         VARCHAR,
	address      VARCHAR,
	cpu_milli    BIGINT,
	memory_bytes BIGINT,
	disk_bytes   BIGINT,
	ports        INTEGER,
	gpu_milli    BIGINT,
	attributes   MAP(VARCHAR, VARCHAR),
	state        VARCHAR,
	draining     BOOLEAN,
	reason       VARCHAR
)`

// task_usage is one row per task per usage window. The *_hours columns are
// exact decimals computed once at ingestion (rounded half up to 1e-9), so a
// bill is a plain sum and reconciles exactly with this table.
const ddlTaskUsage = `CREATE TABLE IF NOT EXISTS task_usage (
	start_time                   BIGINT  NOT NULL,
	end_time                     BIGINT  NOT NULL,
	job                          VARCHAR NOT NULL,
	task_index                   INTEGER NOT NULL,
	machine                      VARCHAR,
	user                         VARCHAR,
	source                       VARCHAR NOT NULL,
	position                     BIGINT  NOT NULL,
	spec_version                 BIGINT,
	spec_position                BIGINT, -- the job_specs row in force
	priority                     INTEGER,
	band                         VARCHAR,
	cpu_core_seconds             DOUBLE,
	memory_mean_bytes            BIGINT,
	memory_max_bytes             BIGINT,
	disk_bytes                   BIGINT,
	memory_byte_seconds          DECIMAL(38,6),
	cpu_limit_milli              BIGINT,
	memory_limit_bytes           BIGINT,
	disk_limit_bytes             BIGINT,
	cpu_reservation_milli        BIGINT,
	memory_reservation_bytes     BIGINT,
	disk_reservation_bytes       BIGINT,
	cpu_limit_core_hours         DECIMAL(18,9),
	cpu_reservation_core_hours   DECIMAL(18,9),
	cpu_usage_core_hours         DECIMAL(18,9),
	memory_limit_gib_hours       DECIMAL(18,9),
	memory_reservation_gib_hours DECIMAL(18,9),
	memory_usage_gib_hours       DECIMAL(18,9),
	disk_usage_gib_hours         DECIMAL(18,9),
	gpu_limit_milli              BIGINT,
	gpu_limit_hours              DECIMAL(18,9) -- GPUs are charged as allocated: agents do not measure them
)`

const ddlSchedulingDecisions = `CREATE TABLE IF NOT EXISTS scheduling_decisions (
	time              BIGINT  NOT NULL,
	position          BIGINT  NOT NULL,
	user              VARCHAR,
	job               VARCHAR,
	task_index        INTEGER,
	machine           VARCHAR,
	spec_version      BIGINT,
	score             DOUBLE,
	machines_examined INTEGER,
	preemptions       INTEGER,
	preempted         VARCHAR[], -- user/job/index of each preempted task
	alloc_index       INTEGER,
	machine_version   BIGINT
)`

// The state-at-time macros take a TIMESTAMP (or a string DuckDB casts to
// one). Within a source, position is the true order of rows (the log order,
// or the order of the trace files), so "the last row at ts" is the one with
// the greatest position among rows with time <= ts: ties in time are fine.
// arg_max over the whole row keeps it to one aggregate per group.
const ddlMacros = `
CREATE OR REPLACE MACRO tasks_at(ts) AS TABLE
SELECT unnest(r) FROM (
	SELECT arg_max(task_events, position) AS r
	FROM task_events
	WHERE time <= epoch_us(CAST(ts AS TIMESTAMP))
	GROUP BY source, user, job, task_index
) WHERE r.state IN ('pending', 'running');

CREATE OR REPLACE MACRO machines_at(ts) AS TABLE
SELECT unnest(r) FROM (
	SELECT arg_max(machine_events, position) AS r
	FROM machine_events
	WHERE time <= epoch_us(CAST(ts AS TIMESTAMP))
	GROUP BY source, machine
) WHERE coalesce(r.state <> 'removed', r.event_type <> 1);

CREATE OR REPLACE MACRO jobs_at(ts) AS TABLE
WITH e AS (
	SELECT source, user, job,
		arg_max(event_type, position) AS event_type,
		max(time) AS time,
		max(time) FILTER (WHERE event_type = 0) AS submit_time, -- the last: a name can be used again
		arg_max(scheduling_class, position) AS scheduling_class,
		arg_max(job_name, position) AS job_name,
		arg_max(logical_job_name, position) AS logical_job_name
	FROM job_events
	WHERE time <= epoch_us(CAST(ts AS TIMESTAMP))
	GROUP BY source, user, job
), s AS (
	SELECT user, job, max(position) AS position
	FROM job_specs
	WHERE time <= epoch_us(CAST(ts AS TIMESTAMP))
	GROUP BY user, job
)
SELECT e.source, e.user, e.job, e.event_type, e.time, e.submit_time,
	e.scheduling_class, e.job_name, e.logical_job_name,
	js.spec_version, js.priority, js.band, js.task_count,
	js.cpu_milli, js.memory_bytes, js.disk_bytes, js.labels
FROM e
LEFT JOIN s ON e.source = 'log' AND s.user = e.user AND s.job = e.job
LEFT JOIN job_specs js ON js.position = s.position
WHERE e.event_type IN (0, 1, 7, 8);
`

// tables lists the derived tables in the order they are created; Rebuild
// drops them in reverse.
var tables = []struct{ name, ddl string }{
	{"events", ddlEvents},
	{"job_specs", ddlJobSpecs},
	{"jobs", ddlJobs},
	{"tasks", ddlTasks},
	{"machines", ddlMachines},
	{"allocs", ddlAllocs},
	{"fold_checkpoint", ddlFoldCheckpoint},
	{"task_events", ddlTaskEvents},
	{"job_events", ddlJobEvents},
	{"machine_events", ddlMachineEvents},
	{"task_usage", ddlTaskUsage},
	{"scheduling_decisions", ddlSchedulingDecisions},
	{"usage_hours", ddlUsageHours},
}
