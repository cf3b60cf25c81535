package infrastore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/sqlitestore"
)

// t0 is the fixed clock every test cell starts at.
var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// simulate returns a seeded, plausible history of a cell: machines that come
// and go, jobs of several users and bands whose tasks are submitted,
// scheduled (with preemptions), started, evicted, restarted, updated, and
// finish or are killed, with usage windows and reservation estimates. Events
// are in time order, as a master would append them.
func simulate(seed uint64, jobs int) []events.Event {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	type timed struct {
		at  time.Time
		seq int
		ev  events.Event
	}
	var out []timed
	add := func(at time.Time, stream string, p events.Payload) {
		out = append(out, timed{at, len(out), events.New(stream, at, p)})
	}
	const machines = 20
	for i := range machines {
		name := fmt.Sprintf("m%02d", i)
		add(t0, events.MachineStream(name), &events.MachineRegistered{
			Machine: name, Address: fmt.Sprintf("10.0.0.%d:7070", i),
			Capacity:   &events.Resources{CpuMilli: 32000, MemoryBytes: 128 << 30, DiskBytes: 1 << 40, Ports: 1000},
			Attributes: map[string]string{"rack": fmt.Sprintf("r%d", i%4)},
		})
	}
	// A few machine incidents.
	add(t0.Add(3*time.Hour), events.MachineStream("m03"), &events.MachineDrainSet{Machine: "m03", Draining: true, Reason: "kernel upgrade"})
	add(t0.Add(5*time.Hour), events.MachineStream("m07"), &events.MachineDown{Machine: "m07", Reason: "missed polls", MissedPolls: 3})
	add(t0.Add(6*time.Hour), events.MachineStream("m07"), &events.MachineUp{Machine: "m07"})
	add(t0.Add(9*time.Hour), events.MachineStream("m19"), &events.MachineRemoved{Machine: "m19", Reason: "decommissioned"})

	users := []string{"alice", "bob", "carol", "dave"}
	teams := []string{"search", "ads", "infra"}
	priorities := []int32{0, 1, 3, 4, 6, 9, 10, 11}
	for j := range jobs {
		user := users[j%len(users)]
		name := fmt.Sprintf("job%03d", j)
		start := t0.Add(time.Duration(j)*7*time.Minute + time.Duration(rng.IntN(60))*time.Second)
		count := int32(1 + rng.IntN(6))
		spec := &events.JobSpec{
			Name: name, User: user, Priority: priorities[rng.IntN(len(priorities))], TaskCount: count,
			Labels:    map[string]string{"team": teams[rng.IntN(len(teams))]},
			Command:   "/bin/serve",
			Resources: &events.Resources{CpuMilli: int64(250 * (1 + rng.IntN(8))), MemoryBytes: int64(1+rng.IntN(8)) << 28, DiskBytes: 1 << 30},
		}
		if rng.IntN(3) == 0 {
			spec.Overrides = map[int32]*events.TaskOverride{0: {Resources: &events.Resources{CpuMilli: 4000, MemoryBytes: 4 << 30, DiskBytes: 2 << 30}}}
		}
		js := events.JobStream(user, name)
		add(start, js, &events.JobSubmitted{Spec: spec, SpecVersion: 1})
		version := int64(1)
		placed := map[int32]string{}
		for i := range count {
			ts := events.TaskStream(user, name, i)
			at := start.Add(time.Duration(i) * time.Second)
			add(at, ts, &events.TaskSubmitted{User: user, Job: name, Index: i, SpecVersion: 1, Reason: "new"})
			m := fmt.Sprintf("m%02d", rng.IntN(machines-1))
			placed[i] = m
			var preempted []*events.TaskRef
			if rng.IntN(10) == 0 {
				preempted = []*events.TaskRef{{User: "zed", Job: "filler", Index: int32(rng.IntN(9))}}
			}
			add(at.Add(200*time.Millisecond), ts, &events.TaskScheduled{User: user, Job: name, Index: i, Machine: m, SpecVersion: 1,
				Score: float64(rng.IntN(1000)) / 10, MachinesExamined: int32(5 + rng.IntN(machines)), Preempted: preempted, MachineVersion: int64(rng.IntN(50))})
			add(at.Add(time.Second), ts, &events.TaskStarted{User: user, Job: name, Index: i, Machine: m, Pid: int64(1000 + j*10 + int(i))})
		}
		windows := 2 + rng.IntN(6)
		end := start.Add(time.Duration(windows) * 5 * time.Minute)
		for w := range windows {
			ws := start.Add(time.Duration(w) * 5 * time.Minute)
			we := ws.Add(5 * time.Minute)
			byMachine := map[string][]*events.TaskUsage{}
			for i := range count {
				byMachine[placed[i]] = append(byMachine[placed[i]], &events.TaskUsage{
					User: user, Job: name, Index: i,
					CpuCoreSeconds: float64(rng.IntN(300000)) / 1000, MemoryBytes: int64(rng.IntN(1 << 28)),
					MemoryMaxBytes: int64(1 << 28), DiskBytes: int64(rng.IntN(1 << 26)),
				})
			}
			for _, m := range sortedKeys(byMachine) {
				add(we, events.MachineStream(m), &events.UsageReported{Machine: m, WindowStartUs: ws.UnixMicro(), WindowEndUs: we.UnixMicro(), Tasks: byMachine[m]})
			}
			if w == 0 && rng.IntN(2) == 0 {
				// The master's estimate decays below the limit.
				i := int32(rng.IntN(int(count)))
				add(we.Add(time.Second), events.MachineStream(placed[i]), &events.ReservationEstimated{Machine: placed[i], Tasks: []*events.TaskReservation{{
					User: user, Job: name, Index: i, Reservation: &events.Resources{CpuMilli: 100, MemoryBytes: 1 << 27, DiskBytes: 1 << 29},
				}}})
			}
			if w == 1 && rng.IntN(3) == 0 {
				// A rolling update to version 2.
				version = 2
				upd := &events.JobSpec{Name: name, User: user, Priority: spec.Priority, TaskCount: count, Labels: spec.Labels, Command: "/bin/serve2",
					Resources: &events.Resources{CpuMilli: spec.Resources.CpuMilli * 2, MemoryBytes: spec.Resources.MemoryBytes, DiskBytes: 1 << 30}}
				add(we.Add(2*time.Second), js, &events.JobUpdated{Spec: upd, SpecVersion: 2, PreviousVersion: 1, RestartNeeded: true})
				for i := range count {
					add(we.Add(3*time.Second), events.TaskStream(user, name, i), &events.TaskUpdated{User: user, Job: name, Index: i, SpecVersion: 2, Running: true, RestartNeeded: true})
				}
				add(we.Add(4*time.Second), js, &events.JobUpdateCommitted{User: user, Job: name, SpecVersion: 2})
			}
			if w == 1 && rng.IntN(4) == 0 {
				// An eviction, then the task goes back to pending and lands elsewhere.
				i := int32(rng.IntN(int(count)))
				ts := events.TaskStream(user, name, i)
				at := we.Add(10 * time.Second)
				add(at, ts, &events.TaskEvicted{User: user, Job: name, Index: i, Machine: placed[i], Reason: "preempted"})
				add(at, ts, &events.TaskSubmitted{User: user, Job: name, Index: i, SpecVersion: version, Reason: "rescheduled"})
				placed[i] = fmt.Sprintf("m%02d", rng.IntN(machines-1))
				add(at.Add(time.Second), ts, &events.TaskScheduled{User: user, Job: name, Index: i, Machine: placed[i], SpecVersion: version, Score: 1, MachinesExamined: 3})
			}
			if w == 0 && rng.IntN(5) == 0 {
				i := int32(rng.IntN(int(count)))
				add(we.Add(20*time.Second), events.TaskStream(user, name, i), &events.TaskFailed{User: user, Job: name, Index: i, Machine: placed[i], ExitCode: 1, Restarts: 1, WillRestart: true, Message: "exit 1"})
			}
		}
		if rng.IntN(4) == 0 {
			add(end, js, &events.JobKilled{User: user, Job: name, Reason: "user request"})
			for i := range count {
				add(end.Add(time.Second), events.TaskStream(user, name, i), &events.TaskKilled{User: user, Job: name, Index: i, Machine: placed[i], Reason: "job killed"})
			}
		} else {
			for i := range count {
				add(end, events.TaskStream(user, name, i), &events.TaskFinished{User: user, Job: name, Index: i, Machine: placed[i]})
			}
			add(end.Add(time.Second), js, &events.JobFinished{User: user, Job: name})
		}
	}
	add(t0.Add(time.Minute), events.CellStream, &events.LeaderElected{Holder: "master-0", Epoch: 1, Address: "10.0.0.1:7000"})
	add(t0.Add(2*time.Minute), events.QuotaStream("alice"), &events.QuotaSet{User: "alice", Band: "production", Resources: &events.Resources{CpuMilli: 100000}})
	sort.SliceStable(out, func(a, b int) bool { return out[a].at.Before(out[b].at) })
	evs := make([]events.Event, len(out))
	for i, o := range out {
		evs[i] = o.ev
		evs[i].Actor = "corral-master"
	}
	return evs
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// appendAll appends evs to store in requests of up to 500 events.
func appendEvents(t testing.TB, ctx context.Context, store events.Store, evs []events.Event) {
	t.Helper()
	for len(evs) > 0 {
		n := min(len(evs), 500)
		if _, err := store.Append(ctx, events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: evs[:n]}); err != nil {
			t.Fatalf("append: %v", err)
		}
		evs = evs[n:]
	}
}

// newSQLiteLog opens a fresh SQLite event log holding evs.
func newSQLiteLog(t testing.TB, evs []events.Event) *sqlitestore.Store {
	t.Helper()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "log.sqlite"), sqlitestore.Options{
		Clock:        func() time.Time { return t0 },
		PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	appendEvents(t, ctx, store, evs)
	return store
}

// openStore opens a fresh infrastore file.
func openStore(t testing.TB, opts Options) *Infrastore {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "infra.duckdb"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// queryInt runs a query returning one integer through the internal
// connection (tests only).
func queryInt(t testing.TB, s *Infrastore, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
