package infrastore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The hourly rollup of usage. A month of a large cell is hundreds of
// millions of usage windows (a window per task every five minutes); a
// bill per job and hour needs only their sums. usage_hours holds them:
// partial sums per hour, job, spec, band and priority of the windows
// recorded in a range of positions, appended as the ingester goes (a
// "roll"). A bill adds the partials of a key up, so how the windows were
// cut into rolls never shows: a rebuilt store, rolled elsewhere, bills the
// same bytes.
//
// Invariants:
//   - A roll takes every window of the log (source 'log') recorded after
//     the last rolled one (the largest plast) up to a position, once; the
//     windows recorded since are the unrolled tail, which a bill reads
//     from task_usage.
//   - No partial spans a BillingPeriodClosed: the ingester rolls up to
//     each close before it goes past it, so a partial is wholly before a
//     month's close (billed in the month) or wholly after it (late: billed
//     as corrections, from task_usage).
//   - Rolls happen in the batch's own transaction: the rollup moves with
//     the position, exactly once.

const ddlUsageHours = `CREATE TABLE IF NOT EXISTS usage_hours (
	hour               BIGINT  NOT NULL, -- the windows' start, down to the hour
	user               VARCHAR,
	job                VARCHAR NOT NULL,
	spec_position      BIGINT,
	band               VARCHAR NOT NULL,
	priority           INTEGER,
	cpu_limit          DECIMAL(38,9),
	cpu_reservation    DECIMAL(38,9),
	cpu_usage          DECIMAL(38,9),
	memory_limit       DECIMAL(38,9),
	memory_reservation DECIMAL(38,9),
	memory_usage       DECIMAL(38,9),
	disk_usage         DECIMAL(38,9),
	gpu_limit          DECIMAL(38,9),
	pfirst             BIGINT  NOT NULL, -- the first and last window's position
	plast              BIGINT  NOT NULL,
	windows            BIGINT  NOT NULL
)`

// When the ingester rolls: once the log's time has moved on this much
// since the last roll (so most of an hour's windows, recorded in the next
// hour, go into one partial), or once this many windows wait, which bounds
// the tail a bill scans.
const (
	rollInterval = time.Hour
	rollWindows  = 1_000_000
)

// rollUsage appends to usage_hours the partial sums of the windows
// recorded after the last rolled one, up to position upTo.
func rollUsage(ctx context.Context, conn *sql.Conn, upTo int64) error {
	_, err := conn.ExecContext(ctx, fmt.Sprintf(`
INSERT INTO usage_hours
SELECT start_time // %[1]d * %[1]d, user, job, spec_position, coalesce(band, 'unknown'), priority,
	sum(cpu_limit_core_hours), sum(cpu_reservation_core_hours), sum(cpu_usage_core_hours),
	sum(memory_limit_gib_hours), sum(memory_reservation_gib_hours), sum(memory_usage_gib_hours),
	sum(disk_usage_gib_hours), sum(coalesce(gpu_limit_hours, 0::DECIMAL(18,9))),
	min(position), max(position), count(*)
FROM task_usage
WHERE source = 'log' AND position > (SELECT coalesce(max(plast), 0) FROM usage_hours) AND position <= ?
GROUP BY ALL`, hourUS), upTo)
	return err
}

// rolled is the last window's position the rollup holds.
func rolled(ctx context.Context, conn *sql.Conn) (int64, error) {
	var p int64
	err := conn.QueryRowContext(ctx, `SELECT coalesce(max(plast), 0) FROM usage_hours`).Scan(&p)
	return p, err
}

// rollBatch rolls, in a batch's transaction, up to each billing period
// the batch closes and, when it is time, up to the batch's end.
func (s *Infrastore) rollBatch(ctx context.Context, conn *sql.Conn, b *batch, last int64) error {
	for _, c := range b.closes {
		if err := rollUsage(ctx, conn, c); err != nil {
			return fmt.Errorf("rolling usage up to %d: %w", c, err)
		}
	}
	s.unrolled += len(b.taskUsage)
	if s.unrolled < rollWindows && b.lastTime.Sub(s.lastRoll) < rollInterval {
		return nil
	}
	if err := rollUsage(ctx, conn, last); err != nil {
		return fmt.Errorf("rolling usage up to %d: %w", last, err)
	}
	s.unrolled, s.lastRoll = 0, b.lastTime
	return nil
}
