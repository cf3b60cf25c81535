package infrastore

// The pricing rule, in SQL, read by every bill (the summary, the FOCUS
// export, its explanations, the lost-work view and the costs page): one
// definition of which sheet prices a window and on what basis.
//
// Price sheets and closed billing periods are read from the log's own
// events (PriceSheetSet, BillingPeriodClosed), which never change, so a
// bill computed from them on a freshly rebuilt store is the same.
//
//   - A sheet is in force from its effective time until the next sheet's
//     (ordered by effective time, then position: of two sheets with the
//     same effective time the later one wins, as projections.SheetAt).
//   - A usage window is priced by the sheet in force at its start, on its
//     band's basis (billed_quantity): limit, reservation or usage for CPU and memory; disk
//     space as used; GPUs as allocated (agents do not measure them). A band
//     the sheet does not price is charged nothing (basis "none", its
//     quantities on the limit).
//   - Every comparison of a payload field is parenthesised,
//     (payload->>'$.f') = 'x': DuckDB's ->> binds more loosely than AND
//     and =, so without them the AND's result is what ->> reads (docs/sql.md).
const ddlPricing = `
CREATE OR REPLACE VIEW price_sheets AS
SELECT position, time AS set_at, actor,
	coalesce((payload->>'$.effective_us')::BIGINT, 0) AS effective_time,
	lead(coalesce((payload->>'$.effective_us')::BIGINT, 0), 1, 9223372036854775807)
		OVER (ORDER BY coalesce((payload->>'$.effective_us')::BIGINT, 0), position) AS valid_to,
	payload->>'$.currency' AS currency,
	payload->>'$.note' AS note,
	payload AS sheet
FROM events WHERE type = 'PriceSheetSet';

CREATE OR REPLACE VIEW band_prices AS
SELECT s.position AS sheet_position, s.currency, s.effective_time AS valid_from, s.valid_to, b.band,
	json_extract_string(s.sheet, '$.bands."' || b.band || '".basis') AS basis,
	coalesce(json_extract_string(s.sheet, '$.bands."' || b.band || '".cpu_core_hour'), '0')::DECIMAL(18,9) AS cpu_core_hour,
	coalesce(json_extract_string(s.sheet, '$.bands."' || b.band || '".memory_gib_hour'), '0')::DECIMAL(18,9) AS memory_gib_hour,
	coalesce(json_extract_string(s.sheet, '$.bands."' || b.band || '".disk_gib_hour'), '0')::DECIMAL(18,9) AS disk_gib_hour,
	coalesce(json_extract_string(s.sheet, '$.bands."' || b.band || '".gpu_hour'), '0')::DECIMAL(18,9) AS gpu_hour
FROM price_sheets s, (SELECT unnest(['monitoring', 'production', 'batch', 'best-effort', 'unknown']) AS band) b
WHERE json_extract(s.sheet, '$.bands."' || b.band || '"') IS NOT NULL;

CREATE OR REPLACE VIEW machine_prices AS
SELECT position AS sheet_position, currency, effective_time AS valid_from, valid_to,
	coalesce(json_extract_string(sheet, '$.machine.cpu_core_hour'), '0')::DECIMAL(18,9) AS cpu_core_hour,
	coalesce(json_extract_string(sheet, '$.machine.memory_gib_hour'), '0')::DECIMAL(18,9) AS memory_gib_hour,
	coalesce(json_extract_string(sheet, '$.machine.disk_gib_hour'), '0')::DECIMAL(18,9) AS disk_gib_hour,
	coalesce(json_extract_string(sheet, '$.machine.gpu_hour'), '0')::DECIMAL(18,9) AS gpu_hour
FROM price_sheets;

CREATE OR REPLACE VIEW billing_periods_closed AS
SELECT (payload->>'$.period_start_us')::BIGINT AS period_start,
	(payload->>'$.period_end_us')::BIGINT AS period_end,
	position AS closed_at, time AS closed_time, actor
FROM events WHERE type = 'BillingPeriodClosed';

CREATE OR REPLACE MACRO billed_quantity(basis, limit_q, reservation_q, usage_q) AS
	CASE basis WHEN 'reservation' THEN reservation_q WHEN 'usage' THEN usage_q ELSE limit_q END;

CREATE OR REPLACE VIEW priced_usage AS
SELECT u.*, coalesce(u.band, 'unknown') AS billed_band, coalesce(p.basis, 'none') AS basis, p.sheet_position,
	billed_quantity(p.basis, u.cpu_limit_core_hours, u.cpu_reservation_core_hours, u.cpu_usage_core_hours) AS cpu_core_hours,
	billed_quantity(p.basis, u.memory_limit_gib_hours, u.memory_reservation_gib_hours, u.memory_usage_gib_hours) AS memory_gib_hours,
	u.disk_usage_gib_hours AS disk_gib_hours,
	coalesce(u.gpu_limit_hours, 0::DECIMAL(18,9)) AS gpu_hours,
	coalesce(p.cpu_core_hour, 0::DECIMAL(18,9)) AS cpu_price,
	coalesce(p.memory_gib_hour, 0::DECIMAL(18,9)) AS memory_price,
	coalesce(p.disk_gib_hour, 0::DECIMAL(18,9)) AS disk_price,
	coalesce(p.gpu_hour, 0::DECIMAL(18,9)) AS gpu_price
FROM task_usage u
LEFT JOIN band_prices p ON p.band = coalesce(u.band, 'unknown') AND u.start_time >= p.valid_from AND u.start_time < p.valid_to
WHERE u.source = 'log';

CREATE OR REPLACE VIEW preemption_losses AS
WITH ev AS (
	SELECT position, time,
		payload->>'$.user' AS user, payload->>'$.job' AS job, coalesce((payload->>'$.index')::INTEGER, 0) AS task_index,
		payload->>'$.machine' AS machine,
		payload->>'$.preemptor.user' AS preemptor_user, payload->>'$.preemptor.job' AS preemptor_job,
		coalesce((payload->>'$.preemptor.index')::INTEGER, 0) AS preemptor_index
	FROM events WHERE type = 'TaskEvicted' AND (payload->>'$.reason') = 'preempted'
), run AS (
	SELECT ev.*, (SELECT max(te.position) FROM task_events te
		WHERE te.source = 'log' AND te.user = ev.user AND te.job = ev.job AND te.task_index = ev.task_index
			AND te.event_type = 1 AND te.position < ev.position) AS run_start_position
	FROM ev
)
SELECT run.position AS evicted_at, run.time AS evicted_time, run.user, run.job, run.task_index, run.machine,
	run.preemptor_user, run.preemptor_job, run.preemptor_index, run.run_start_position,
	count(u.position) AS windows,
	coalesce(sum(u.cpu_usage_core_hours), 0) AS cpu_core_hours_used,
	coalesce(sum(u.memory_usage_gib_hours), 0) AS memory_gib_hours_used,
	coalesce(sum(u.cpu_core_hours * u.cpu_price + u.memory_gib_hours * u.memory_price
		+ u.disk_gib_hours * u.disk_price + u.gpu_hours * u.gpu_price), 0) AS cost_lost
FROM run
LEFT JOIN priced_usage u ON u.user = run.user AND u.job = run.job AND u.task_index = run.task_index
	AND u.position > coalesce(run.run_start_position, 0) AND u.position < run.position
GROUP BY ALL;
`
