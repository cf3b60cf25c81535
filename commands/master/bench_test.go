package master_test

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
)

func benchSpec(name string) *events.JobSpec {
	return &events.JobSpec{Name: name, Priority: 0, TaskCount: 10, Command: "/bin/true",
		Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 20}}
}

// BenchmarkSubmit measures submissions end to end: gRPC, decision, group
// commit to PostgreSQL, reply. Jobs of 10 tasks.
//   - throughput: 64 clients submit as fast as they can (jobs/s).
//   - paced: an offered 10,000 tasks per minute (Borg's busiest cells), the
//     latency of each submission (p99-ms).
func BenchmarkSubmit(b *testing.B) {
	b.Run("throughput", func(b *testing.B) {
		r := startBenchReplica(b)
		c := r.Client()
		const clients = 64
		var next atomic.Int64
		lat := make([]time.Duration, b.N)
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < clients; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(b.N) {
						return
					}
					name := fmt.Sprintf("job%d", i)
					t0 := time.Now()
					if _, err := c.Submit(as("bench"), &apipb.SubmitRequest{RequestId: name, Spec: benchSpec(name)}); err != nil {
						b.Error(err)
						return
					}
					lat[i] = time.Since(t0)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
		b.ReportMetric(p99(lat), "p99-ms")
	})
	b.Run("paced", func(b *testing.B) {
		r := startBenchReplica(b)
		c := r.Client()
		jobsPerSecond := 10_000.0 / 10 / 60 // 10,000 tasks a minute
		gap := time.Duration(int64(float64(time.Second) / jobsPerSecond))
		lat := make([]time.Duration, b.N)
		var wg sync.WaitGroup
		b.ResetTimer()
		tick := time.NewTicker(gap)
		defer tick.Stop()
		for i := 0; i < b.N; i++ {
			<-tick.C
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				name := fmt.Sprintf("paced%d", i)
				t0 := time.Now()
				if _, err := c.Submit(as("bench"), &apipb.SubmitRequest{RequestId: name, Spec: benchSpec(name)}); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}(i)
		}
		wg.Wait()
		b.StopTimer()
		b.ReportMetric(p99(lat), "p99-ms")
	})
}

func p99(lat []time.Duration) float64 {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[(len(s)*99)/100].Microseconds()) / 1000
}

func startBenchReplica(b *testing.B) *replica {
	r := startReplica(b, "bench", backends[0].Open(b))
	waitLeading(b, r)
	return r
}
