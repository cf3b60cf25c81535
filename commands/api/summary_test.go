package api

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/commandtest"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// TestTouchedSaysWhatChanged: a mutation's reply names what it touched,
// not only how many events it appended.
func TestTouchedSaysWhatChanged(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := projections.New()
	admin := commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}
	alice := commands.Meta{Actor: commands.Actor{User: "alice"}}
	do := func(cmd commands.Command) string {
		t.Helper()
		now = now.Add(time.Second)
		return Touched(commandtest.Do(t, s, cmd, now))
	}
	do(commands.RegisterMachine{Meta: admin, Machine: "m1", Address: "m1:1", Capacity: projections.Resources{CPUMilli: 64000, MemoryBytes: 64 << 30}})
	do(commands.SetQuota{Meta: admin, User: "alice", Band: "batch", Resources: projections.Resources{CPUMilli: 32000, MemoryBytes: 32 << 30}})
	job := func(name string) *events.JobSpec {
		return &events.JobSpec{Name: name, Priority: 4, TaskCount: 3, Command: "/bin/x", Args: []string{"v1"}, Labels: map[string]string{"team": "web"},
			Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 20}}
	}
	for name, want := range map[string]string{"web": "submitted alice/web (3 tasks)", "api": "submitted alice/api (3 tasks)"} {
		if got := do(commands.SubmitJob{Meta: alice, Spec: job(name)}); !strings.HasPrefix(got, want) || !strings.Contains(got, "(events ") {
			t.Errorf("submit %s: %q, want it to start %q and say where", name, got, want)
		}
	}
	core := master.NewSchedulingCore(master.SchedulerConfig{})
	cell, pos, _ := core.Input(s, now)
	_, place := core.Plan(cell, pos)
	do(*place)

	scaled := job("web")
	scaled.TaskCount = 4
	if got := do(commands.UpdateJob{Meta: alice, Spec: scaled}); !strings.Contains(got, "alice/web to spec version 2 (in place)") ||
		!strings.Contains(got, "1 task added") || !strings.Contains(got, "3 tasks moved in place") || strings.Contains(got, "keeps") {
		t.Errorf("scale up: %q", got)
	}
	rolled := job("api")
	rolled.Args = []string{"v2"}
	if got := do(commands.UpdateJob{Meta: alice, Spec: rolled}); !strings.Contains(got, "alice/api to spec version 2 (rolling") || !strings.Contains(got, "3 tasks restarting on the new version") {
		// Placed but never started, no task of api serves: replacing them
		// all disrupts nothing (the disruption budget counts serving tasks).
		t.Errorf("rolling update: %q", got)
	}
	if got := do(commands.DrainMachine{Meta: admin, Machine: "m1", Draining: true, Reason: "kernel"}); !strings.Contains(got, "machine m1 draining") || !strings.Contains(got, "evicted (drain), to be placed again") {
		t.Errorf("drain: %q", got)
	}
	if got := do(commands.KillJob{Meta: alice, Selector: "team=web", Reason: "done"}); !strings.Contains(got, "killed alice/api, alice/web") || !strings.Contains(got, "7 tasks stopped") {
		t.Errorf("kill by selector: %q", got)
	}
	if got := Touched(nil); got != "nothing to change" {
		t.Errorf("no events: %q", got)
	}
}
