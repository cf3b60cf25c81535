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
	var (
		parts              []string
		killed, submitted  []string
		stopped, inPlace   int
		added              int
		evicted            = map[string]int{}
		committedInUpdates = map[string]bool{}
	)
	for _, e := range evs {
		if p, ok := e.Data.(*events.JobUpdated); ok && !p.RestartNeeded {
			committedInUpdates[p.Spec.GetUser()+"/"+p.Spec.GetName()] = true
		}
	}
	for _, e := range evs {
		switch p := e.Data.(type) {
		case *events.JobSubmitted:
			submitted = append(submitted, fmt.Sprintf("%s/%s (%s)", p.Spec.GetUser(), p.Spec.GetName(), count(int(p.Spec.GetTaskCount()), "task")))
		case *events.JobUpdated:
			how := "rolling: tasks restart a few at a time"
			if !p.RestartNeeded {
				how = "in place"
			}
			parts = append(parts, fmt.Sprintf("%s/%s to spec version %d (%s)", p.Spec.GetUser(), p.Spec.GetName(), p.SpecVersion, how))
		case *events.JobUpdateCommitted:
			if !committedInUpdates[p.User+"/"+p.Job] {
				parts = append(parts, fmt.Sprintf("%s/%s keeps spec version %d", p.User, p.Job, p.SpecVersion))
			}
		case *events.JobUpdateRolledBack:
			parts = append(parts, fmt.Sprintf("%s/%s back to spec version %d (as version %d)", p.User, p.Job, p.ToVersion, p.SpecVersion))
		case *events.JobKilled:
			killed = append(killed, p.User+"/"+p.Job)
		case *events.TaskKilled:
			stopped++
		case *events.TaskEvicted:
			evicted[p.Reason]++
		case *events.TaskUpdated:
			if !p.RestartNeeded {
				inPlace++
			}
		case *events.TaskSubmitted:
			if p.Reason == "scaled-up" {
				added++
			}
		case *events.MachineDrainSet:
			if p.Draining {
				parts = append(parts, "machine "+p.Machine+" draining")
			} else {
				parts = append(parts, "machine "+p.Machine+" no longer draining")
			}
		case *events.MachineRemoved:
			parts = append(parts, "machine "+p.Machine+" removed")
		case *events.QuotaSet:
			parts = append(parts, fmt.Sprintf("quota of %s in %s set", p.User, p.Band))
		case *events.AllocSetCreated:
			parts = append(parts, fmt.Sprintf("alloc set %s/%s created (%d allocs)", p.User, p.Name, p.Count))
		case *events.AllocSetRemoved:
			parts = append(parts, fmt.Sprintf("alloc set %s/%s removed", p.User, p.Name))
		}
	}
	if len(submitted) > 0 {
		parts = append([]string{"submitted " + few(submitted)}, parts...)
	}
	if len(killed) > 0 {
		parts = append(parts, "killed "+few(killed))
	}
	if stopped > 0 {
		parts = append(parts, count(stopped, "task")+" stopped")
	}
	if added > 0 {
		parts = append(parts, count(added, "task")+" added")
	}
	if inPlace > 0 {
		parts = append(parts, count(inPlace, "task")+" moved in place")
	}
	reasons := make([]string, 0, len(evicted))
	for r := range evicted {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		switch r {
		case "update":
			parts = append(parts, count(evicted[r], "task")+" restarting on the new version")
		default:
			parts = append(parts, fmt.Sprintf("%s evicted (%s), to be placed again", count(evicted[r], "task"), r))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, Summary(evs[0]))
	}
	return fmt.Sprintf("%s (events %d..%d)", strings.Join(parts, "; "), evs[0].Position, evs[len(evs)-1].Position)
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
