package master_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentsim"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

// helperFleetEnv makes the test binary serve a fleet of simulated agents
// (TestHelperFleet): the link's benchmark runs them in a process of their
// own, so the master's CPU use is measured alone.
const helperFleetEnv = "CORRAL_LINK_TEST_FLEET"

// TestHelperFleet is not a test: run with helperFleetEnv set to a number of
// machines, it serves that many simulated agents behind one loopback port
// until SIGTERM.
func TestHelperFleet(t *testing.T) {
	raw := os.Getenv(helperFleetEnv)
	if raw == "" {
		return
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet size:", err)
		os.Exit(2)
	}
	f, err := agentsim.NewFleet(n, nil)
	if err == nil {
		err = f.ServeShared()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
	fmt.Println("LISTEN", f.Addrs[0])
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	f.Close()
	os.Exit(0)
}

// startFleet serves n simulated agents, named sim-<i>, in a child process.
func startFleet(b *testing.B, n int) (addr string, pid int) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFleet$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", helperFleetEnv, n))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("fleet: %v", err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "LISTEN ")), cmd.Process.Pid
}

// cpuSeconds is the CPU time (user and system) a process has used so far.
func cpuSeconds(pid int) float64 {
	if pid == os.Getpid() {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, after, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(after) // f[0] is field 3 (state): utime is field 14, stime 15
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// benchStore is an SQLite log, as under `corral up`.
func benchStore(b *testing.B) events.Store {
	s, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "events.db"), sqlitestore.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkLink: one master polls simulated agents over real gRPC on
// loopback at a 2 s interval, each machine running one task. The agents run
// in a child process. After every task runs, it measures three intervals:
// the 95th percentile of the time between two answered polls of a machine
// (p95-interval-s; Borg: under 10 s), the master process's CPU use
// (cpu-cores) and the agents' (agents-cores).
//
//	go test -run '^$' -bench BenchmarkLink -benchtime 1x ./commands/master/
func BenchmarkLink(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) { benchmarkLink(b, n) })
	}
}

func benchmarkLink(b *testing.B, n int) {
	const interval = 2 * time.Second
	addr, fleetPid := startFleet(b, n)
	store := benchStore(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stats := &master.LinkStats{}
	m, err := master.New(ctx, master.Config{Name: "master1", Store: store, Admins: []string{"root"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnLeading: []func(context.Context, *master.Master){
			master.SchedulerLoop(master.SchedulerConfig{}),
			master.Link(master.LinkConfig{Cell: "bench", Interval: interval, Stats: stats, Concurrency: benchConcurrency()}),
		}})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testkit.Eventually(b, 30*time.Second, "the master leads", func() (bool, string) { return m.Leading(), "not leading" })
	registerSimMachines(ctx, b, m, n, addr)
	spec := &events.JobSpec{Name: "fill", TaskCount: int32(n), Command: "/srv/app", Resources: &events.Resources{CpuMilli: 1000, MemoryBytes: gib}}
	if _, err := m.Do(ctx, commands.SubmitJob{Meta: commands.Meta{Actor: commands.Actor{User: "alice"}}, Spec: spec}); err != nil {
		b.Fatal(err)
	}
	setup := time.Now()
	testkit.Eventually(b, 5*time.Minute, "every task running", func() (bool, string) {
		var started int
		m.View(func(s *projections.State) {
			for _, t := range s.Jobs[projections.JobKey{User: "alice", Name: "fill"}].Tasks {
				if t != nil && t.State == projections.TaskRunning {
					started++
				}
			}
		})
		return started == n, fmt.Sprintf("%d of %d tasks running", started, n)
	})
	b.Logf("%d machines registered and %d tasks running in %s", n, n, time.Since(setup).Round(time.Millisecond))
	// One interval to settle (every machine polled once more), then
	// measure three.
	settled := len(stats.Snapshot())
	testkit.Eventually(b, 10*interval+time.Minute, "every machine polled once more", func() (bool, string) {
		got := len(stats.Snapshot()) - settled
		return got >= n, fmt.Sprintf("%d of %d polled", got, n)
	})
	before := len(stats.Snapshot())
	failures := stats.Failures.Load()
	reports, unchanged := stats.Reports.Load(), stats.Unchanged.Load()
	cpu0, fleet0 := cpuSeconds(os.Getpid()), cpuSeconds(fleetPid)
	if path := os.Getenv("CORRAL_LINKBENCH_CPUPROFILE"); path != "" {
		// The measured window only, not the setup.
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	b.ResetTimer()
	start := time.Now()
	// The sleep is the subject: the measured window is three of the link's
	// intervals, whatever happens in them.
	time.Sleep(3 * interval)
	wall := time.Since(start).Seconds()
	b.StopTimer()
	cpu, fleet := cpuSeconds(os.Getpid())-cpu0, cpuSeconds(fleetPid)-fleet0
	ivs := stats.Snapshot()[before:]
	b.ReportMetric(percentile(ivs, 0.95).Seconds(), "p95-interval-s")
	b.ReportMetric(percentile(ivs, 0.5).Seconds(), "p50-interval-s")
	b.ReportMetric(cpu/wall, "cpu-cores")
	b.ReportMetric(fleet/wall, "agents-cores")
	b.ReportMetric(float64(len(ivs))/wall, "polls/s")
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ru.Maxrss)/1024, "master-maxrss-MiB")
	b.Logf("%d polls measured, %d failed, %d reports written, %d unchanged skipped", len(ivs), stats.Failures.Load()-failures,
		stats.Reports.Load()-reports, stats.Unchanged.Load()-unchanged)
}

// registerSimMachines registers n simulated machines at addr from many
// goroutines, so that the writer batches them.
func registerSimMachines(ctx context.Context, b *testing.B, m *master.Master, n int, addr string) {
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := m.Do(ctx, commands.RegisterMachine{Meta: root, Machine: fmt.Sprintf("sim-%d", i), Address: addr,
					Capacity: projections.Resources{CPUMilli: 32000, MemoryBytes: 128 * gib, DiskBytes: 1024 * gib, Ports: 10000}, PortBase: 20000}); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
}

// BenchmarkTaskStartLatency: submission to process running on one machine,
// through the whole path: gRPC Submit, the scheduler's pass, the link's
// poll, the agent's start (in a container where cgroups are writable), the
// task's own first instruction (it creates a file). Reports the median
// (p50-ms) and the 95th percentile (p95-ms).
//
//	go test -run '^$' -bench BenchmarkTaskStartLatency -benchtime 50x ./commands/master/
func BenchmarkTaskStartLatency(b *testing.B) {
	store := benchStore(b)
	dir := b.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	stats := &master.LinkStats{}
	m, err := master.New(ctx, master.Config{Name: "master1", Advertise: lis.Addr().String(), Store: store, Admins: []string{"root"}, Logger: quiet,
		OnLeading: []func(context.Context, *master.Master){
			master.SchedulerLoop(master.SchedulerConfig{}),
			master.Link(master.LinkConfig{Cell: "bench", Stats: stats}),
		}})
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	api.NewService(m).Register(g)
	master.NewAgentRegistry(m, "bench", 0).Attach(g)
	go g.Serve(lis)
	defer g.Stop()
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	top := fmt.Sprintf("corral-linkbench-%d", os.Getpid())
	b.Cleanup(func() { testkit.RemoveCgroups(b, top) })
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		err := agent.Run(ctx, agent.Config{Name: "m0", Masters: []string{lis.Addr().String()}, ListenAddr: "127.0.0.1:0", DataDir: filepath.Join(dir, "m0"),
			CgroupParent: top + "/m0", Capacity: &events.Resources{CpuMilli: 2000, MemoryBytes: 4 << 30},
			MemoryLowWater: -1, Logger: quiet})
		if err != nil && ctx.Err() == nil {
			b.Error(err)
		}
	}()
	defer func() { cancel(); <-agentDone }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := apipb.NewCellClient(conn)
	testkit.Eventually(b, 20*time.Second, "the agent registers and is polled", func() (bool, string) {
		var up bool
		m.View(func(s *projections.State) { up = s.Machines["m0"] != nil })
		return up && stats.Polls.Load() > 0, fmt.Sprintf("registered %v, %d polls", up, stats.Polls.Load())
	})

	var lat []time.Duration
	// A fine ticker polls for the task's marker: its period bounds how
	// precisely the latency is measured.
	tick := time.NewTicker(100 * time.Microsecond)
	defer tick.Stop()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		marker := filepath.Join(dir, fmt.Sprintf("ran-%d", i))
		spec := &events.JobSpec{Name: fmt.Sprintf("touch-%d", i), TaskCount: 1, Command: "touch", Args: []string{marker},
			Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 20}, Restart: &events.RestartPolicy{Mode: "never"}}
		begin := time.Now()
		if _, err := client.Submit(as("alice"), &apipb.SubmitRequest{RequestId: spec.Name, Spec: spec}); err != nil {
			b.Fatal(err)
		}
		if !awaitFile(marker, begin.Add(30*time.Second), tick) {
			b.Fatalf("task %d never ran", i)
		}
		lat = append(lat, time.Since(begin))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5))/1e6, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.95))/1e6, "p95-ms")
}

// awaitFile looks for path at each tick until deadline, and reports
// whether it appeared.
func awaitFile(path string, deadline time.Time, tick *time.Ticker) bool {
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		<-tick.C
	}
	_, err := os.Stat(path)
	return err == nil
}

func benchConcurrency() int {
	n, _ := strconv.Atoi(os.Getenv("CORRAL_LINKBENCH_CONCURRENCY"))
	return n
}
