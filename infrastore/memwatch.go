package infrastore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// DuckDB's memory_limit bounds its buffer manager, not everything a query
// allocates: the vectors of an expression's values (a million 1 MB strings
// in flight) and the states of some aggregates are outside it. The memory
// watch bounds those: while queries run, it samples the process's resident
// anonymous memory, and past the high-water mark it interrupts every
// running query that started below the sample by more than
// memoryGrowth (its context is cancelled, and the driver interrupts
// DuckDB), before the kernel would kill the process at its budget.
// Ingestion is never interrupted. A query that started when the process
// was already high runs on until it grows: the allocator keeps some of
// what an interrupted query freed, and that must not stop the next
// SELECT 1.

// memoryWatch interrupts running queries when the process's memory passes
// high; the zero value (no budget) watches nothing.
type memoryWatch struct {
	budget, high int64
	every        time.Duration
	// held reads the process's resident anonymous memory.
	held func() (int64, error)

	mu      sync.Mutex
	running map[*watchedQuery]struct{}
	polling bool
}

type watchedQuery struct {
	cancel context.CancelCauseFunc
	start  int64 // the process's memory when the query started
}

// memoryExceeded is the cause of a query's context the watch cancelled.
type memoryExceeded struct{ held, budget int64 }

func (e *memoryExceeded) Error() string {
	return fmt.Sprintf("the process held %s of its %s memory budget", formatBytes(e.held), formatBytes(e.budget))
}

// highWater is the share of the budget past which queries are
// interrupted, and highWaterRoom the least room it leaves below the
// budget: what a query allocates between a sample and DuckDB's noticing
// the interrupt (about 70 MiB measured for a growing list aggregate).
const (
	highWater     = 0.85
	highWaterRoom = 128 << 20
)

// memoryGrowth is how much a query must have grown the process, past the
// high-water mark, to be interrupted.
const memoryGrowth = 16 << 20

// memorySample is how often the watch samples while queries run.
const memorySample = 10 * time.Millisecond

func newMemoryWatch(budget int64) *memoryWatch {
	if budget <= 0 {
		return &memoryWatch{}
	}
	high := min(int64(float64(budget)*highWater), budget-highWaterRoom)
	return &memoryWatch{budget: budget, high: high, every: memorySample,
		held: residentAnonymous, running: map[*watchedQuery]struct{}{}}
}

// watch returns ctx, cancelled with a *memoryExceeded cause if the process
// passes the high-water mark before stop is called.
func (w *memoryWatch) watch(ctx context.Context) (context.Context, func()) {
	if w.budget <= 0 {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	start, err := w.held()
	if err != nil {
		start = 0 // unreadable: the query counts as grown from nothing
	}
	q := &watchedQuery{cancel: cancel, start: start}
	w.mu.Lock()
	w.running[q] = struct{}{}
	if !w.polling {
		w.polling = true
		go w.poll()
	}
	w.mu.Unlock()
	return ctx, func() {
		w.mu.Lock()
		delete(w.running, q)
		w.mu.Unlock()
		cancel(nil)
	}
}

// poll samples while any query runs, and stops when none does.
func (w *memoryWatch) poll() {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for range t.C {
		w.mu.Lock()
		if len(w.running) == 0 {
			w.polling = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		held, err := w.held()
		if err != nil || held < w.high {
			continue
		}
		cause := &memoryExceeded{held: held, budget: w.budget}
		w.mu.Lock()
		for q := range w.running {
			if held-q.start >= memoryGrowth {
				q.cancel(cause)
				delete(w.running, q)
			}
		}
		w.mu.Unlock()
	}
}

// residentAnonymous reads the process's resident anonymous memory: what
// the kernel counts against its cgroup and cannot reclaim but by killing
// it (the DuckDB file's pages in the page cache are reclaimable).
func residentAnonymous() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	i := bytes.Index(b, []byte("RssAnon:"))
	if i < 0 {
		return 0, fmt.Errorf("/proc/self/status has no RssAnon")
	}
	line := b[i+len("RssAnon:"):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(line), []byte("kB")))), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/self/status RssAnon: %w", err)
	}
	return kb << 10, nil
}

// formatBytes prints n in MiB, for messages about memory.
func formatBytes(n int64) string {
	return strconv.FormatInt(n>>20, 10) + " MiB"
}
