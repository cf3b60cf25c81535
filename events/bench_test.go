package events_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/events/storetest"
	"github.com/corralhq/corral/internal/pgtest"
)

type backend struct {
	name string
	open func(b *testing.B) events.Store
}

var backends = []backend{
	{"postgres", func(b *testing.B) events.Store {
		ctx := context.Background()
		s, err := pgstore.Open(ctx, pgtest.NewDatabase(b), pgstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}},
	{"sqlite", func(b *testing.B) events.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "events.db"), sqlitestore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}},
}

// BenchmarkAppend appends batches of n task events, each with the expected
// position of the previous append, as the master does.
func BenchmarkAppend(b *testing.B) {
	for _, be := range backends {
		for _, n := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("%s/batch=%d", be.name, n), func(b *testing.B) {
				s := be.open(b)
				ctx := context.Background()
				batch := make([]events.Event, n)
				for i := range batch {
					batch[i] = storetest.Task("alice", "web", int32(i))
				}
				lat := make([]time.Duration, 0, b.N)
				head := int64(0)
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					res, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: head, Events: batch})
					if err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
					head = res.Last
				}
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(b.N*n)/elapsed.Seconds(), "events/s")
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}

// BenchmarkRead reads and decodes a 100,000-event log in pages of 5,000.
func BenchmarkRead(b *testing.B) {
	const total, page = 100_000, 5_000
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			ctx := context.Background()
			for i := 0; i < total/1000; i++ {
				batch := make([]events.Event, 1000)
				for j := range batch {
					batch[j] = storetest.Task("alice", fmt.Sprintf("job%d", i), int32(j))
				}
				if _, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: int64(i * 1000), Events: batch}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				read := 0
				for from := int64(1); ; {
					evs, err := s.Read(ctx, from, page)
					if err != nil {
						b.Fatal(err)
					}
					if len(evs) == 0 {
						break
					}
					read += len(evs)
					from = evs[len(evs)-1].Position + 1
				}
				if read != total {
					b.Fatalf("read %d events, want %d", read, total)
				}
			}
			b.ReportMetric(float64(b.N*total)/time.Since(start).Seconds(), "events/s")
			// On a shared machine wall time swings with the neighbours;
			// CPU time spent by this process does much less.
			b.ReportMetric(float64(b.N*total)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
		})
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
