package infrastore

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// BenchmarkFocusExport exports a month of hourly usage windows as FOCUS
// (CSV, rows per job, hour and meter, idle capacity separate), reporting
// rows/s and seconds per export. The cell is generated in SQL, not timed:
// CORRAL_FOCUS_TASKS tasks (default 10,000; the figure is for
// 100,000) of 100 tasks a job, each with a window every hour of March 2026,
// on 1,000 machines, priced by one sheet, and rolled up hourly by the
// ingester's own roll.
func BenchmarkFocusExport(b *testing.B) {
	tasks := 10_000
	if v, err := strconv.Atoi(os.Getenv("CORRAL_FOCUS_TASKS")); err == nil && v > 0 {
		tasks = v
	}
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "focus.duckdb"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	gen := genTaskUsage(tasks)
	start := time.Now()
	for _, q := range []string{gen,
		`INSERT INTO events (position, time, type, stream, payload) VALUES (0, TIMESTAMP '2026-01-01', 'PriceSheetSet', 'billing',
			'{"currency":"USD","bands":{"monitoring":{"basis":"limit","cpu_core_hour":"0.06","memory_gib_hour":"0.008"},
			"production":{"basis":"limit","cpu_core_hour":"0.048","memory_gib_hour":"0.0064","disk_gib_hour":"0.00016"},
			"batch":{"basis":"reservation","cpu_core_hour":"0.024","memory_gib_hour":"0.0032"},
			"best-effort":{"basis":"usage","cpu_core_hour":"0.008","memory_gib_hour":"0.0011"}},
			"machine":{"cpu_core_hour":"0.02","memory_gib_hour":"0.0025"}}'),
			(1, TIMESTAMP '2026-04-02', 'LeaderElected', 'cell', '{}')`,
		`INSERT INTO machine_events (time, machine, event_type, source, position, cpu_milli, memory_bytes, disk_bytes, gpu_milli, state)
			SELECT epoch_us(TIMESTAMP '2026-02-28'), 'm' || i, 0, 'log', i, 32000, 137438953472, 1099511627776, 0, 'up' FROM range(1000) t(i)`,
		genJobSpecs(tasks),
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	// The rollup as a cell's ingester leaves it: rolled every half hour
	// of windows, so that each job's hour is two partials.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for p := tasks / 2; p <= tasks*720; p += tasks / 2 {
		if err := rollUsage(ctx, conn, int64(p)); err != nil {
			b.Fatal(err)
		}
	}
	conn.Close()
	if _, err := s.db.ExecContext(ctx, "CHECKPOINT"); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d usage windows of %d tasks in %s", tasks*720, tasks, time.Since(start).Round(time.Millisecond))
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var rows int64
	peak := peakRSS(b)
	b.Logf("resident before the first export: %d MiB", peak()>>20)
	for b.Loop() {
		w := &countingWriter{}
		if err := s.ExportFocus(ctx, FocusRequest{From: march, To: march.AddDate(0, 1, 0), Granularity: "job", Cell: "bench"}, w); err != nil {
			b.Fatal(err)
		}
		rows = w.lines - 1
	}
	per := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(rows)/per, "rows/s")
	b.ReportMetric(per, "s/export")
	b.ReportMetric(float64(rows), "rows")
	b.ReportMetric(float64(tasks*720), "windows")
	b.ReportMetric(float64(peak()>>20), "peak-RSS-MiB")
}

// peakRSS resets the process's resident high-water mark (the generation
// of the cell before it does not count) and returns a function reading
// it, in bytes, from /proc/self/status.
func peakRSS(b *testing.B) func() int64 {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Fatalf("reset the peak RSS: %v", err)
	}
	return func() int64 { return testkit.ProcStatusKB(b, 0, "VmHWM:") << 10 }
}

type countingWriter struct{ lines int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.lines += int64(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)
