package projections_test

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/golden"
	"github.com/corralhq/corral/events/memstore"
	"github.com/corralhq/corral/projections"
)

// bigHistory is a cell of 2,000 machines run for 1,000,000 events (the
// large history internal/history's histgen writes, run by the first
// benchmark that needs it), in a memstore with a checkpoint every 100,000 events (the
// default policy). Built once per process: it takes tens of seconds.
var (
	bigOnce  sync.Once
	bigStore *memstore.Store
	bigLog   []events.Event // as simulated, positioned
)

const (
	bigEvents    = 1_000_000
	largeHistory = "testdata/histories/large-1.jsonl.gz"
)

func bigHistory(b *testing.B) *memstore.Store {
	bigOnce.Do(func() {
		ctx := context.Background()
		log, err := largeHistoryLog()
		if err != nil {
			b.Fatal(err)
		}
		if len(log) < bigEvents {
			b.Fatalf("%s has %d events, not %d", largeHistory, len(log), bigEvents)
		}
		log = log[:bigEvents]
		bigLog = log
		var clock time.Time
		store := memstore.NewLog().Open(func() time.Time { return clock })
		s := projections.New()
		cp := projections.NewCheckpointer(store, projections.DefaultCheckpointPolicy, func() time.Time { return clock }, 0)
		for i := 0; i < len(log); i += 10_000 {
			chunk := log[i:min(i+10_000, len(log))]
			clock = chunk[len(chunk)-1].RecordedAt
			// The store positions what it appends, as a real one does.
			unpositioned := make([]events.Event, len(chunk))
			for j, e := range chunk {
				e.Position = 0
				unpositioned[j] = e
			}
			if _, err := store.Append(ctx, events.AppendRequest{ExpectedPosition: int64(i), Events: unpositioned}); err != nil {
				panic(err)
			}
			for _, e := range chunk {
				if err := projections.Apply(s, e); err != nil {
					panic(err)
				}
			}
			if _, _, err := cp.Maybe(ctx, s); err != nil {
				panic(err)
			}
		}
		bigStore = store
	})
	return bigStore
}

// largeHistoryLog reads the large history from testdata, running histgen
// to write it first when it is not there (it is not committed: tens of
// megabytes). histgen runs as its own process because the history comes
// out of the commands' decider, which no test of the fold imports.
func largeHistoryLog() ([]events.Event, error) {
	if _, err := os.Stat(largeHistory); errors.Is(err, fs.ErrNotExist) {
		out, err := filepath.Abs(largeHistory)
		if err != nil {
			return nil, err
		}
		gen := exec.Command("go", "run", "./internal/history/histgen", "-o", out)
		gen.Dir = ".."
		if msg, err := gen.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("writing %s with histgen: %v\n%s", largeHistory, err, msg)
		}
	}
	return golden.ReadFile(largeHistory)
}

// BenchmarkApply folds the events of the simulated history, one per op.
func BenchmarkApply(b *testing.B) {
	bigHistory(b)
	log := bigLog
	s := projections.New()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	i := 0
	for b.Loop() {
		if i == len(log) {
			b.StopTimer()
			s, i = projections.New(), 0
			b.StartTimer()
		}
		if err := projections.Apply(s, log[i]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	reportPerCPU(b, cpu, float64(b.N))
}

// reportPerCPU reports events per CPU-second of the process since cpu: on
// a shared machine, wall-clock rates measure the neighbours as much as
// the code.
func reportPerCPU(b *testing.B, cpu time.Duration, events float64) {
	if used := processCPU() - cpu; used > 0 {
		b.ReportMetric(events/used.Seconds(), "events/cpu-s")
	}
}

// BenchmarkReplay rebuilds the state from the whole 1,000,000-event log,
// reading it from the store in batches, no checkpoint: one replay per op.
func BenchmarkReplay(b *testing.B) {
	store := bigHistory(b)
	ctx := context.Background()
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		s := projections.New()
		if err := projections.Replay(ctx, store, s, bigEvents); err != nil || s.Position != bigEvents {
			b.Fatal(err, s.Position)
		}
	}
	b.ReportMetric(float64(b.N*bigEvents)/b.Elapsed().Seconds(), "events/s")
	reportPerCPU(b, cpu, float64(b.N*bigEvents))
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/replay")
}

// BenchmarkStateAt rebuilds the state at a point of the 1,000,000-event
// history: "random" at uniformly random positions, "worst" just before a
// checkpoint (decode the previous one, replay 99,999 events).
func BenchmarkStateAt(b *testing.B) {
	store := bigHistory(b)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		pos  func(*rand.Rand) int64
	}{
		{"random", func(r *rand.Rand) int64 { return 1 + r.Int64N(bigEvents) }},
		{"worst", func(*rand.Rand) int64 { return bigEvents - 1 }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				p := tc.pos(rng)
				s, err := projections.StateAt(ctx, store, p)
				if err != nil || s.Position != p {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/state")
		})
	}
}

// bigCell folds a cell of 10,000 machines and 100,000 running tasks (5,000
// jobs of 20) with usage and reservations, straight from events.
func bigCell(tb testing.TB) *projections.State {
	s := projections.New()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	apply := func(p events.Payload) {
		if err := projections.Apply(s, events.Event{OccurredAt: at, Data: p}); err != nil {
			tb.Fatal(err)
		}
	}
	const machines, jobs, tasksPerJob = 10_000, 5_000, 20
	for i := range machines {
		apply(&events.MachineRegistered{Machine: fmt.Sprintf("m%05d", i), Address: fmt.Sprintf("10.%d.%d.%d:7000", i/65536, i/256%256, i%256),
			Capacity:   &events.Resources{CpuMilli: 32000, MemoryBytes: 128 << 30, DiskBytes: 2 << 40, Ports: 1000},
			Attributes: map[string]string{"rack": fmt.Sprintf("r%03d", i/200), "arch": "amd64", "kernel": "6.8.0"}})
	}
	for j := range jobs {
		user, name := fmt.Sprintf("u%03d", j%200), fmt.Sprintf("job-%04d", j)
		apply(&events.JobSubmitted{SpecVersion: 1, Spec: &events.JobSpec{Name: name, User: user, Priority: int32(j % 12), TaskCount: tasksPerJob,
			Command: "/usr/bin/server", Args: []string{"--port=$PORT_HTTP", "--shards=20"}, Env: map[string]string{"MODE": "prod"},
			Labels:    map[string]string{"team": fmt.Sprintf("t%02d", j%40), "tier": "prod"},
			Resources: &events.Resources{CpuMilli: 500, MemoryBytes: 1 << 30, Ports: 1}, PortNames: []string{"http"}}})
		for i := range int32(tasksPerJob) {
			m := fmt.Sprintf("m%05d", (j*tasksPerJob+int(i))%machines)
			apply(&events.TaskSubmitted{User: user, Job: name, Index: i, SpecVersion: 1, Reason: "new"})
			apply(&events.TaskScheduled{User: user, Job: name, Index: i, Machine: m, SpecVersion: 1, Ports: []int32{20000 + int32(j%900)}})
			apply(&events.TaskStarted{User: user, Job: name, Index: i, Machine: m, Pid: int64(j*100 + int(i))})
			apply(&events.UsageReported{Machine: m, WindowStartUs: 1, WindowEndUs: 300_000_001, Tasks: []*events.TaskUsage{
				{User: user, Job: name, Index: i, CpuCoreSeconds: 30, MemoryBytes: 300 << 20, MemoryMaxBytes: 400 << 20}}})
			apply(&events.ReservationEstimated{Machine: m, Tasks: []*events.TaskReservation{{User: user, Job: name, Index: i,
				Reservation: &events.Resources{CpuMilli: 200, MemoryBytes: 460 << 20, Ports: 1}}}})
		}
	}
	if s.Skipped != 0 {
		tb.Fatalf("%d skipped", s.Skipped)
	}
	return s
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkCellHeap measures the heap the projection of 10,000 machines and
// 100,000 tasks holds.
func BenchmarkCellHeap(b *testing.B) {
	var mib float64
	for b.Loop() {
		before := heapInUse()
		s := bigCell(b)
		mib = float64(heapInUse()-before) / (1 << 20)
		runtime.KeepAlive(s)
	}
	b.ReportMetric(mib, "heap-MiB")
	if mib > 1024 {
		b.Fatalf("%.0f MiB, more than 1 GiB", mib)
	}
}

// BenchmarkCheckpointCodec encodes and decodes the 10,000-machine,
// 100,000-task cell with the hand-written codec, and with gob over a mirror
// of the same fields for comparison.
func BenchmarkCheckpointCodec(b *testing.B) {
	s := bigCell(b)
	b.Run("handwritten/encode", func(b *testing.B) {
		var n int
		for b.Loop() {
			n = len(projections.Encode(s))
		}
		b.ReportMetric(float64(n)/(1<<20), "MiB")
	})
	enc := projections.Encode(s)
	b.Run("handwritten/decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := projections.Decode(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	mirror := gobMirror(s)
	b.Run("gob/encode", func(b *testing.B) {
		var n int
		for b.Loop() {
			var buf bytes.Buffer
			if err := gob.NewEncoder(&buf).Encode(mirror); err != nil {
				b.Fatal(err)
			}
			n = buf.Len()
		}
		b.ReportMetric(float64(n)/(1<<20), "MiB")
	})
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(mirror); err != nil {
		b.Fatal(err)
	}
	b.Run("gob/decode", func(b *testing.B) {
		for b.Loop() {
			var m gobState
			if err := gob.NewDecoder(bytes.NewReader(buf.Bytes())).Decode(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// gobState mirrors the primary fields of machines, jobs and tasks: the bulk
// of a checkpoint (quotas and alloc sets left out).
type gobState struct {
	Position int64
	Machines []gobMachine
	Jobs     []gobJob
}

type gobMachine struct {
	Name, Address, Reason string
	Capacity              projections.Resources
	Attributes            map[string]string
	PortBase              int32
	State                 projections.MachineState
	Draining              bool
	Version               int64
}

type gobJob struct {
	User, Name, EndReason string
	Versions              []gobVersion
	Current               int64
	End                   projections.JobEnd
	Tasks                 []gobTask
}

type gobVersion struct {
	Version int64
	Spec    *events.JobSpec
}

type gobTask struct {
	Index                          int32
	State                          projections.TaskState
	End                            projections.TaskEnd
	Reason, Machine, Signal        string
	SpecVersion, Pid, SinceUS, Seq int64
	AllocIndex, Restarts, ExitCode int32
	Ports                          []int32
	Reservation                    projections.Resources
	Usage                          projections.Usage
	Replacing                      bool
}

func gobMirror(s *projections.State) gobState {
	m := gobState{Position: s.Position}
	for _, x := range s.SortedMachines() {
		m.Machines = append(m.Machines, gobMachine{x.Name, x.Address, x.Reason, x.Capacity, x.Attributes, x.PortBase, x.State, x.Draining, x.Version})
	}
	for _, j := range s.SortedJobs() {
		g := gobJob{User: j.User, Name: j.Name, EndReason: j.EndReason, Current: j.Current, End: j.End}
		for _, v := range j.Versions {
			g.Versions = append(g.Versions, gobVersion{v.Version, v.Spec})
		}
		for _, t := range j.Tasks {
			g.Tasks = append(g.Tasks, gobTask{t.Index, t.State, t.End, t.Reason, t.Machine, t.Signal, t.SpecVersion, t.Pid, t.SinceUS, t.Seq,
				t.AllocIndex, t.Restarts, t.ExitCode, t.Ports, t.Reservation, t.Usage, t.Replacing})
		}
		m.Jobs = append(m.Jobs, g)
	}
	return m
}
