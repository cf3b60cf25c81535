package projections_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/corralhq/corral/events"
	sim "github.com/corralhq/corral/internal/history"
	"github.com/corralhq/corral/projections"
)

// stateAfter folds evs[:n] into a fresh state.
func stateAfter(t *testing.T, evs []events.Event, n int) *projections.State {
	t.Helper()
	s := projections.New()
	for i := range evs[:n] {
		if err := projections.Apply(s, evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// The diff of two states of a simulated cell agrees with the events
// between them, read another way: every job submitted in between and still
// that job, every machine registered, every task that died, every quota
// set to a new value is listed, and nothing else is listed as such.
func TestDiffAgreesWithTheEventsBetween(t *testing.T) {
	c := sim.New(sim.Small, 11)
	c.Run(6000)
	evs := c.Log
	for _, span := range [][2]int{{0, 800}, {1500, 3000}, {3000, 3001}, {2000, 6000}} {
		before, after := stateAfter(t, evs, span[0]), stateAfter(t, evs, span[1])
		changes := projections.Diff(before, after, "", nil)
		listed := map[string]bool{}
		for _, ch := range changes {
			listed[ch.Kind+" "+ch.Name+" "+ch.What] = true
		}
		want := map[string]bool{}
		for _, e := range evs[span[0]:span[1]] {
			switch p := e.Data.(type) {
			case *events.JobSubmitted:
				name := p.Spec.GetUser() + "/" + p.Spec.GetName()
				j := after.Jobs[projections.JobKey{User: p.Spec.GetUser(), Name: p.Spec.GetName()}]
				if j != nil && j.SubmittedUS == e.OccurredAt.UnixMicro() {
					want["job "+name+" submitted"] = true
				}
			case *events.MachineRegistered:
				if before.Machines[p.Machine] == nil && after.Machines[p.Machine] != nil {
					want["machine "+p.Machine+" added"] = true
				}
			case *events.QuotaSet:
				band, _ := events.ParseBand(p.Band)
				k := projections.UserBand{User: p.User, Band: band}
				if before.Quotas[k] != after.Quotas[k] {
					want["quota "+p.User+"/"+band.String()+" set"] = true
				}
			}
		}
		for k, j := range after.Jobs {
			b := before.Jobs[k]
			if b == nil || b.SubmittedUS != j.SubmittedUS {
				continue
			}
			for i, tk := range j.Tasks {
				if tk == nil || tk.State != projections.TaskDead || i >= len(b.Tasks) || b.Tasks[i] == nil || b.Tasks[i].State == projections.TaskDead {
					continue
				}
				want[fmt.Sprintf("task %s/%s/%d %s", k.User, k.Name, i, tk.End)] = true
			}
		}
		for w := range want {
			if !listed[w] {
				t.Errorf("positions %d-%d: %q is not in the diff", span[0], span[1], w)
			}
		}
		for _, ch := range changes {
			key := ch.Kind + " " + ch.Name + " " + ch.What
			switch {
			case ch.Kind == "job" && ch.What == "submitted", ch.Kind == "machine" && ch.What == "added", ch.Kind == "quota":
				if !want[key] {
					t.Errorf("positions %d-%d: the diff lists %q, which the events do not say", span[0], span[1], key)
				}
			}
		}
		if len(want) == 0 && span[1]-span[0] > 1 {
			t.Errorf("positions %d-%d: the events say nothing to check", span[0], span[1])
		}
		if again := projections.Diff(before, after, "", nil); fmt.Sprint(again) != fmt.Sprint(changes) {
			t.Errorf("positions %d-%d: two diffs of the same states differ", span[0], span[1])
		}
	}
}

// A state does not differ from itself, and a user's diff holds only that
// user's jobs, tasks and quotas.
func TestDiffOfAStateWithItselfAndOfAUser(t *testing.T) {
	c := sim.New(sim.Small, 5)
	c.Run(3000)
	before, after := stateAfter(t, c.Log, 1000), stateAfter(t, c.Log, 3000)
	if d := projections.Diff(after, after, "", nil); len(d) != 0 {
		t.Fatalf("a state differs from itself: %v", d)
	}
	all := projections.Diff(before, after, "", nil)
	mine := projections.Diff(before, after, "u1", nil)
	if len(mine) == 0 || len(mine) >= len(all) {
		t.Fatalf("u1's diff has %d changes of %d", len(mine), len(all))
	}
	for _, ch := range mine {
		if (ch.Kind == "job" || ch.Kind == "task" || ch.Kind == "quota") && ch.Name[:3] != "u1/" {
			t.Errorf("u1's diff lists %v", ch)
		}
	}
}

// A spec change names the fields that differ, with their values.
func TestDiffNamesTheSpecFieldsThatChanged(t *testing.T) {
	c := sim.New(sim.Small, 3)
	c.Run(6000)
	n := 0
	var u *events.JobUpdated
	for i, e := range c.Log {
		if p, ok := e.Data.(*events.JobUpdated); ok {
			n, u = i+1, p
			break
		}
	}
	if u == nil {
		t.Fatal("no JobUpdated in the history")
	}
	before, after := stateAfter(t, c.Log, n-1), stateAfter(t, c.Log, n)
	for _, ch := range projections.Diff(before, after, "", nil) {
		if ch.Kind == "job" && ch.What == "spec changed" {
			// A field by its path with its values: "args: [..] -> [..]",
			// "+ priority: 1" (unset before), "- labels.x: ..." (unset after).
			field := regexp.MustCompile(`^version \d+: (\+ |- )?[a-z_][a-z_.0-9]*: \S`)
			if ch.Before != fmt.Sprintf("version %d", u.PreviousVersion) || !field.MatchString(ch.After) {
				t.Fatalf("spec change: %+v", ch)
			}
			return
		}
	}
	t.Fatalf("the update at %d is not in the diff", n)
}
