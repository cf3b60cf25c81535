package infrastore

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/history"
)

// sliceReader serves a log held in memory, to time the store's own work
// without the event source's.
type sliceReader []events.Event

func (r sliceReader) Read(_ context.Context, from int64, limit int) ([]events.Event, error) {
	if from < 1 || from > int64(len(r)) {
		return nil, nil
	}
	end := min(int(from-1)+limit, len(r))
	return r[from-1 : end], nil
}

// cpuTime is the CPU time the process used, all threads included.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// positioned gives evs the positions a store would.
func positioned(evs []events.Event) []events.Event {
	out := make([]events.Event, len(evs))
	for i, e := range evs {
		e.Position = int64(i + 1)
		out[i] = e
	}
	return out
}

// BenchmarkIngest catches a fresh file up with 250,000 events of a cell of
// 2,000 machines the master could have written (internal/history's Large
// cell): from the embedded SQLite log, as `corral up` does, and from
// memory, which leaves only the store's own work.
func BenchmarkIngest(b *testing.B) {
	c := history.New(history.Large, 42)
	c.Run(250_000)
	evs := c.Log[:250_000]
	for _, src := range []string{"sqlite", "memory"} {
		b.Run(src, func(b *testing.B) {
			var r events.Reader = sliceReader(positioned(evs))
			if src == "sqlite" {
				r = newSQLiteLog(b, evs)
			}
			ctx := context.Background()
			var total, cpu time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				s, err := Open(ctx, filepath.Join(b.TempDir(), fmt.Sprintf("bench%d.duckdb", i)), Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start, cpu0 := time.Now(), cpuTime()
				if _, err := s.CatchUp(ctx, r); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				cpu += cpuTime() - cpu0
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(len(evs))*float64(b.N)/total.Seconds(), "events/s")
			// On a shared machine the wall clock says as much about the
			// neighbours; CPU time, all threads included, does not.
			b.ReportMetric(float64(len(evs))*float64(b.N)/cpu.Seconds(), "events/cpu-s")
		})
	}
}

// The large cell of the query benchmarks: 10,000,000 task events of
// 1,000,000 tasks (10,000 jobs of 100 tasks, 200 users) over 30 days, and a
// month of hourly usage windows of 10,000 tasks (7,200,000 rows). Both are
// generated inside DuckDB from range() and a hash of the row number, so the
// data is the same on every run.
const (
	largeTaskEvents  = 10_000_000
	largeJobs        = 10_000
	largeTasksPerJob = 100
	largeUsers       = 200
	billTasks        = 10_000
	billWindows      = 30 * 24
	monthMicros      = int64(30 * 24 * time.Hour / time.Microsecond)
)

// genTaskEvents fills task_events: each task gets ten events, SUBMIT,
// SCHEDULE, EVICT, SUBMIT, SCHEDULE, UPDATE_RUNNING, FAIL, SUBMIT, SCHEDULE
// and FINISH or KILL, from a start spread over the month.
const genTaskEvents = `
INSERT INTO task_events
SELECT
	epoch_us(TIMESTAMP '2026-03-01') + (hash(task, 1) % 2419200000000)::BIGINT + k * (hash(task, 2) % 3600000000)::BIGINT AS time,
	NULL, 'job' || (task // 100), (task % 100)::INTEGER,
	CASE WHEN code IN (0, 7) THEN NULL ELSE 'm' || (hash(task, k) % 12500) END,
	code, 'user' || ((task // 100) % 200), (hash(task // 100) % 4)::INTEGER, prio,
	0.25 * (1 + hash(task // 100, 3) % 8), 2147483648.0 * (1 + hash(task // 100, 4) % 8), 1073741824.0, false,
	'log', i + 1, NULL,
	CASE code WHEN 0 THEN 'pending' WHEN 7 THEN 'pending' WHEN 1 THEN 'running' WHEN 8 THEN 'running'
		WHEN 2 THEN 'evicted' WHEN 3 THEN 'failed' WHEN 4 THEN 'finished' WHEN 5 THEN 'killed' ELSE 'lost' END,
	1, NULL, NULL, NULL
FROM (
	SELECT i, i // 10 AS task, i % 10 AS k,
		CASE i % 10 WHEN 0 THEN 0 WHEN 1 THEN 1 WHEN 2 THEN 2 WHEN 3 THEN 0 WHEN 4 THEN 1 WHEN 5 THEN 8
			WHEN 6 THEN 3 WHEN 7 THEN 0 WHEN 8 THEN 1 ELSE (CASE WHEN hash(i // 10) % 4 = 0 THEN 5 ELSE 4 END) END AS code,
		[0, 1, 3, 4, 6, 9, 10, 11][(1 + hash(i // 1000, 5) % 8)::BIGINT]::INTEGER AS prio
	FROM range(` + "10000000" + `) t(i)
)`

// genTaskUsage fills task_usage: tasks tasks of 100 a job, one row per
// task per hour of March 2026, in the order a cell records them (hour by
// hour), each job's spec at position 1e12 + job.
func genTaskUsage(tasks int) string {
	return fmt.Sprintf(`
INSERT INTO task_usage BY NAME
SELECT
	epoch_us(TIMESTAMP '2026-03-01') + w * 3600000000 AS start_time,
	epoch_us(TIMESTAMP '2026-03-01') + (w + 1) * 3600000000 AS end_time,
	'job' || (task // 100) AS job, (task %% 100)::INTEGER AS task_index, 'm' || (hash(task) %% 12500) AS machine,
	'user' || ((task // 100) %% 200) AS user, 'log' AS source, i + 1 AS position, 1 AS spec_version, 1000000000000 + task // 100 AS spec_position,
	prio AS priority,
	CASE WHEN prio >= 11 THEN 'monitoring' WHEN prio >= 9 THEN 'production' WHEN prio >= 2 THEN 'batch' ELSE 'best-effort' END AS band,
	cpu * 3600 * 0.4 AS cpu_core_seconds, 1073741824 AS memory_mean_bytes,
	cpu_milli AS cpu_limit_milli, 2147483648 AS memory_limit_bytes, 1073741824 AS disk_limit_bytes,
	cpu_milli // 2 AS cpu_reservation_milli, 1610612736 AS memory_reservation_bytes, 1073741824 AS disk_reservation_bytes,
	cpu::DECIMAL(18,9) AS cpu_limit_core_hours, (cpu / 2)::DECIMAL(18,9) AS cpu_reservation_core_hours,
	(cpu * 0.4)::DECIMAL(18,9) AS cpu_usage_core_hours,
	2 AS memory_limit_gib_hours, 1.5 AS memory_reservation_gib_hours, 1 AS memory_usage_gib_hours, 0.5 AS disk_usage_gib_hours
FROM (
	SELECT i, i %% %[1]d AS task, i // %[1]d AS w,
		(250 * (1 + hash(i %% %[1]d // 100, 3) %% 8))::BIGINT AS cpu_milli, 0.25 * (1 + hash(i %% %[1]d // 100, 3) %% 8) AS cpu,
		[0, 1, 3, 4, 6, 9, 10, 11][(1 + hash(i %% %[1]d // 100, 5) %% 8)::BIGINT]::INTEGER AS prio
	FROM range(%[2]d) t(i)
)`, tasks, tasks*billWindows)
}

// genJobSpecs fills job_specs with the specs genTaskUsage cites, labelled
// by team, environment and cost centre.
func genJobSpecs(tasks int) string {
	return fmt.Sprintf(`INSERT INTO job_specs (position, time, user, job, spec_version, priority, labels)
		SELECT 1000000000000 + j, 0, 'user' || (j %% 200), 'job' || j, 1, 0,
			MAP {'team': 'team' || (j %% 17), 'env': 'prod', 'cost-center': 'cc-' || (j %% 5)} FROM range(%d) t(j)`, (tasks+99)/100)
}

// BenchmarkLargeCell times the queries of the issue on the large cell;
// generating it takes a minute and is not timed. Run with
// -bench LargeCell -benchtime 5x.
func BenchmarkLargeCell(b *testing.B) {
	if testing.Short() {
		b.Skip("generates 17 million rows")
	}
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "large.duckdb"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	for _, q := range []string{genTaskEvents, genTaskUsage(billTasks), genJobSpecs(billTasks)} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.db.ExecContext(ctx, "CHECKPOINT"); err != nil {
		b.Fatal(err)
	}
	if n := queryInt(b, s, `SELECT count(*) FROM task_events`); n != largeTaskEvents {
		b.Fatalf("generated %d task events, want %d", n, largeTaskEvents)
	}
	if n := queryInt(b, s, `SELECT count(DISTINCT (user, job, task_index)) FROM task_usage`); n != billTasks {
		b.Fatalf("generated usage of %d tasks, want %d", n, billTasks)
	}
	b.Logf("generated 10,000,000 task events and %d usage rows in %s", billTasks*billWindows, time.Since(start).Round(time.Millisecond))

	query := func(b *testing.B, q string) {
		for b.Loop() {
			res, err := s.Query(ctx, q, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Rows) == 0 {
				b.Fatal("no rows")
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/query")
	}
	b.Run("events_per_type_per_user", func(b *testing.B) {
		query(b, `SELECT user, event_type, count(*) AS events FROM task_events GROUP BY ALL ORDER BY ALL`)
	})
	b.Run("tasks_at", func(b *testing.B) {
		query(b, `SELECT state, count(*) AS tasks, count(DISTINCT machine) AS machines FROM tasks_at('2026-03-16 12:00:00') GROUP BY ALL`)
	})
	b.Run("bill_month_10k_tasks", func(b *testing.B) {
		for b.Loop() {
			bill, err := s.Bill(ctx, BillRequest{From: t0, To: t0.AddDate(0, 1, 0)})
			if err != nil {
				b.Fatal(err)
			}
			if bill.Total.Tasks != billTasks || bill.Total.Windows != billTasks*billWindows {
				b.Fatalf("bill covers %d tasks, %d windows", bill.Total.Tasks, bill.Total.Windows)
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/query")
	})
}
