package projections

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
)

var at = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func fold(t *testing.T, s *State, ps ...events.Payload) {
	t.Helper()
	for _, p := range ps {
		if err := Apply(s, events.Event{OccurredAt: at, Data: p}); err != nil {
			t.Fatal(err)
		}
	}
}

func job(name, user string, prio, count int32, labels map[string]string) *events.JobSpec {
	return &events.JobSpec{Name: name, User: user, Priority: prio, TaskCount: count, Command: "x", Labels: labels,
		Resources: &events.Resources{CpuMilli: 1000, MemoryBytes: 1 << 30, Ports: 1}}
}

func TestApplyTaskLifecycleAndIndexes(t *testing.T) {
	s := New()
	fold(t, s,
		&events.MachineRegistered{Machine: "m1", Capacity: &events.Resources{CpuMilli: 4000, MemoryBytes: 8 << 30, Ports: 10}},
		&events.QuotaSet{User: "alice", Band: "production", Resources: &events.Resources{CpuMilli: 4000}},
		&events.JobSubmitted{Spec: job("web", "alice", 9, 2, map[string]string{"team": "web"}), SpecVersion: 1},
		&events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1, Reason: "new"},
		&events.TaskSubmitted{User: "alice", Job: "web", Index: 1, SpecVersion: 1, Reason: "new"},
	)
	m, j := s.Machines["m1"], s.Job("alice", "web")
	if s.PendingCount() != 2 || j.State() != JobPending || m.Version != 1 || m.PortBase != DefaultPortBase {
		t.Fatalf("pending %d, job %v, machine version %d", s.PendingCount(), j.State(), m.Version)
	}
	if s.Charged[UserBand{"alice", Production}] != (Resources{CPUMilli: 2000, MemoryBytes: 2 << 30, Ports: 2}) {
		t.Fatalf("charged %v", s.Charged)
	}
	fold(t, s, &events.TaskScheduled{User: "alice", Job: "web", Index: 0, Machine: "m1", Ports: []int32{20000}})
	placedAt := s.Position
	if m.Version != placedAt || m.TaskCount() != 1 || m.Limits.CPUMilli != 1000 || s.PendingCount() != 1 || j.State() != JobRunning {
		t.Fatalf("after placement: version %d tasks %d limits %v", m.Version, m.TaskCount(), m.Limits)
	}
	// Starting and usage change nothing a placement depends on.
	fold(t, s,
		&events.TaskStarted{User: "alice", Job: "web", Index: 0, Machine: "m1", Pid: 42},
		&events.UsageReported{Machine: "m1", WindowStartUs: 1, WindowEndUs: 2, Tasks: []*events.TaskUsage{{User: "alice", Job: "web", Index: 0, MemoryBytes: 5}}},
	)
	tk := j.Task(0)
	if m.Version != placedAt || tk.State != TaskRunning || tk.Pid != 42 || tk.Usage.MemoryBytes != 5 || tk.SinceUS != at.UnixMicro() {
		t.Fatalf("%+v, version %d", tk, m.Version)
	}
	fold(t, s, &events.ReservationEstimated{Machine: "m1", Tasks: []*events.TaskReservation{{User: "alice", Job: "web", Index: 0, Reservation: &events.Resources{CpuMilli: 300}}}})
	if m.Reserved.CPUMilli != 300 || m.Free(false).CPUMilli != 3700 || m.Free(true).CPUMilli != 3000 || m.Version != s.Position {
		t.Fatalf("reserved %v", m.Reserved)
	}
	fold(t, s, &events.TaskFailed{User: "alice", Job: "web", Index: 0, Machine: "m1", ExitCode: 3, WillRestart: true})
	if tk.State != TaskScheduled || tk.Restarts != 1 || tk.ExitCode != 3 || m.TaskCount() != 1 {
		t.Fatalf("restart in place: %+v", tk)
	}
	fold(t, s,
		&events.TaskEvicted{User: "alice", Job: "web", Index: 0, Machine: "m1", Reason: "oom"},
		&events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1, Reason: "rescheduled"},
	)
	if tk.State != TaskPending || tk.Restarts != 1 || !m.Limits.IsZero() || !m.Reserved.IsZero() || m.TaskCount() != 0 {
		t.Fatalf("after eviction: %+v, machine %v", tk, m.Limits)
	}
	// Indexes.
	if got := s.SelectJobs(mustParseSelector("team=web"), ""); len(got) != 1 || got[0] != j {
		t.Fatal("label index")
	}
	if got := s.JobsOf("alice"); len(got) != 1 || len(s.JobsOf("bob")) != 0 {
		t.Fatal("jobs per user")
	}
	if got := s.PendingTasks(); len(got) != 2 || got[0].Index != 0 {
		t.Fatal("pending index")
	}
	// Killing the job ends its tasks and gives its quota back.
	fold(t, s,
		&events.TaskKilled{User: "alice", Job: "web", Index: 0},
		&events.TaskKilled{User: "alice", Job: "web", Index: 1},
		&events.JobKilled{User: "alice", Job: "web", Reason: "bye"},
	)
	if j.State() != JobDead || s.PendingCount() != 0 || len(s.Charged) != 0 || s.Skipped != 0 {
		t.Fatalf("job %v pending %d charged %v skipped %d", j.State(), s.PendingCount(), s.Charged, s.Skipped)
	}
	if err := s.CheckIndexes(); err != nil {
		t.Fatal(err)
	}
}

// Events that name what the state does not hold, or that arrive out of
// place, move only the position; unknown types are ignored.
func TestApplyIgnoresWhatDoesNotFit(t *testing.T) {
	s := New()
	fold(t, s,
		&events.MachineRegistered{Machine: "m1", Capacity: &events.Resources{CpuMilli: 4000, MemoryBytes: 8 << 30}},
		&events.JobSubmitted{Spec: job("web", "alice", 0, 1, nil), SpecVersion: 1},
		&events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1},
	)
	before := Encode(s)
	strip := func(b []byte) []byte { // everything after position, time and skipped
		d, _ := Decode(b)
		d.Position, d.TimeUS, d.Skipped = 0, 0, 0
		return Encode(d)
	}
	bad := []events.Payload{
		nil,
		&events.TaskSubmitted{User: "bob", Job: "nope", Index: 0},
		&events.TaskSubmitted{User: "alice", Job: "web", Index: -1},
		&events.TaskSubmitted{User: "alice", Job: "web", Index: 1 << 30},
		&events.TaskSubmitted{User: "alice", Job: "web", Index: 1, SpecVersion: 7},
		&events.TaskScheduled{User: "alice", Job: "web", Index: 0, Machine: "m9"},
		&events.TaskStarted{User: "alice", Job: "web", Index: 0, Machine: "m1"}, // not placed
		&events.TaskFinished{User: "alice", Job: "web", Index: 0, Machine: "m1"},
		&events.TaskEvicted{User: "alice", Job: "web", Index: 3},
		&events.TaskLost{User: "alice", Job: "web", Index: 0},
		&events.TaskUpdated{User: "alice", Job: "web", Index: 0, SpecVersion: 9},
		&events.JobSubmitted{Spec: job("web", "alice", 0, 1, nil)}, // the name is taken
		&events.JobSubmitted{},
		&events.JobUpdated{Spec: job("web", "alice", 0, 1, nil), SpecVersion: 1}, // not a new version
		&events.JobUpdateCommitted{User: "alice", Job: "web"},                    // nothing to commit
		&events.JobUpdateRolledBack{User: "alice", Job: "web", ToVersion: 5, SpecVersion: 2},
		&events.JobFinished{User: "bob", Job: "web"},
		&events.MachineDown{Machine: "m9"},
		&events.MachineUpdated{Machine: "m9"},
		&events.QuotaSet{User: "alice", Band: "gold"},
		&events.AllocScheduled{User: "alice", Name: "nope", Machine: "m1"},
		&events.AllocSetRemoved{User: "alice", Name: "nope"},
		&events.ReservationEstimated{Machine: "m9"},
	}
	for _, p := range bad {
		fold(t, s, p)
	}
	if s.Skipped != int64(len(bad)) {
		t.Fatalf("skipped %d of %d", s.Skipped, len(bad))
	}
	fold(t, s, &events.CommandRefused{Reason: "x"}, &events.CheckpointWritten{Position: 3})
	if s.Skipped != int64(len(bad)) || !bytes.Equal(strip(Encode(s)), strip(before)) {
		t.Fatal("events that did not fit changed the state")
	}
	if err := s.CheckIndexes(); err != nil {
		t.Fatal(err)
	}
}

// A writer that kills a job without killing its tasks first leaves no task
// holding a machine.
func TestJobEndCleansUp(t *testing.T) {
	s := New()
	fold(t, s,
		&events.MachineRegistered{Machine: "m1", Capacity: &events.Resources{CpuMilli: 4000, MemoryBytes: 8 << 30}},
		&events.JobSubmitted{Spec: job("web", "alice", 0, 1, nil), SpecVersion: 1},
		&events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1},
		&events.TaskScheduled{User: "alice", Job: "web", Index: 0, Machine: "m1"},
		&events.JobKilled{User: "alice", Job: "web"},
	)
	if m := s.Machines["m1"]; m.TaskCount() != 0 || !m.Limits.IsZero() || s.Job("alice", "web").Task(0).End != Killed {
		t.Fatal("the job's task still holds the machine")
	}
	// The name can be used again by a new job.
	fold(t, s, &events.JobSubmitted{Spec: job("web", "alice", 0, 3, nil), SpecVersion: 1})
	if j := s.Job("alice", "web"); j.Dead() || len(j.Tasks) != 0 || s.Skipped != 0 {
		t.Fatal("resubmission")
	}
	if err := s.CheckIndexes(); err != nil {
		t.Fatal(err)
	}
}

// How (End) and where a task's last run ended survive its resubmission: the
// scheduler paces lost tasks and avoids the machine a task failed on.
func TestLastEndSurvivesResubmission(t *testing.T) {
	s := New()
	fold(t, s,
		&events.MachineRegistered{Machine: "m1", Capacity: &events.Resources{CpuMilli: 4000, MemoryBytes: 8 << 30, Ports: 10}},
		&events.JobSubmitted{Spec: job("web", "alice", 0, 1, nil), SpecVersion: 1},
		&events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1, Reason: "new"},
	)
	tk := s.Job("alice", "web").Task(0)
	if tk.LastEnd != NoEnd || tk.LastMachine != "" {
		t.Fatalf("a new task has a last end: %+v", tk)
	}
	for i, c := range []struct {
		end  events.Payload
		want TaskEnd
	}{
		{&events.TaskLost{User: "alice", Job: "web", Index: 0, Machine: "m1", Reason: "machine down"}, Lost},
		{&events.TaskFailed{User: "alice", Job: "web", Index: 0, Machine: "m1", ExitCode: 1}, Failed},
		{&events.TaskEvicted{User: "alice", Job: "web", Index: 0, Machine: "m1", Reason: "oom"}, Evicted},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			fold(t, s,
				&events.TaskScheduled{User: "alice", Job: "web", Index: 0, Machine: "m1", Ports: []int32{20000}},
				c.end,
				&events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1, Reason: "rescheduled"},
			)
			if tk.State != TaskPending || tk.End != NoEnd || tk.Machine != "" || tk.LastEnd != c.want || tk.LastMachine != "m1" {
				t.Fatalf("after %T and resubmission: %+v", c.end, tk)
			}
			d, err := Decode(Encode(s))
			if err != nil {
				t.Fatal(err)
			}
			if dt := d.Job("alice", "web").Task(0); dt.LastEnd != c.want || dt.LastMachine != "m1" {
				t.Fatalf("checkpoint lost the last end: %+v", dt)
			}
		})
	}
}

// mustParseSelector is ParseSelector for constants in tests.
func mustParseSelector(text string) Selector {
	s, err := ParseSelector(text)
	if err != nil {
		panic(err)
	}
	return s
}

// A log written before commands decided at the log's time may hold an
// event stamped before the one ahead of it (a master whose clock was
// behind): the state's clock keeps the later time, so a run starting after
// another ended never begins before it, and its span is never billed twice.
func TestApplyTimeNeverRunsBackwards(t *testing.T) {
	s := New()
	step := func(d time.Duration, p events.Payload) {
		t.Helper()
		if err := Apply(s, events.Event{OccurredAt: at.Add(d), Data: p}); err != nil {
			t.Fatal(err)
		}
	}
	step(0, &events.MachineRegistered{Machine: "m1", Capacity: &events.Resources{CpuMilli: 4000, MemoryBytes: 8 << 30, Ports: 10}})
	step(0, &events.MachineRegistered{Machine: "m2", Capacity: &events.Resources{CpuMilli: 4000, MemoryBytes: 8 << 30, Ports: 10}})
	step(0, &events.JobSubmitted{Spec: job("web", "alice", 0, 1, nil), SpecVersion: 1})
	step(0, &events.TaskSubmitted{User: "alice", Job: "web", SpecVersion: 1, Reason: "new"})
	step(10*time.Second, &events.TaskScheduled{User: "alice", Job: "web", Machine: "m1", Ports: []int32{20000}})
	step(10*time.Second, &events.TaskStarted{User: "alice", Job: "web", Machine: "m1", Pid: 1})
	step(20*time.Second, &events.TaskEvicted{User: "alice", Job: "web", Machine: "m1", Reason: "preempted"})
	step(20*time.Second, &events.TaskSubmitted{User: "alice", Job: "web", SpecVersion: 1, Reason: "rescheduled"})
	// Stamped by a clock 15 s behind the log's.
	step(5*time.Second, &events.TaskScheduled{User: "alice", Job: "web", Machine: "m2", Ports: []int32{20000}})
	step(6*time.Second, &events.TaskStarted{User: "alice", Job: "web", Machine: "m2", Pid: 2})
	if want := at.Add(20 * time.Second).UnixMicro(); s.TimeUS != want {
		t.Fatalf("state time %d, want the latest %d", s.TimeUS, want)
	}
	first := s.Machines["m1"].RunSpans()
	second := s.Machines["m2"].RunSpans()
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("spans %v and %v", first, second)
	}
	if second[0].StartUS < first[0].StopUS {
		t.Fatalf("the run on m2 starts at %d, before the run on m1 ended at %d", second[0].StartUS, first[0].StopUS)
	}
}
