package master

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/commandtest"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"google.golang.org/protobuf/proto"
)

// A plan is what the update then does: on an unchanged cell the update's
// events are the plan's, and the pass after it places the same tasks on
// the same machines. Planning changes nothing; a plan gone stale is
// refused with if_position.
func TestPlanPredictsTheUpdate(t *testing.T) {
	c := newSpreadCell(t)
	sp := &events.JobSpec{Name: "web", TaskCount: 5, Command: "/bin/web", Priority: 0,
		Resources: &events.Resources{CpuMilli: 2000, MemoryBytes: 4 << 30}, Update: &events.UpdatePolicy{MaxDisruptions: 2}}
	c.do(commands.SubmitJob{Meta: asAlice, Spec: sp})
	c.pass()
	up := proto.Clone(sp).(*events.JobSpec)
	up.User, up.Args, up.TaskCount = "alice", []string{"--v2"}, 7
	update := commands.UpdateJob{Meta: asAlice, Spec: up}

	c.now = c.now.Add(time.Second)
	cp, err := projections.Decode(projections.Encode(c.s))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanCommand(cp, update, c.now, SchedulerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// The 5 placed tasks never started, so none serves and the disruption
	// budget holds none back: 5 restarted, 2 added.
	if plan.Pass == nil || len(plan.Pass.Placements) != 7 {
		t.Fatalf("plan: %d events, pass %+v", len(plan.Events), plan.Pass)
	}
	evs := commandtest.Do(t, c.s, update, c.now)
	if len(evs) != len(plan.Events) {
		t.Fatalf("the update appended %d events, the plan said %d", len(evs), len(plan.Events))
	}
	for i := range evs {
		if evs[i].Type != plan.Events[i].Type || !proto.Equal(evs[i].Data, plan.Events[i].Data) {
			t.Fatalf("event %d: %v, the plan said %v", i, evs[i].Data, plan.Events[i].Data)
		}
	}
	cell, position, _ := c.core.Input(c.s, c.now)
	got, _ := c.core.Plan(cell, position)
	if len(got.Placements) != len(plan.Pass.Placements) {
		t.Fatalf("the pass placed %d, the plan said %d", len(got.Placements), len(plan.Pass.Placements))
	}
	for i, p := range got.Placements {
		if w := plan.Pass.Placements[i]; p.Task != w.Task || p.Machine != w.Machine {
			t.Fatalf("placement %d: %v on %s, the plan said %v on %s", i, p.Task, p.Machine, w.Task, w.Machine)
		}
	}
	// The job changed after the plan's position: an update made from that
	// plan is refused, naming the field.
	c.do(commands.CommitUpdate{Meta: asAlice, Job: "web"})
	again := proto.Clone(up).(*events.JobSpec)
	again.Args = []string{"--v3"}
	_, err = commandtest.Try(c.s, commands.UpdateJob{Meta: asAlice, Spec: again, IfPosition: plan.Position}, c.now)
	if commands.CodeOf(err) != commands.FailedPrecondition || !strings.Contains(err.Error(), "if_position") {
		t.Fatalf("a stale plan's update: %v", err)
	}
	if _, err := commandtest.Try(c.s, commands.UpdateJob{Meta: asAlice, Spec: again, IfPosition: c.s.Position}, c.now); err != nil {
		t.Fatalf("a fresh plan's update: %v", err)
	}
}
