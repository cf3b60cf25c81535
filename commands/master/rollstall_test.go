package master

import (
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/commandtest"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	gproto "google.golang.org/protobuf/proto"
)

// TestCommitMidRollFinishesTheRoll: a commit (or a rollback) in the middle
// of a rolling update leaves tasks on the old version with no update open;
// the scheduling core must still step the roll, or they stay behind for
// good (seen with 4 of 5 tasks of a job, minutes later).
func TestCommitMidRollFinishesTheRoll(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := projections.New()
	admin := commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}
	alice := commands.Meta{Actor: commands.Actor{User: "alice"}}
	do := func(cmd commands.Command) {
		t.Helper()
		commandtest.Do(t, s, cmd, now)
		now = now.Add(time.Second)
	}
	do(commands.RegisterMachine{Meta: admin, Machine: "m1", Address: "m1:1", Capacity: projections.Resources{CPUMilli: 64000, MemoryBytes: 64 << 30}})
	do(commands.SetQuota{Meta: admin, User: "alice", Band: "production", Resources: projections.Resources{CPUMilli: 32000, MemoryBytes: 32 << 30}})
	spec := &events.JobSpec{Name: "hello", Priority: 9, TaskCount: 5, Command: "/bin/hello", Args: []string{"v1"},
		Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 20}, Update: &events.UpdatePolicy{MaxDisruptions: 1}}
	do(commands.SubmitJob{Meta: alice, Spec: spec})
	core := NewSchedulingCore(SchedulerConfig{})
	// Place and start every task, as the pass and the agent would.
	settle := func() {
		t.Helper()
		for range 10 {
			if cell, pos, _ := core.Input(s, now); cell != nil {
				if _, cmd := core.Plan(cell, pos); cmd != nil {
					do(*cmd)
				}
			}
			var rep commands.ReportAgentState
			rep.Meta, rep.Machine = admin, "m1"
			for _, task := range s.Machines["m1"].Tasks() {
				rep.Tasks = append(rep.Tasks, commands.AgentTask{Task: task.Key(), SpecVersion: task.SpecVersion, State: commands.AgentRunning, Pid: int64(100*task.SpecVersion) + int64(task.Index)})
			}
			if len(rep.Tasks) > 0 {
				do(rep)
			}
		}
	}
	settle()
	v2 := gproto.Clone(spec).(*events.JobSpec)
	v2.Args = []string{"v2"}
	do(commands.UpdateJob{Meta: alice, Spec: v2}) // stops one task for the new binary
	do(commands.CommitUpdate{Meta: alice, Job: "hello"})
	for range 20 {
		settle()
		_, _, rolling := core.Input(s, now)
		if rolling {
			do(commands.RollingUpdateStep{Meta: core.Meta()})
		}
	}
	j := s.Job("alice", "hello")
	for _, task := range j.Tasks {
		if task.SpecVersion != j.Current || task.State != projections.TaskRunning {
			t.Errorf("task %d: %s at spec version %d, the job wants %d", task.Index, task.State, task.SpecVersion, j.Current)
		}
	}
}
