package agentlink_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/agentlink"
	"github.com/corralhq/corral/commands/commandtest"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cell is a state with machine m1 and n tasks of alice/web placed on it.
func cell(t *testing.T, n int32) *projections.State {
	t.Helper()
	s := projections.New()
	admin := commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}
	do := func(cmd commands.Command) { commandtest.Do(t, s, cmd, t0) }
	do(commands.RegisterMachine{Meta: admin, Machine: "m1", Address: "m1:1", Capacity: projections.Resources{CPUMilli: 64000, MemoryBytes: 64 << 30}})
	do(commands.SetQuota{Meta: admin, User: "alice", Band: "batch", Resources: projections.Resources{CPUMilli: 64000, MemoryBytes: 64 << 30}})
	do(commands.SubmitJob{Meta: commands.Meta{Actor: commands.Actor{User: "alice"}}, Spec: &events.JobSpec{
		Name: "web", Priority: 4, TaskCount: n, Command: "/bin/web", Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 20}}})
	var ps []commands.Placement
	for i := range n {
		ps = append(ps, commands.Placement{Task: projections.TaskKey{User: "alice", Job: "web", Index: i}, Machine: "m1", MachineVersion: s.Machines["m1"].Version})
	}
	do(commands.PlaceTasks{Meta: admin, Placements: ps})
	return s
}

func kinds(reqs []*agentpb.Request) (starts []int32, stops []string, forgets []string) {
	for _, r := range reqs {
		switch k := r.Kind.(type) {
		case *agentpb.Request_Start:
			starts = append(starts, k.Start.Task.Index)
		case *agentpb.Request_Stop:
			stops = append(stops, k.Stop.Task.Job)
		case *agentpb.Request_Forget:
			forgets = append(forgets, k.Forget.Task.Job)
		}
	}
	return
}

// TestRequestsStartInOrderAtMostMaxStarts: the same state sends the same
// requests, at most maxStarts starts, in task order; the rest wait.
func TestRequestsStartInOrderAtMostMaxStarts(t *testing.T) {
	s := cell(t, 12)
	ml := &agentlink.Machine{Name: "m1", Last: &agentpb.AgentState{}}
	reqs, version, bad := agentlink.Requests(s, ml, 10, time.Second)
	if len(bad) != 0 || version != s.Machines["m1"].Version {
		t.Fatalf("bad %v, version %d", bad, version)
	}
	starts, _, _ := kinds(reqs)
	if len(starts) != 10 || starts[0] != 0 || starts[9] != 9 {
		t.Fatalf("starts %v, want tasks 0..9", starts)
	}
	if reqs[0].Id != "m1-1" || ml.RequestSeq != 10 {
		t.Fatalf("request ids: first %q, seq %d", reqs[0].Id, ml.RequestSeq)
	}
	if _, v, _ := agentlink.Requests(s, &agentlink.Machine{Name: "gone"}, 10, time.Second); v != -1 {
		t.Fatalf("an unknown machine: version %d, want -1", v)
	}
}

// TestRequestsStopWhatIsNotPlacedHere: a task the agent runs that the
// projection does not place here is stopped; one that ended is forgotten
// only once its end is in the log (synced).
func TestRequestsStopWhatIsNotPlacedHere(t *testing.T) {
	s := cell(t, 1)
	ref := func(job string) *events.TaskRef { return &events.TaskRef{User: "alice", Job: job} }
	last := &agentpb.AgentState{Tasks: []*agentpb.TaskStatus{
		{Task: ref("web"), SpecVersion: 1, State: agentpb.TaskState_TASK_STATE_RUNNING},
		{Task: ref("zombie"), State: agentpb.TaskState_TASK_STATE_RUNNING},
		{Task: ref("done"), State: agentpb.TaskState_TASK_STATE_FINISHED},
	}}
	reqs, _, _ := agentlink.Requests(s, &agentlink.Machine{Name: "m1", Last: last}, 10, time.Second)
	starts, stops, forgets := kinds(reqs)
	if len(starts) != 0 || len(stops) != 1 || stops[0] != "zombie" || len(forgets) != 0 {
		t.Fatalf("not synced: starts %v stops %v forgets %v", starts, stops, forgets)
	}
	reqs, _, _ = agentlink.Requests(s, &agentlink.Machine{Name: "m1", Last: last, Synced: true}, 10, time.Second)
	if _, stops, forgets = kinds(reqs); len(stops) != 1 || len(forgets) != 1 || forgets[0] != "done" {
		t.Fatalf("synced: stops %v forgets %v", stops, forgets)
	}
}

// TestReportsSkipWhatTheLogHolds: events up to the newest whose key the
// log holds are not recorded again; later ones are, each under its key;
// the full state comes last.
func TestReportsSkipWhatTheLogHolds(t *testing.T) {
	s := cell(t, 2)
	ev := func(seq uint64, idx int32) *agentpb.AgentEvent {
		return &agentpb.AgentEvent{Seq: seq, TimeUs: int64(seq), Kind: agentpb.EventKind_EVENT_KIND_FAILED, ExitCode: 1,
			Task: &events.TaskRef{User: "alice", Job: "web", Index: idx}, SpecVersion: 1}
	}
	st := &agentpb.AgentState{Events: []*agentpb.AgentEvent{ev(1, 0), ev(2, 1), ev(3, 0), ev(4, 1)}, LastEventSeq: 4}
	held := agentlink.AgentEventKey("m1", ev(2, 1))
	rep := agentlink.Reports(s, "m1", st, nil, 0, 0, func(id string) bool { return id == held }, nil)
	if len(rep.Commands) != 3 {
		t.Fatalf("%d commands, want events 3 and 4 and the full state", len(rep.Commands))
	}
	if rep.Commands[0].RequestID != agentlink.AgentEventKey("m1", ev(3, 0)) || rep.Commands[1].RequestID != agentlink.AgentEventKey("m1", ev(4, 1)) || rep.Commands[2].RequestID != "" {
		t.Fatalf("request ids %q %q %q", rep.Commands[0].RequestID, rep.Commands[1].RequestID, rep.Commands[2].RequestID)
	}
	if rep := agentlink.Reports(s, "m1", st, nil, 4, 0, func(string) bool { return false }, nil); len(rep.Commands) != 1 {
		t.Fatalf("all acknowledged: %d commands, want the full state alone", len(rep.Commands))
	}
}

// TestDue: the pacing rule.
func TestDue(t *testing.T) {
	iv := 2 * time.Second
	next := t0.Add(iv)
	for i, tc := range []struct {
		now           time.Time
		down, changed bool
		want          bool
	}{
		{t0, false, false, false},
		{next, false, false, true},
		{t0, false, true, true},                  // placements changed
		{t0, true, true, false},                  // but the machine is down
		{t0.Add(-time.Hour), false, false, true}, // the clock went back
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := agentlink.Due(tc.now, next, iv, tc.down, tc.changed); got != tc.want {
				t.Errorf("Due(%v, down %v, changed %v) = %v", tc.now.Sub(t0), tc.down, tc.changed, got)
			}
		})
	}
}

// TestRequestsStopARunOfAnEarlierIncarnation: a job killed and submitted
// again under its name while its machine could not hear the stop is placed
// there again at spec version 1, while the agent still runs the old
// incarnation at a later version. The old run can be neither updated into
// the new placement nor left beside it: it is stopped, and once its end is
// in the log the new run starts.
func TestRequestsStopARunOfAnEarlierIncarnation(t *testing.T) {
	s := cell(t, 1)
	web := &events.TaskRef{User: "alice", Job: "web"}
	ml := &agentlink.Machine{Name: "m1", Synced: true, Last: &agentpb.AgentState{Tasks: []*agentpb.TaskStatus{
		{Task: web, SpecVersion: 4, State: agentpb.TaskState_TASK_STATE_RUNNING},
	}}}
	reqs, _, _ := agentlink.Requests(s, ml, 10, time.Second)
	starts, stops, _ := kinds(reqs)
	if len(starts) != 0 || len(stops) != 1 || stops[0] != "web" {
		t.Fatalf("starts %v, stops %v: want the old run stopped, nothing started", starts, stops)
	}
	ml.Last.Tasks[0].State = agentpb.TaskState_TASK_STATE_KILLED
	reqs, _, _ = agentlink.Requests(s, ml, 10, time.Second)
	if starts, stops, _ = kinds(reqs); len(starts) != 1 || len(stops) != 0 {
		t.Fatalf("after the stop: starts %v, stops %v: want the new run started", starts, stops)
	}
	// The same placement's own run, started and not yet recorded, is left
	// alone.
	ml.Last.Tasks[0].SpecVersion, ml.Last.Tasks[0].State = 1, agentpb.TaskState_TASK_STATE_RUNNING
	reqs, _, _ = agentlink.Requests(s, ml, 10, time.Second)
	if starts, stops, _ = kinds(reqs); len(starts) != 0 || len(stops) != 0 {
		t.Fatalf("its own run: starts %v, stops %v: want nothing", starts, stops)
	}
}

// TestRequestsStopARunOfAnotherSubmission: at the same spec version, the
// agent's run of another submission of the task (the job killed and
// submitted again, placed here before the stop was heard) is stopped, not
// adopted; a start says which submission it serves.
func TestRequestsStopARunOfAnotherSubmission(t *testing.T) {
	s := cell(t, 1)
	seq := s.Task("alice", "web", 0).Seq
	web := &events.TaskRef{User: "alice", Job: "web"}
	ml := &agentlink.Machine{Name: "m1", Synced: true, Last: &agentpb.AgentState{Tasks: []*agentpb.TaskStatus{
		{Task: web, SpecVersion: 1, Submission: seq - 1, State: agentpb.TaskState_TASK_STATE_RUNNING},
	}}}
	reqs, _, _ := agentlink.Requests(s, ml, 10, time.Second)
	if starts, stops, _ := kinds(reqs); len(starts) != 0 || len(stops) != 1 {
		t.Fatalf("starts %v, stops %v: want the other submission's run stopped", starts, stops)
	}
	ml.Last.Tasks[0].State = agentpb.TaskState_TASK_STATE_KILLED
	reqs, _, _ = agentlink.Requests(s, ml, 10, time.Second)
	if len(reqs) != 1 || reqs[0].GetStart().GetSubmission() != seq {
		t.Fatalf("after the stop: %v, want one start for submission %d", reqs, seq)
	}
	ml.Last.Tasks[0].Submission, ml.Last.Tasks[0].State = seq, agentpb.TaskState_TASK_STATE_RUNNING
	if reqs, _, _ = agentlink.Requests(s, ml, 10, time.Second); len(reqs) != 0 {
		t.Fatalf("its own run: %v, want nothing", reqs)
	}
}
