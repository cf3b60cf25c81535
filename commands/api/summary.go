package api

import (
	"fmt"
	"sort"
	"strings"

	"github.com/corralhq/corral/events"
)

// Touched says, for people, what one request's events changed: which jobs
// and machines, how many tasks stopped, moved in place or will be placed
// again, and where the events are. A request that touched many things
// names a few and counts the rest.
func Touched(evs []events.Event) string {
	if len(evs) == 0 {
		return "nothing to change"
	}
	t := touched{evicted: map[string]int{}, committedInUpdates: map[string]bool{}}
	for _, e := range evs {
		if p, ok := e.Data.(*events.JobUpdated); ok && !p.RestartNeeded {
			t.committedInUpdates[p.Spec.GetUser()+"/"+p.Spec.GetName()] = true
		}
	}
	for _, e := range evs {
		t.add(e)
	}
	parts := t.summary()
	if len(parts) == 0 {
		parts = append(parts, Summary(evs[0]))
	}
	return fmt.Sprintf("%s (events %d..%d)", strings.Join(parts, "; "), evs[0].Position, evs[len(evs)-1].Position)
}

// touched tallies what a command's events changed: jobs and machines by
// name, tasks by count.
type touched struct {
	parts              []string
	killed, submitted  []string
	stopped, inPlace   int
	added              int
	evicted            map[string]int // by reason
	committedInUpdates map[string]bool
}

func (t *touched) add(e events.Event) {
	switch p := e.Data.(type) {
	case *events.JobSubmitted:
		t.submitted = append(t.submitted, fmt.Sprintf("%s/%s (%s)", p.Spec.GetUser(), p.Spec.GetName(), count(int(p.Spec.GetTaskCount()), "task")))
	case *events.JobUpdated:
		how := "rolling: tasks restart a few at a time"
		if !p.RestartNeeded {
			how = "in place"
		}
		t.parts = append(t.parts, fmt.Sprintf("%s/%s to spec version %d (%s)", p.Spec.GetUser(), p.Spec.GetName(), p.SpecVersion, how))
	case *events.JobUpdateCommitted:
		if !t.committedInUpdates[p.User+"/"+p.Job] {
			t.parts = append(t.parts, fmt.Sprintf("%s/%s keeps spec version %d", p.User, p.Job, p.SpecVersion))
		}
	case *events.JobUpdateRolledBack:
		t.parts = append(t.parts, fmt.Sprintf("%s/%s back to spec version %d (as version %d)", p.User, p.Job, p.ToVersion, p.SpecVersion))
	case *events.JobKilled:
		t.killed = append(t.killed, p.User+"/"+p.Job)
	case *events.TaskKilled:
		t.stopped++
	case *events.TaskEvicted:
		t.evicted[p.Reason]++
	case *events.TaskUpdated:
		if !p.RestartNeeded {
			t.inPlace++
		}
	case *events.TaskSubmitted:
		if p.Reason == "scaled-up" {
			t.added++
		}
	case *events.MachineDrainSet:
		if p.Draining {
			t.parts = append(t.parts, "machine "+p.Machine+" draining")
		} else {
			t.parts = append(t.parts, "machine "+p.Machine+" no longer draining")
		}
	case *events.MachineRemoved:
		t.parts = append(t.parts, "machine "+p.Machine+" removed")
	case *events.QuotaSet:
		t.parts = append(t.parts, fmt.Sprintf("quota of %s in %s set", p.User, p.Band))
	case *events.AllocSetCreated:
		t.parts = append(t.parts, fmt.Sprintf("alloc set %s/%s created (%d allocs)", p.User, p.Name, p.Count))
	case *events.AllocSetRemoved:
		t.parts = append(t.parts, fmt.Sprintf("alloc set %s/%s removed", p.User, p.Name))
	}
}

// summary is the changes in order: submissions first, then each change,
// then the counts.
func (t *touched) summary() []string {
	if len(t.submitted) > 0 {
		t.parts = append([]string{"submitted " + few(t.submitted)}, t.parts...)
	}
	if len(t.killed) > 0 {
		t.parts = append(t.parts, "killed "+few(t.killed))
	}
	if t.stopped > 0 {
		t.parts = append(t.parts, count(t.stopped, "task")+" stopped")
	}
	if t.added > 0 {
		t.parts = append(t.parts, count(t.added, "task")+" added")
	}
	if t.inPlace > 0 {
		t.parts = append(t.parts, count(t.inPlace, "task")+" moved in place")
	}
	reasons := make([]string, 0, len(t.evicted))
	for r := range t.evicted {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		switch r {
		case "update":
			t.parts = append(t.parts, count(t.evicted[r], "task")+" restarting on the new version")
		default:
			t.parts = append(t.parts, fmt.Sprintf("%s evicted (%s), to be placed again", count(t.evicted[r], "task"), r))
		}
	}
	return t.parts
}

// few names up to five things and counts the rest.
func few(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
