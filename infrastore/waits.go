package infrastore

// Why tasks waited, as history. The scheduler records a pending task's
// reason and hint when they change (PendingReasonsChanged, at most once per
// task per pass); pending_reasons turns those records into intervals: each
// reason of each task from when it was recorded until the next record for
// the task or the end of its wait (the task's next event other than a
// submission or a spec change while pending: placed, killed, ...),
// whichever comes first. until is NULL while the task still waits for that
// reason.
//
//	-- why was alice/web pending between 13:50 and 14:10?
//	SELECT task_index, reason, hint, since, until FROM pending_reasons
//	WHERE user = 'alice' AND job = 'web'
//	  AND since < TIMESTAMP '2026-11-26 14:10' AND coalesce(until, now()) > TIMESTAMP '2026-11-26 13:50';
//
//	-- which reason cost the most pending task-hours this week?
//	SELECT reason, sum(epoch(coalesce(until, now()::TIMESTAMP) - since)) / 3600 AS task_hours
//	FROM pending_reasons WHERE since >= now()::TIMESTAMP - INTERVAL 7 DAY
//	GROUP BY reason ORDER BY task_hours DESC;
const ddlWaits = `
CREATE OR REPLACE VIEW pending_reasons AS
WITH changes AS (
	SELECT e.position, epoch_us(e.time) AS since_us,
		r.value->>'$.user' AS user, r.value->>'$.job' AS job, i.value::INTEGER AS task_index,
		r.value->>'$.reason' AS reason, coalesce(r.value->>'$.hint', '') AS hint
	FROM events e, json_each(e.payload, '$.reasons') r, json_each(r.value, '$.indexes') i
	WHERE e.type = 'PendingReasonsChanged'
), ends AS (
	SELECT user, job, task_index, position, time FROM task_events
	WHERE source = '` + SourceLog + `' AND event_type NOT IN (0, 7)
)
SELECT c.user, c.job, c.task_index, c.reason, c.hint,
	make_timestamp(c.since_us) AS since,
	make_timestamp(least(lead(c.since_us) OVER (PARTITION BY c.user, c.job, c.task_index ORDER BY c.position), ends.time)) AS until,
	c.position
FROM changes c
ASOF LEFT JOIN ends ON ends.user = c.user AND ends.job = c.job AND ends.task_index = c.task_index AND ends.position > c.position;
`
