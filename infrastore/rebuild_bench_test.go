package infrastore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/internal/history"
	"github.com/corralhq/corral/internal/shareddata"
)

// BenchmarkRebuild rebuilds a fresh file from a SQLite log of
// CORRAL_REBUILD_EVENTS events (default 1,000,000; the figure is
// for 10,000,000) of internal/history's Large cell, as `corral infrastore
// rebuild` does, and reports events/s, the peak resident memory during the
// rebuild and the file's size per million events. The log is generated a
// chunk at a time (never all in memory) and kept at CORRAL_REBUILD_LOG when
// that names a file, so that repeated runs skip it.
func BenchmarkRebuild(b *testing.B) {
	n := int64(1_000_000)
	if v, err := strconv.ParseInt(os.Getenv("CORRAL_REBUILD_EVENTS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	logPath := os.Getenv("CORRAL_REBUILD_LOG")
	if logPath == "" {
		logPath = filepath.Join(b.TempDir(), "log.sqlite")
	}
	ctx := context.Background()
	log := generatedLog(b, logPath, n)
	peak := peakRSS(b)
	var total time.Duration
	var size int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), fmt.Sprintf("rebuild%d.duckdb", i))
		s, err := Open(ctx, path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		pos, err := s.Rebuild(ctx, log)
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		if pos != n {
			b.Fatalf("rebuilt up to %d, want %d", pos, n)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		size = fi.Size()
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "events/s")
	b.ReportMetric(float64(peak()>>20), "peak-RSS-MiB")
	b.ReportMetric(float64(size)/(1<<20)/(float64(n)/1e6), "MiB/Mevents")
}

// generatedLog opens the SQLite log at path holding the first n events of
// the Large cell, generating it if the file holds fewer.
func generatedLog(b *testing.B, path string, n int64) *sqlitestore.Store {
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Clock: func() time.Time { return t0 }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	head, err := store.Head(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if head == n {
		return store
	}
	if head != 0 {
		b.Fatalf("%s holds %d events, not %d: remove it", path, head, n)
	}
	start := time.Now()
	c := history.New(history.Large, 42)
	for c.S.Position < n {
		c.Run(min(n, c.S.Position+100_000))
		evs := c.Log
		if extra := c.S.Position - n; extra > 0 {
			evs = evs[:int64(len(evs))-extra]
		}
		appendEvents(b, ctx, store, evs)
		c.Log = c.Log[:0]
	}
	b.Logf("generated %d events into %s in %s", n, path, time.Since(start).Round(time.Second))
	return store
}

// BenchmarkFreshness appends the Large cell's events to a SQLite log at a
// steady CORRAL_LAG_RATE events/s (default 10,000) for CORRAL_LAG_SECONDS
// (default 20) while an ingester follows it through another handle, as the
// Infrastore process follows the master's log (it sees appends at its
// poll), and reports how long after its append committed an event's row is
// visible to a query of the file: lag-p50-ms, lag-p99-ms, lag-max-ms. With
// CORRAL_LAG_BASE set, that many events of the same cell are in the log and
// ingested before, so that the tables the ingester rewrites are a grown
// cell's.
func BenchmarkFreshness(b *testing.B) {
	rate, seconds, base := freshnessLoad()
	const tick = 10 * time.Millisecond
	perTick := max(1, rate/int(time.Second/tick))
	c := history.New(history.Large, 42)
	c.Run(int64(base + rate*seconds))
	prefix, all := c.Log[:base], c.Log[base:base+rate*seconds]
	ctx := context.Background()
	var lags []time.Duration
	for b.Loop() {
		dir := b.TempDir()
		logPath := filepath.Join(dir, "log.sqlite")
		writer, err := sqlitestore.Open(ctx, logPath, sqlitestore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		appendEvents(b, ctx, writer, prefix)
		reader, err := sqlitestore.Open(ctx, logPath, sqlitestore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		s, err := Open(ctx, filepath.Join(dir, "infra.duckdb"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { _ = s.Run(runCtx, reader) })
		if err := s.WaitPosition(ctx, int64(base)); err != nil {
			b.Fatal(err)
		}
		ct := &commitTimes{base: int64(base), committed: make([]time.Time, len(all)), appended: int64(base)}
		wg.Go(func() { ct.appendPaced(runCtx, b, writer, all, perTick, tick) })
		var seen int64
		lags, seen = ct.probe(ctx, b, s, lags, time.Now().Add(time.Duration(seconds)*time.Second+time.Minute))
		stop()
		wg.Wait()
		s.Close()
		writer.Close()
		reader.Close()
		if seen < int64(len(all)) {
			b.Fatalf("only %d of %d events became visible", seen, len(all))
		}
	}
	slices.Sort(lags)
	at := func(q float64) float64 { return float64(lags[int(q*float64(len(lags)-1))]) / 1e6 }
	b.ReportMetric(at(0.5), "lag-p50-ms")
	b.ReportMetric(at(0.99), "lag-p99-ms")
	b.ReportMetric(at(1), "lag-max-ms")
	b.ReportMetric(float64(rate), "events/s")
}

// freshnessLoad is BenchmarkFreshness's load: events a second, for how
// many seconds, after how many events already in the log.
func freshnessLoad() (rate, seconds, base int) {
	rate, seconds, base = 10_000, 20, 0
	if v, err := strconv.Atoi(os.Getenv("CORRAL_LAG_BASE")); err == nil && v > 0 {
		base = v
	}
	if v, err := strconv.Atoi(os.Getenv("CORRAL_LAG_RATE")); err == nil && v > 0 {
		rate = v
	}
	if v, err := strconv.Atoi(os.Getenv("CORRAL_LAG_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	return rate, seconds, base
}

// commitTimes records when each appended event was committed.
type commitTimes struct {
	base      int64       // events in the log before the timed ones
	committed []time.Time // [i]: when the append holding position base+i+1 returned
	mu        sync.Mutex
	appended  int64 // the last position appended
}

// appendPaced appends all, perTick events every tick, until done or ctx
// ends.
func (ct *commitTimes) appendPaced(ctx context.Context, b *testing.B, writer *sqlitestore.Store, all []events.Event, perTick int, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for evs := all; len(evs) > 0 && ctx.Err() == nil; <-t.C {
		k := min(perTick, len(evs))
		res, err := writer.Append(context.Background(), events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: evs[:k]})
		if err != nil {
			b.Error(err)
			return
		}
		now := time.Now()
		ct.mu.Lock()
		for p := res.First; p <= res.Last; p++ {
			ct.committed[p-1-ct.base] = now
		}
		ct.appended = res.Last
		ct.mu.Unlock()
		evs = evs[k:]
	}
}

// probe asks what a query sees, every millisecond (the lags' resolution),
// until the last event is visible or deadline, and adds each event's lag
// from its commit to lags. It returns lags and how many events became
// visible.
func (ct *commitTimes) probe(ctx context.Context, b *testing.B, s *Infrastore, lags []time.Duration, deadline time.Time) ([]time.Duration, int64) {
	every := time.NewTicker(time.Millisecond)
	defer every.Stop()
	seen := int64(0)
	for ; seen < int64(len(ct.committed)) && time.Now().Before(deadline); <-every.C {
		var p int64
		if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(position), 0) FROM events`).Scan(&p); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		ct.mu.Lock()
		p = min(p, ct.appended) - ct.base
		for ; seen < p; seen++ {
			lags = append(lags, now.Sub(ct.committed[seen]))
		}
		ct.mu.Unlock()
	}
	return lags, seen
}

// BenchmarkImportGoogleTrace loads the public Google trace sample from
// ../shared/traces (it fails when the folder is missing) into a fresh file
// and reports its events/s.
func BenchmarkImportGoogleTrace(b *testing.B) {
	dir := shareddata.Dir(b, shareddata.GoogleTrace)
	ctx := context.Background()
	var total time.Duration
	var rows int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		s, err := Open(ctx, filepath.Join(b.TempDir(), fmt.Sprintf("trace%d.duckdb", i)), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		st, err := s.ImportGoogleTrace(ctx, dir)
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		rows = st.TaskEvents + st.JobEvents
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(rows)*float64(b.N)/total.Seconds(), "events/s")
	b.ReportMetric(float64(rows), "events")
}
