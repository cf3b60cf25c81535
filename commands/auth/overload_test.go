package auth_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/events"
)

type sample struct {
	took time.Duration
	code codes.Code
}

type load struct {
	mu      sync.Mutex
	samples []sample
	seq     atomic.Int64
}

func (l *load) submit(cl apipb.CellClient, prefix string) { l.submitDue(cl, prefix, time.Now()) }

// submitDue sends one submit that was due at start.
func (l *load) submitDue(cl apipb.CellClient, prefix string, start time.Time) {
	n := l.seq.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cl.Submit(ctx, &apipb.SubmitRequest{RequestId: fmt.Sprintf("%s-%d", prefix, n), Spec: spec(fmt.Sprintf("%s-%d", prefix, n))})
	s := sample{time.Since(start), code(err)}
	l.mu.Lock()
	l.samples = append(l.samples, s)
	l.mu.Unlock()
}

// stats are the latencies of the calls answered with c.
func (l *load) stats(c codes.Code) (n int, p50, p99, max time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for _, s := range l.samples {
		if s.code == c {
			ds = append(ds, s.took)
		}
	}
	if len(ds) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(ds)
	return len(ds), ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1]
}

func (l *load) codes() map[codes.Code]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[codes.Code]int{}
	for _, s := range l.samples {
		out[s.code]++
	}
	return out
}

// slowLog models a replicated log with a fixed service time per event,
// one batch at a time (a single range's leaseholder): its capacity, not
// this machine's CPU, bounds what the master sustains, so the load
// generator in this process can offer ten times that.
type slowLog struct {
	events.Store
	perEvent time.Duration
	mu       sync.Mutex
}

func (s *slowLog) serve(n int) {
	s.mu.Lock()
	// The sleep is the subject: it is the modelled log's service time.
	time.Sleep(time.Duration(n) * s.perEvent)
	s.mu.Unlock()
}

func (s *slowLog) Append(ctx context.Context, r events.AppendRequest) (events.AppendResult, error) {
	s.serve(len(r.Events))
	return s.Store.Append(ctx, r)
}

func (s *slowLog) AppendMany(ctx context.Context, reqs []events.AppendRequest) ([]events.AppendResult, error) {
	n := 0
	for _, r := range reqs {
		n += len(r.Events)
	}
	s.serve(n)
	return s.Store.AppendMany(ctx, reqs)
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestOverloadAtTenTimesTheSustainableRate measures the rate at which a
// master (SQLite log, mutual TLS) sustains submits, then offers ten times
// that from 20 users for 3 s. The master sheds what it cannot serve with
// ResourceExhausted at once; what it admits keeps a p99 under 1 s (the
// Kubernetes API's objective); its heap grows with the jobs admitted, not
// with the load offered.
//
// Latency is a figure, not an assertion: on a shared machine a timed test
// would fail with its neighbours' load. BenchmarkOverload reports it
// (p99-ms, heap-MiB); the test holds the behaviour: what is shed is shed at
// once with ResourceExhausted, nothing else fails, memory follows the work
// admitted.
func TestOverloadAtTenTimesTheSustainableRate(t *testing.T) {
	r := overload(t)
	if r.okP99 > time.Second {
		t.Logf("admitted requests p99 %v is over the 1 s objective on this run (machine load?)", r.okP99)
	}
}

// BenchmarkOverload reports the p99 of admitted submits at ten times the
// sustainable rate, and the master's heap peak.
func BenchmarkOverload(b *testing.B) {
	for i := 0; i < b.N; i++ {
		r := overload(b)
		b.ReportMetric(float64(r.okP99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(r.shedP99.Microseconds())/1000, "shed-p99-ms")
		b.ReportMetric(r.peakMiB, "heap-MiB")
	}
}

type overloadResult struct {
	okP99, shedP99 time.Duration
	peakMiB        float64
}

func overload(t testing.TB) overloadResult {
	// Sustainable rate, on a master without limits: closed loop, each
	// user waiting for each answer.
	slow := func(s events.Store) events.Store { return &slowLog{Store: s, perEvent: logServiceTime()} }
	sustained := sustainedRate(t, newCell(t, cellOptions{store: slow}))

	// The master under test: at most 32 calls in flight (at the log's
	// capacity that is under 300 ms of waiting), 500/s per user.
	lim := &auth.Limiter{MaxInFlight: 32, Rate: 500, Burst: 100}
	c := newCell(t, cellOptions{limiter: lim, store: slow})
	clients := warmPeople(t, c)

	// Ten times that, offered open loop.
	heapBefore := heapInUse()
	headBefore := c.head()
	stopSampling := sampleHeapPeak()
	over, sent, elapsed, clientFull := offerOpenLoop(clients, 10*sustained, 3*time.Second)
	peak := stopSampling()
	heapAfter := heapInUse()
	admitted := c.head() - headBefore

	okN, okP50, okP99, okMax := over.stats(codes.OK)
	shedN, shedP50, shedP99, _ := over.stats(codes.ResourceExhausted)
	t.Logf("open loop: %d requests due in %v (%.0f/s offered, %.1fx the sustained rate; %d not sent: the client's queue was full)",
		sent, elapsed, float64(sent)/elapsed.Seconds(), float64(sent)/elapsed.Seconds()/sustained, clientFull)
	t.Logf("admitted %d (%.0f/s): p50 %v p99 %v max %v", okN, float64(okN)/elapsed.Seconds(), okP50, okP99, okMax)
	t.Logf("shed with ResourceExhausted %d: p50 %v p99 %v; limiter refusals %d; codes %v", shedN, shedP50, shedP99, lim.Refused.Load(), over.codes())
	t.Logf("heap in use: %.1f MiB before, %.1f MiB peak, %.1f MiB after (%d events appended: %.0f bytes of heap each)",
		mib(heapBefore), mib(peak), mib(heapAfter), admitted, float64(int64(heapAfter)-int64(heapBefore))/float64(max(admitted, 1)))

	if okN == 0 || shedN == 0 {
		t.Fatalf("at 10x the sustained rate want both admitted and shed requests; codes %v", over.codes())
	}
	// Refusals come at once: well before the admitted ones.
	if shedP50 > okP50 {
		t.Errorf("refusals p50 %v, admitted p50 %v: ResourceExhausted must come at once, not after waiting", shedP50, okP50)
	}
	for cd, n := range over.codes() {
		if cd != codes.OK && cd != codes.ResourceExhausted {
			t.Errorf("%d requests failed with %v", n, cd)
		}
	}
	// Memory follows the work admitted: a refused request leaves nothing.
	// Each admitted submit holds a job and a task in the projection (a few
	// KiB with its spec); the shed ones (many more) must not add to that.
	if perEvent := float64(int64(peak)-int64(heapBefore)) / float64(max(admitted, 1)); perEvent > 64<<10 {
		t.Errorf("heap peak grew %.0f bytes per event admitted: the refused requests are being kept", perEvent)
	}
	return overloadResult{okP99: okP99, shedP99: shedP99, peakMiB: mib(peak)}
}

// overloadUsers is how many users the overload test's load comes from.
const overloadUsers = 20

// warmPeople are the users' clients of c, their connections warmed:
// handshakes are not the load.
func warmPeople(t testing.TB, c *cell) []apipb.CellClient {
	clients := make([]apipb.CellClient, overloadUsers)
	for i := range clients {
		clients[i] = c.person(fmt.Sprintf("u%d", i), auth.RoleUser)
		if _, err := clients[i].Status(bg, &apipb.StatusRequest{}); err != nil {
			t.Fatalf("user %d: %v", i, err)
		}
	}
	return clients
}

// sustainedRate is the submits per second that the master of free, without
// limits, sustains in a closed loop: each user waiting for each answer.
func sustainedRate(t testing.TB, free *cell) float64 {
	cal := &load{}
	calFor := 2 * time.Second
	var wg sync.WaitGroup
	start := time.Now()
	for i, cl := range warmPeople(t, free) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < calFor {
				cal.submit(cl, fmt.Sprintf("cal%d", i))
			}
		}()
	}
	wg.Wait()
	calOK, calP50, calP99, _ := cal.stats(codes.OK)
	sustained := float64(calOK) / time.Since(start).Seconds()
	t.Logf("closed loop, %d users: %d admitted in %v: %.0f submits/s sustained, p50 %v p99 %v; codes %v",
		overloadUsers, calOK, calFor, sustained, calP50, calP99, cal.codes())
	if sustained < 10 {
		t.Fatalf("only %.0f submits/s: the master is not serving", sustained)
	}
	return sustained
}

// sampleHeapPeak samples the heap in use every 100 ms until the returned
// stop, which returns the peak seen.
func sampleHeapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()
	return func() uint64 {
		close(stopSampling)
		<-sampled
		return peak.Load()
	}
}

// offerOpenLoop offers submits at rate per second for a while, open loop:
// each request at its time, whether or not the ones before were answered.
// A pool of senders takes the requests in order; a request's latency is
// counted from when it was due, so a sender late for it (the client
// falling behind) counts against the master, never for it. clientFull
// counts the requests not sent because the client's queue was full.
func offerOpenLoop(clients []apipb.CellClient, rate float64, span time.Duration) (over *load, sent int, elapsed time.Duration, clientFull int64) {
	const senders = 256
	over = &load{}
	due := make(chan time.Time, 1<<16)
	var full atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < senders; w++ {
		wg.Add(1)
		go func(cl apipb.CellClient, u int) {
			defer wg.Done()
			for at := range due {
				over.submitDue(cl, fmt.Sprintf("over%d", u), at)
			}
		}(clients[w%len(clients)], w%len(clients))
	}
	// A ticker paces the offer: the load's rate is the point, and each
	// tick queues every request due by then.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for time.Since(start) < span {
		n := int(time.Since(start).Seconds() * rate)
		for ; sent < n; sent++ {
			select {
			case due <- start.Add(time.Duration(float64(sent) / rate * float64(time.Second))):
			default:
				full.Add(1)
			}
		}
		<-tick.C
	}
	close(due)
	elapsed = time.Since(start)
	wg.Wait()
	return over, sent, elapsed, full.Load()
}

// logServiceTime is the modelled log's time per event: 1,000 events/s,
// some 500 submits/s (a submit of one task appends two events); under the
// race detector 200 events/s.
func logServiceTime() time.Duration {
	if raceEnabled {
		return 5 * time.Millisecond
	}
	return time.Millisecond
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// stuckLog blocks every append until released: a log that stopped.
type stuckLog struct {
	events.Store
	stuck   atomic.Bool
	release chan struct{}
}

func (s *stuckLog) AppendMany(ctx context.Context, reqs []events.AppendRequest) ([]events.AppendResult, error) {
	if s.stuck.Load() {
		<-s.release
	}
	return s.Store.AppendMany(ctx, reqs)
}

// TestWriteQueueFullAnswersAtOnce: with the log stuck, the master's write
// queue (4,096 commands) fills; every command past it is refused with
// ResourceExhausted at once instead of waiting in line, and the queued ones
// complete once the log moves again.
func TestWriteQueueFullAnswersAtOnce(t *testing.T) {
	var log *stuckLog
	c := newCell(t, cellOptions{store: func(s events.Store) events.Store {
		log = &stuckLog{Store: s, release: make(chan struct{})}
		return log
	}})
	log.stuck.Store(true)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(log.release) }) }
	// Runs before the cell's own cleanup, so a failed test does not leave
	// the master's writer stuck in the log for ever.
	t.Cleanup(release)
	const n = 5000
	// The writer holds up to one group commit (512 commands by default) out
	// of the queue while the log is stuck, and how many it took depends on
	// timing: at least n - 4096 - 512 commands are refused.
	const wantRefused = n - 4096 - 512
	type result struct {
		took time.Duration
		err  error
	}
	results := make(chan result, n)
	for i := 0; i < n; i++ {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			_, err := c.m.Do(ctx, commands.SubmitJob{Meta: commands.Meta{Actor: commands.Actor{User: "u"}}, Spec: spec(fmt.Sprintf("q%d", i))})
			results <- result{time.Since(start), err}
		}()
	}
	refused := 0
	deadline := time.After(10 * time.Second)
	for refused < wantRefused {
		select {
		case r := <-results:
			if commands.CodeOf(r.err) != commands.ResourceExhausted || !strings.Contains(r.err.Error(), "write queue is full") {
				t.Fatalf("with the log stuck a command ended with %v", r.err)
			}
			if r.took > time.Second {
				t.Errorf("a refusal took %v", r.took)
			}
			refused++
		case <-deadline:
			t.Fatalf("only %d commands refused; want at least %d", refused, wantRefused)
		}
	}
	release()
	for i := refused; i < n; i++ {
		if r := <-results; r.err != nil && commands.CodeOf(r.err) != commands.ResourceExhausted {
			t.Errorf("a queued command: %v", r.err)
		}
	}
}
