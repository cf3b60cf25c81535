package infrastore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
)

const gib = int64(1) << 30

func at(d time.Duration) time.Time { return t0.Add(d) }

// scenario is a small hand-made history whose derived rows are worked out
// by hand below.
func scenario() []events.Event {
	web := &events.JobSpec{Name: "web", User: "alice", Priority: 9, TaskCount: 2, Labels: map[string]string{"team": "search"},
		Resources: &events.Resources{CpuMilli: 1000, MemoryBytes: 2 * gib, DiskBytes: 10 * gib},
		Overrides: map[int32]*events.TaskOverride{1: {Resources: &events.Resources{CpuMilli: 2000, MemoryBytes: 4 * gib, DiskBytes: 10 * gib}}}}
	web2 := &events.JobSpec{Name: "web", User: "alice", Priority: 9, TaskCount: 2, Labels: map[string]string{"team": "ads"},
		Resources: &events.Resources{CpuMilli: 3000, MemoryBytes: 2 * gib, DiskBytes: 10 * gib}}
	win := func(start, end time.Duration, machine string, us ...*events.TaskUsage) *events.UsageReported {
		return &events.UsageReported{Machine: machine, WindowStartUs: at(start).UnixMicro(), WindowEndUs: at(end).UnixMicro(), Tasks: us}
	}
	web0, web1 := events.TaskStream("alice", "web", 0), events.TaskStream("alice", "web", 1)
	cap := &events.Resources{CpuMilli: 16000, MemoryBytes: 64 * gib, DiskBytes: 1000 * gib}
	return []events.Event{
		events.New(events.MachineStream("m1"), at(0), &events.MachineRegistered{Machine: "m1", Capacity: cap, Attributes: map[string]string{"rack": "a"}}),
		events.New(events.MachineStream("m2"), at(0), &events.MachineRegistered{Machine: "m2", Capacity: cap}),
		events.New(events.JobStream("alice", "web"), at(time.Minute), &events.JobSubmitted{Spec: web, SpecVersion: 1}),
		events.New(web0, at(time.Minute), &events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1, Reason: "new"}),
		events.New(web1, at(time.Minute), &events.TaskSubmitted{User: "alice", Job: "web", Index: 1, SpecVersion: 1, Reason: "new"}),
		events.New(web0, at(2*time.Minute), &events.TaskScheduled{User: "alice", Job: "web", Index: 0, Machine: "m1", SpecVersion: 1, Score: 0.5, MachinesExamined: 2}),
		events.New(web1, at(2*time.Minute), &events.TaskScheduled{User: "alice", Job: "web", Index: 1, Machine: "m2", SpecVersion: 1, Score: 0.25, MachinesExamined: 2,
			Preempted: []*events.TaskRef{{User: "bob", Job: "batch", Index: 3}}}),
		// Hour 1: task 0 used half its core, 1 GiB of its 2, 1 GiB of disk.
		events.New(events.MachineStream("m1"), at(time.Hour), win(0, time.Hour, "m1", &events.TaskUsage{User: "alice", Job: "web", Index: 0, CpuCoreSeconds: 1800, MemoryBytes: gib, DiskBytes: gib})),
		// Task 1 runs with its override: 2 cores, 4 GiB.
		events.New(events.MachineStream("m2"), at(time.Hour), win(0, time.Hour, "m2", &events.TaskUsage{User: "alice", Job: "web", Index: 1, CpuCoreSeconds: 3600, MemoryBytes: 2 * gib, DiskBytes: 2 * gib})),
		// The reservation of task 0 decays to half a core and 1 GiB.
		events.New(events.MachineStream("m1"), at(time.Hour), &events.ReservationEstimated{Machine: "m1", Tasks: []*events.TaskReservation{{User: "alice", Job: "web", Index: 0,
			Reservation: &events.Resources{CpuMilli: 500, MemoryBytes: gib, DiskBytes: gib}}}}),
		events.New(events.MachineStream("m1"), at(90*time.Minute), win(time.Hour, 90*time.Minute, "m1", &events.TaskUsage{User: "alice", Job: "web", Index: 0, CpuCoreSeconds: 900, MemoryBytes: gib / 2, DiskBytes: gib})),
		// Version 2 triples the core; the reservation starts again at the limit.
		events.New(events.JobStream("alice", "web"), at(2*time.Hour), &events.JobUpdated{Spec: web2, SpecVersion: 2, PreviousVersion: 1, RestartNeeded: true}),
		events.New(web0, at(2*time.Hour), &events.TaskUpdated{User: "alice", Job: "web", Index: 0, SpecVersion: 2, Running: true}),
		events.New(events.MachineStream("m1"), at(3*time.Hour), win(2*time.Hour, 3*time.Hour, "m1", &events.TaskUsage{User: "alice", Job: "web", Index: 0, CpuCoreSeconds: 7200, MemoryBytes: gib, DiskBytes: gib})),
		// Usage of a job the store never saw.
		events.New(events.MachineStream("m2"), at(3*time.Hour), win(2*time.Hour, 3*time.Hour, "m2", &events.TaskUsage{User: "bob", Job: "ghost", Index: 0, CpuCoreSeconds: 360, MemoryBytes: gib})),
		events.New(web1, at(4*time.Hour), &events.TaskFinished{User: "alice", Job: "web", Index: 1, Machine: "m2"}),
		events.New(events.MachineStream("m1"), at(6*time.Hour), &events.MachineDown{Machine: "m1", Reason: "missed polls"}),
		events.New(events.MachineStream("m2"), at(6*time.Hour), &events.MachineRemoved{Machine: "m2", Reason: "retired"}),
		events.New(events.JobStream("alice", "web"), at(8*time.Hour), &events.JobKilled{User: "alice", Job: "web", Reason: "done"}),
		events.New(web0, at(8*time.Hour), &events.TaskKilled{User: "alice", Job: "web", Index: 0, Reason: "job killed"}),
	}
}

// rowsOf runs a query through the read-only path and prints each row as
// comma-separated cells.
func rowsOf(t *testing.T, s *Infrastore, q string) []string {
	t.Helper()
	res, err := s.Query(context.Background(), q, 0)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var out []string
	for _, r := range res.Rows {
		cells := make([]string, len(r))
		for i, v := range r {
			if v == nil {
				cells[i] = "NULL"
			} else {
				cells[i] = formatValue(v, res.Types[i])
			}
		}
		out = append(out, strings.Join(cells, ","))
	}
	return out
}

func checkRows(t *testing.T, s *Infrastore, q string, want ...string) {
	t.Helper()
	got := rowsOf(t, s, q)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s\ngot:\n  %s\nwant:\n  %s", q, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func ingestScenario(t *testing.T) *Infrastore {
	t.Helper()
	store := newSQLiteLog(t, scenario())
	s := openStore(t, Options{})
	if _, err := s.CatchUp(context.Background(), store); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTaskUsageLimitsAndReservations(t *testing.T) {
	s := ingestScenario(t)
	checkRows(t, s, `SELECT task_index, machine, (end_time - start_time) // 60000000 AS minutes, spec_version, band,
			cpu_limit_milli, cpu_reservation_milli, memory_limit_bytes // 1073741824, memory_reservation_bytes // 1073741824,
			cpu_limit_core_hours, cpu_reservation_core_hours, cpu_usage_core_hours,
			memory_limit_gib_hours, memory_reservation_gib_hours, memory_usage_gib_hours, disk_usage_gib_hours, memory_byte_seconds
		FROM task_usage ORDER BY position`,
		"0,m1,60,1,production,1000,1000,2,2,1.000000000,1.000000000,0.500000000,2.000000000,2.000000000,1.000000000,1.000000000,3865470566400.000000",
		"1,m2,60,1,production,2000,2000,4,4,2.000000000,2.000000000,1.000000000,4.000000000,4.000000000,2.000000000,2.000000000,7730941132800.000000",
		"0,m1,30,1,production,1000,500,2,1,0.500000000,0.250000000,0.250000000,1.000000000,0.500000000,0.250000000,0.500000000,966367641600.000000",
		"0,m1,60,2,production,3000,3000,2,2,3.000000000,3.000000000,2.000000000,2.000000000,2.000000000,1.000000000,1.000000000,3865470566400.000000",
		"0,m2,60,0,NULL,0,0,0,0,0.000000000,0.000000000,0.100000000,0.000000000,0.000000000,1.000000000,0.000000000,3865470566400.000000",
	)
}

func TestDerivedTables(t *testing.T) {
	s := ingestScenario(t)
	checkRows(t, s, `SELECT (time - epoch_us(TIMESTAMP '2026-03-01')) // 60000000, job, task_index, machine, event_type, user, scheduling_class, priority,
			cpu_request, memory_request // 1073741824, state, spec_version, reason FROM task_events ORDER BY position`,
		"1,web,0,NULL,0,alice,2,9,1,2,pending,1,new",
		"1,web,1,NULL,0,alice,2,9,2,4,pending,1,new",
		"2,web,0,m1,1,alice,2,9,1,2,running,1,NULL",
		"2,web,1,m2,1,alice,2,9,2,4,running,1,NULL",
		"120,web,0,m1,8,alice,2,9,3,2,running,2,NULL",
		"240,web,1,m2,4,alice,2,9,2,4,finished,1,NULL",
		"480,web,0,m1,5,alice,2,9,3,2,killed,2,job killed",
	)
	checkRows(t, s, `SELECT (time - epoch_us(TIMESTAMP '2026-03-01')) // 60000000, job, event_type, user, scheduling_class, job_name, spec_version, priority, task_count, reason
		FROM job_events ORDER BY position`,
		"1,web,0,alice,2,web,1,9,2,NULL",
		"120,web,7,alice,2,web,2,9,2,NULL",
		"480,web,5,alice,2,web,2,9,2,done",
	)
	checkRows(t, s, `SELECT (time - epoch_us(TIMESTAMP '2026-03-01')) // 3600000000, machine, event_type, cpus, memory // 1073741824, state, draining, reason, attributes
		FROM machine_events ORDER BY position`,
		`0,m1,0,16,64,up,false,NULL,{"rack":"a"}`,
		`0,m2,0,16,64,up,false,NULL,NULL`,
		`6,m1,1,16,64,down,false,missed polls,{"rack":"a"}`,
		`6,m2,1,16,64,removed,false,retired,NULL`,
	)
	checkRows(t, s, `SELECT job, task_index, machine, score, machines_examined, preemptions, preempted FROM scheduling_decisions ORDER BY position`,
		`web,0,m1,0.5,2,0,[]`,
		`web,1,m2,0.25,2,1,["bob/batch/3"]`,
	)
	checkRows(t, s, `SELECT user, job, spec_version, band, task_count, cpu_milli, labels['team'], status, (end_time - epoch_us(TIMESTAMP '2026-03-01')) // 3600000000 FROM jobs ORDER BY ALL`,
		"alice,web,2,production,2,3000,ads,killed,8",
	)
	checkRows(t, s, `SELECT user, job, task_index, state, machine, spec_version, cpu_limit_milli, cpu_reservation_milli, reservation_estimated, event_type
		FROM tasks ORDER BY ALL`,
		// A dead task keeps the machine it last ran on, as the fold does.
		"alice,web,0,killed,m1,2,3000,3000,false,5",
		"alice,web,1,finished,m2,1,2000,2000,false,4",
	)
	// A removed machine leaves the fold, and the table; machine_events keeps its history.
	checkRows(t, s, `SELECT machine, state, cpu_milli, attributes FROM machines ORDER BY ALL`,
		`m1,down,16000,{"rack":"a"}`,
	)
	checkRows(t, s, `SELECT type, count(*) FROM events GROUP BY ALL ORDER BY ALL`,
		"JobKilled,1", "JobSubmitted,1", "JobUpdated,1", "MachineDown,1", "MachineRegistered,2", "MachineRemoved,1",
		"ReservationEstimated,1", "TaskFinished,1", "TaskKilled,1", "TaskScheduled,2", "TaskSubmitted,2", "TaskUpdated,1", "UsageReported,5",
	)
}

func TestStateAtTime(t *testing.T) {
	s := ingestScenario(t)
	ts := func(d time.Duration) string { return "'" + at(d).Format("2006-01-02 15:04:05") + "'" }
	for _, c := range []struct {
		query string
		want  []string
	}{
		{`SELECT task_index, state, machine FROM tasks_at(` + ts(90*time.Second) + `) ORDER BY ALL`, []string{"0,pending,NULL", "1,pending,NULL"}},
		{`SELECT task_index, state, machine, cpu_request FROM tasks_at(` + ts(30*time.Minute) + `) ORDER BY ALL`, []string{"0,running,m1,1", "1,running,m2,2"}},
		{`SELECT task_index, state, machine, cpu_request, spec_version FROM tasks_at(` + ts(5*time.Hour) + `) ORDER BY ALL`, []string{"0,running,m1,3,2"}},
		{`SELECT count(*) FROM tasks_at(` + ts(9*time.Hour) + `)`, []string{"0"}},
		{`SELECT count(*) FROM tasks_at(` + ts(-time.Hour) + `)`, []string{"0"}},
		{`SELECT machine, state FROM machines_at(` + ts(time.Hour) + `) ORDER BY ALL`, []string{"m1,up", "m2,up"}},
		{`SELECT machine, state FROM machines_at(` + ts(7*time.Hour) + `) ORDER BY ALL`, []string{"m1,down"}},
		{`SELECT job, spec_version, cpu_milli, labels['team'] FROM jobs_at(` + ts(30*time.Minute) + `)`, []string{"web,1,1000,search"}},
		{`SELECT job, event_type, spec_version, cpu_milli, labels['team'] FROM jobs_at(` + ts(150*time.Minute) + `)`, []string{"web,7,2,3000,ads"}},
		{`SELECT count(*) FROM jobs_at(` + ts(9*time.Hour) + `)`, []string{"0"}},
		// A timestamp value works as well as a string.
		{`SELECT count(*) FROM tasks_at(TIMESTAMP ` + ts(30*time.Minute) + `)`, []string{"2"}},
	} {
		t.Run(c.query, func(t *testing.T) {
			checkRows(t, s, c.query, c.want...)
		})
	}
}

func TestRebuild(t *testing.T) {
	ctx := context.Background()
	evs := cellHistory(7, 1200)
	store := newSQLiteLog(t, evs)
	s := openStore(t, Options{})
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
	writeTrace(t, s, 3)
	want := digest(t, s)
	pos, err := s.Rebuild(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if pos != int64(len(evs)) {
		t.Fatalf("Rebuild reached %d, want %d", pos, len(evs))
	}
	compareDigests(t, digest(t, s), want)
	checkIngested(t, s, evs)
	if n := queryInt(t, s, fmt.Sprintf(`SELECT count(*) FROM task_events WHERE source = '%s'`, GoogleTraceSource)); n != 3 {
		t.Errorf("imported rows after rebuild: %d, want 3", n)
	}
}
