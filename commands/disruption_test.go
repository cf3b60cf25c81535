package commands

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// drainCell is a cell of three machines running serviceSpec(2) (health
// checked, max_disruptions 1) with both replicas healthy on m0.
func drainCell(t *testing.T) *cell {
	c := newCell(t)
	c.machines(3)
	c.do(SubmitJob{Meta: alice, Spec: serviceSpec(2)})
	c.place("alice", "web", 0, "m0")
	c.place("alice", "web", 1, "m0")
	c.report("m0", func(*projections.Task) projections.Health { return projections.HealthHealthy })
	return c
}

func evicted(evs []events.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Type == "TaskEvicted" {
			out = append(out, e.Stream)
		}
	}
	return out
}

// A drain of a machine holding both replicas of a service with
// max_disruptions 1 evicts one; the next steps evict nothing while its
// replacement waits, starts, or runs without a healthy check; once the
// replacement is healthy the next step evicts the other.
func TestDrainKeepsDisruptionBudget(t *testing.T) {
	c := drainCell(t)
	evs := c.do(DrainMachine{Meta: root, Machine: "m0", Draining: true})
	if got := evicted(evs); strings.Join(got, " ") != "task/alice/web/0" {
		t.Fatalf("drain evicted %v, want task 0 alone:\n%s", got, dump(evs))
	}
	if !c.task("alice", "web", 0).Replacing {
		t.Fatal("a drained task's resubmission is no replacement: it would not count against the budget")
	}
	if !DrainsOpen(c.s) {
		t.Fatal("a draining machine holding a task is not an open drain")
	}
	step := func(why string) {
		t.Helper()
		if evs := c.do(RollingUpdateStep{Meta: root}); len(evicted(evs)) != 0 {
			t.Fatalf("%s: step evicted past the budget:\n%s", why, dump(evs))
		}
	}
	step("replacement pending")
	holds := DrainHolds(c.s, c.s.Machines["m0"], c.now)
	if len(holds) != 1 || holds[0].Job != "web" || holds[0].Tasks != 1 || holds[0].Disrupted != 1 || holds[0].Budget != 1 {
		t.Fatalf("holds %+v", holds)
	}
	if want := "job alice/web: 1 task(s) held, 1 of at most 1 disrupted"; holds[0].String() != want {
		t.Fatalf("hold %q, want %q", holds[0], want)
	}
	c.place("alice", "web", 0, "m1")
	step("replacement placed, not running")
	c.report("m1", func(*projections.Task) projections.Health { return projections.HealthUnknown })
	step("replacement running, not yet checked")
	c.report("m1", func(*projections.Task) projections.Health { return projections.HealthUnhealthy })
	step("replacement unhealthy")
	c.report("m1", func(*projections.Task) projections.Health { return projections.HealthHealthy })
	evs = c.do(RollingUpdateStep{Meta: root})
	if got := evicted(evs); strings.Join(got, " ") != "task/alice/web/1" {
		t.Fatalf("step after the replacement turned healthy evicted %v, want task 1:\n%s", got, dump(evs))
	}
	if c.s.Machines["m0"].TaskCount() != 0 || DrainsOpen(c.s) {
		t.Fatal("the drained machine still holds tasks")
	}
	if !c.s.Machines["m0"].Draining {
		t.Fatal("the machine stopped draining")
	}
}

// A forced drain evicts every replica at once, budget or not.
func TestForcedDrainEvictsEverything(t *testing.T) {
	c := drainCell(t)
	holds := DrainHolds(c.s, c.s.Machines["m0"], c.now)
	if holds != nil {
		t.Fatalf("an open machine has holds %+v", holds)
	}
	evs := c.do(DrainMachine{Meta: root, Machine: "m0", Draining: true, Force: true, Reason: "dead disk"})
	if got := evicted(evs); len(got) != 2 {
		t.Fatalf("forced drain evicted %v, want both:\n%s", got, dump(evs))
	}
}

// A task that does not serve is drained at once: evicting it disrupts
// nothing more. A replica that does not serve elsewhere holds the healthy
// ones on the draining machine.
func TestDrainCountsTasksThatDoNotServe(t *testing.T) {
	c := newCell(t)
	c.machines(3)
	c.do(SubmitJob{Meta: alice, Spec: serviceSpec(3)})
	c.place("alice", "web", 0, "m0")
	c.place("alice", "web", 1, "m0")
	c.place("alice", "web", 2, "m1")
	c.report("m0", func(t *projections.Task) projections.Health {
		if t.Index == 0 {
			return projections.HealthUnhealthy
		}
		return projections.HealthHealthy
	})
	c.report("m1", func(*projections.Task) projections.Health { return projections.HealthUnhealthy })
	evs := c.do(DrainMachine{Meta: root, Machine: "m0", Draining: true})
	if got := evicted(evs); strings.Join(got, " ") != "task/alice/web/0" {
		t.Fatalf("drain evicted %v, want the unhealthy task 0 alone:\n%s", got, dump(evs))
	}
}

// Preemption by a higher priority is not voluntary: it evicts every task
// it needs, whatever their job's budget.
func TestPreemptionIgnoresDisruptionBudget(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.quota("bob", "production", 8000, 32*gib)
	c.do(SubmitJob{Meta: alice, Spec: serviceSpec(2)})
	c.place("alice", "web", 0, "m0")
	c.place("alice", "web", 1, "m0")
	c.report("m0", func(*projections.Task) projections.Health { return projections.HealthHealthy })
	big := spec("big", 9, 1)
	big.Resources = res(8000, gib)
	c.do(SubmitJob{Meta: bob, Spec: big})
	evs := c.place("bob", "big", 0, "m0", key("alice", "web", 0), key("alice", "web", 1))
	if got := evicted(evs); len(got) != 2 {
		t.Fatalf("preemption evicted %v, want both replicas:\n%s", got, dump(evs))
	}
}

// A rolling update and a drain spend one budget: with a replacement of the
// roll in flight, the drain evicts nothing of the job.
func TestRollAndDrainShareTheBudget(t *testing.T) {
	c := drainCell(t)
	up := serviceSpec(2)
	up.Args = []string{"--v2"}
	evs := c.do(UpdateJob{Meta: alice, Spec: withUser(up, "alice")})
	if n := len(evicted(evs)); n != 1 {
		t.Fatalf("the roll evicted %d, want 1", n)
	}
	evs = c.do(DrainMachine{Meta: root, Machine: "m0", Draining: true})
	if got := evicted(evs); len(got) != 0 {
		t.Fatalf("the drain evicted %v during the roll's disruption:\n%s", got, dump(evs))
	}
	if holds := DrainHolds(c.s, c.s.Machines["m0"], c.now); len(holds) != 1 || holds[0].Tasks != 1 {
		t.Fatalf("holds %+v", holds)
	}
}

// A step whose roll replaces a task on a draining machine does not evict
// it again for the drain (an event the projection would skip).
func TestStepRollsAndDrainsATaskOnce(t *testing.T) {
	c := drainCell(t)
	c.do(DrainMachine{Meta: root, Machine: "m0", Draining: true}) // evicts task 0, holds task 1
	up := serviceSpec(2)
	up.Args = []string{"--v2"}
	c.do(UpdateJob{Meta: alice, Spec: withUser(up, "alice")}) // task 0 pending: moves in place
	c.report("m0", func(*projections.Task) projections.Health { return projections.HealthUnhealthy })
	evs := c.do(RollingUpdateStep{Meta: root}) // the roll replaces task 1, which does not serve
	if got := evicted(evs); strings.Join(got, " ") != "task/alice/web/1" {
		t.Fatalf("step evicted %v, want task 1 once:\n%s", got, dump(evs))
	}
}
