package infrastore

// More of the cell as it was at a time (the tasks_at, machines_at and
// jobs_at macros are in schema.go): quotas, the price sheet, why tasks
// waited, and what changed between two times. Each takes a TIMESTAMP or a
// string DuckDB casts to one, and answers from the log's events as the
// projection folds them: the last event of an entity at or before the
// time wins (ties in time by log position).
//
//	SELECT * FROM quotas_at('2026-11-26 14:02');
//	SELECT name, alloc_index, machine FROM allocs_at('2026-11-26 14:02');
//	SELECT band, cpu_core_hour FROM prices_at('2026-11-01');
//	SELECT * FROM pending_reasons_at('2026-11-26 14:02') WHERE user = 'alice';
//	SELECT * FROM state_diff('2026-11-26 13:50', '2026-11-26 14:10');
const ddlAsOf = `
CREATE OR REPLACE MACRO quotas_at(ts) AS TABLE
SELECT user, band, cpu_milli, memory_bytes, disk_bytes, gpu_milli, ports, time FROM (
	SELECT payload->>'$.user' AS user, payload->>'$.band' AS band,
		arg_max(payload, position) AS p, arg_max(time, position) AS time
	FROM events
	WHERE type = 'QuotaSet' AND time <= CAST(ts AS TIMESTAMP)
	GROUP BY ALL
), LATERAL (SELECT
	coalesce((p->>'$.resources.cpu_milli')::BIGINT, 0) AS cpu_milli,
	coalesce((p->>'$.resources.memory_bytes')::BIGINT, 0) AS memory_bytes,
	coalesce((p->>'$.resources.disk_bytes')::BIGINT, 0) AS disk_bytes,
	coalesce((p->>'$.resources.gpu_milli')::BIGINT, 0) AS gpu_milli,
	coalesce((p->>'$.resources.ports')::BIGINT, 0) AS ports)
WHERE cpu_milli + memory_bytes + disk_bytes + gpu_milli + ports > 0;

CREATE OR REPLACE MACRO prices_at(ts) AS TABLE
WITH sheet AS (
	SELECT payload AS p FROM events
	WHERE type = 'PriceSheetSet' AND time <= CAST(ts AS TIMESTAMP)
		AND (payload->>'$.effective_us')::BIGINT <= epoch_us(CAST(ts AS TIMESTAMP))
	ORDER BY (payload->>'$.effective_us')::BIGINT DESC, position DESC
	LIMIT 1
)
SELECT b.key AS band, p->>'$.currency' AS currency, make_timestamp((p->>'$.effective_us')::BIGINT) AS effective,
	b.value->>'$.basis' AS basis,
	(b.value->>'$.cpu_core_hour')::DECIMAL(18,9) AS cpu_core_hour,
	(b.value->>'$.memory_gib_hour')::DECIMAL(18,9) AS memory_gib_hour,
	(b.value->>'$.disk_gib_hour')::DECIMAL(18,9) AS disk_gib_hour,
	(b.value->>'$.gpu_hour')::DECIMAL(18,9) AS gpu_hour
FROM sheet, json_each(p, '$.bands') b
WHERE p IS NOT NULL;

CREATE OR REPLACE MACRO allocs_at(ts) AS TABLE
WITH life AS (
	SELECT payload->>'$.user' AS user, payload->>'$.name' AS name,
		arg_max(type, position) AS last, max(position) FILTER (WHERE type = 'AllocSetCreated') AS created,
		arg_max(payload, position) FILTER (WHERE type = 'AllocSetCreated') AS p
	FROM events
	WHERE type IN ('AllocSetCreated', 'AllocSetRemoved') AND time <= CAST(ts AS TIMESTAMP)
	GROUP BY ALL
), sets AS (
	SELECT user, name, created, (p->>'$.count')::INTEGER AS count, (p->>'$.priority')::INTEGER AS priority,
		coalesce((p->>'$.resources.cpu_milli')::BIGINT, 0) AS cpu_milli,
		coalesce((p->>'$.resources.memory_bytes')::BIGINT, 0) AS memory_bytes
	FROM life WHERE last = 'AllocSetCreated'
), moves AS (
	SELECT payload->>'$.user' AS user, payload->>'$.name' AS name, coalesce((payload->>'$.index')::INTEGER, 0) AS idx,
		arg_max(CASE WHEN type = 'AllocScheduled' THEN payload->>'$.machine' END, position) AS machine,
		max(position) AS position
	FROM events e
	WHERE type IN ('AllocScheduled', 'AllocEvicted') AND time <= CAST(ts AS TIMESTAMP)
	GROUP BY ALL
), each AS (
	SELECT s.*, unnest(range(s.count)) AS idx FROM sets s
)
SELECT a.user, a.name, a.idx AS alloc_index, CASE WHEN m.position > a.created THEN m.machine END AS machine,
	a.priority, a.cpu_milli, a.memory_bytes
FROM each a
LEFT JOIN moves m ON m.user = a.user AND m.name = a.name AND m.idx = a.idx;

CREATE OR REPLACE MACRO pending_reasons_at(ts) AS TABLE
SELECT user, job, task_index, reason, hint, since FROM pending_reasons
WHERE since <= CAST(ts AS TIMESTAMP) AND (until IS NULL OR until > CAST(ts AS TIMESTAMP));

CREATE OR REPLACE MACRO state_diff(t1, t2) AS TABLE
WITH
a AS (SELECT user || '/' || job || '/' || task_index AS name, state, machine FROM tasks_at(t1) WHERE source = 'log'),
b AS (SELECT user || '/' || job || '/' || task_index AS name, state, machine FROM tasks_at(t2) WHERE source = 'log'),
tasks AS (
	SELECT 'task' AS kind, coalesce(a.name, b.name) AS name,
		CASE
			WHEN a.name IS NULL THEN 'appeared'
			WHEN b.name IS NULL THEN 'ended'
			WHEN a.state = 'pending' AND b.state = 'running' THEN 'started'
			WHEN a.state = 'running' AND b.state = 'pending' THEN 'pending again'
			WHEN a.machine IS DISTINCT FROM b.machine THEN 'moved'
		END AS change,
		CASE WHEN a.name IS NOT NULL THEN a.state || coalesce(' on ' || a.machine, '') END AS before,
		CASE WHEN b.name IS NOT NULL THEN b.state || coalesce(' on ' || b.machine, '') END AS after
	FROM a FULL OUTER JOIN b ON a.name = b.name
	WHERE a.name IS NULL OR b.name IS NULL OR a.state <> b.state OR a.machine IS DISTINCT FROM b.machine
),
ma AS (SELECT machine, state FROM machines_at(t1) WHERE source = 'log'),
mb AS (SELECT machine, state FROM machines_at(t2) WHERE source = 'log'),
machines AS (
	SELECT 'machine' AS kind, coalesce(ma.machine, mb.machine) AS name,
		CASE WHEN ma.machine IS NULL THEN 'added' WHEN mb.machine IS NULL THEN 'removed' ELSE 'now ' || mb.state END AS change,
		ma.state AS before, mb.state AS after
	FROM ma FULL OUTER JOIN mb ON ma.machine = mb.machine
	WHERE ma.machine IS NULL OR mb.machine IS NULL OR ma.state <> mb.state
),
ja AS (SELECT user || '/' || job AS name, spec_version, event_type FROM jobs_at(t1) WHERE source = 'log'),
jb AS (SELECT user || '/' || job AS name, spec_version, event_type FROM jobs_at(t2) WHERE source = 'log'),
jobs AS (
	SELECT 'job' AS kind, coalesce(ja.name, jb.name) AS name,
		CASE WHEN ja.name IS NULL THEN 'submitted' WHEN jb.name IS NULL THEN 'ended' ELSE 'spec changed' END AS change,
		CASE WHEN ja.name IS NOT NULL THEN 'version ' || ja.spec_version END AS before,
		CASE WHEN jb.name IS NOT NULL THEN 'version ' || jb.spec_version END AS after
	FROM ja FULL OUTER JOIN jb ON ja.name = jb.name
	WHERE ja.name IS NULL OR jb.name IS NULL OR ja.spec_version IS DISTINCT FROM jb.spec_version
),
qa AS (SELECT user || '/' || band AS name, cpu_milli, memory_bytes FROM quotas_at(t1)),
qb AS (SELECT user || '/' || band AS name, cpu_milli, memory_bytes FROM quotas_at(t2)),
quotas AS (
	SELECT 'quota' AS kind, coalesce(qa.name, qb.name) AS name, 'set' AS change,
		CASE WHEN qa.name IS NOT NULL THEN qa.cpu_milli || 'm CPU, ' || qa.memory_bytes || ' B' END AS before,
		CASE WHEN qb.name IS NOT NULL THEN qb.cpu_milli || 'm CPU, ' || qb.memory_bytes || ' B' END AS after
	FROM qa FULL OUTER JOIN qb ON qa.name = qb.name
	WHERE qa.name IS NULL OR qb.name IS NULL OR qa.cpu_milli <> qb.cpu_milli OR qa.memory_bytes <> qb.memory_bytes
)
SELECT * FROM jobs UNION ALL SELECT * FROM tasks UNION ALL SELECT * FROM machines UNION ALL SELECT * FROM quotas;
`
