package projections

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/corralhq/corral/events"
)

// Change is one difference between two states of a cell: an entity (a job,
// a task, a machine, a user's quota in a band, the price sheet), what
// happened to it, and what it was before and after where that says more
// than the change's name.
type Change struct {
	Kind   string // job, task, machine, quota, prices
	Name   string // user/job, user/job/index, machine, user/band
	What   string // submitted, ended, spec changed, started, moved, ...
	Before string
	After  string
}

// Diff lists what differs between two states of one cell, before at an
// earlier position than after: jobs submitted, whose spec changed (the
// fields that differ) or that ended; tasks started, moved, restarted or
// ended (the tasks of a job submitted in between are counted in its
// submission, not listed); machines added, removed, down, up, drained,
// resized; quotas and price sheets set. With user set, only that user's
// jobs, tasks and quotas. Changes come in a fixed order (machines, jobs
// and their tasks, quotas, prices, each by name), so the same two states
// always give the same list. A spec change is listed by SpecChanges of the
// two specs as redact returns them (the API's redaction of secrets; nil
// shows them as they are).
func Diff(before, after *State, user string, redact func(*events.JobSpec) *events.JobSpec) []Change {
	if redact == nil {
		redact = func(s *events.JobSpec) *events.JobSpec { return s }
	}
	var out []Change
	add := func(kind, name, what, b, a string) {
		out = append(out, Change{Kind: kind, Name: name, What: what, Before: b, After: a})
	}
	diffMachines(before, after, add)
	diffJobs(before, after, user, redact, add)
	diffQuotas(before, after, user, add)
	if n, m := len(before.PriceSheets), len(after.PriceSheets); m > n {
		for _, ps := range after.PriceSheets[n:] {
			add("prices", fmt.Sprintf("sheet %d", ps.Position), "set", "", ps.Sheet.GetCurrency())
		}
	}
	return out
}

func diffMachines(before, after *State, add func(kind, name, what, b, a string)) {
	names := make([]string, 0, len(after.Machines)+len(before.Machines))
	for n := range after.Machines {
		names = append(names, n)
	}
	for n := range before.Machines {
		if after.Machines[n] == nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		b, a := before.Machines[n], after.Machines[n]
		switch {
		case b == nil:
			add("machine", n, "added", "", a.Capacity.String())
		case a == nil:
			add("machine", n, "removed", b.Capacity.String(), "")
		default:
			if b.State != a.State {
				add("machine", n, a.State.String(), b.State.String(), a.State.String()+reasonSuffix(a.Reason))
			}
			if b.Draining != a.Draining {
				what := "drained"
				if !a.Draining {
					what = "undrained"
				}
				add("machine", n, what, "", a.Reason)
			}
			if b.Capacity != a.Capacity {
				add("machine", n, "resized", b.Capacity.String(), a.Capacity.String())
			}
		}
	}
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

func diffJobs(before, after *State, user string, redact func(*events.JobSpec) *events.JobSpec, add func(kind, name, what, b, a string)) {
	keys := make([]JobKey, 0, len(after.Jobs))
	for k := range after.Jobs {
		if user == "" || k.User == user {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y JobKey) int {
		return cmp.Or(cmp.Compare(x.User, y.User), cmp.Compare(x.Name, y.Name))
	})
	for _, k := range keys {
		a := after.Jobs[k]
		name := k.User + "/" + k.Name
		b := before.Jobs[k]
		if b == nil || b.SubmittedUS != a.SubmittedUS {
			// A new job, or the name used again by a new one.
			tasks := 0
			for _, t := range a.Tasks {
				if t != nil {
					tasks++
				}
			}
			add("job", name, "submitted", "", fmt.Sprintf("version %d, priority %d, %d tasks, now %s", a.Current, a.Spec().GetPriority(), tasks, a.State()))
			continue
		}
		if b.Current != a.Current {
			changes := SpecChanges(redact(b.Spec()), redact(a.Spec()))
			if len(changes) == 0 {
				changes = []string{"no field differs"}
			}
			add("job", name, "spec changed", fmt.Sprintf("version %d", b.Current), fmt.Sprintf("version %d: %s", a.Current, strings.Join(changes, "; ")))
		}
		if !b.Dead() && a.Dead() {
			what := "killed"
			if a.End == JobFinishedEnd {
				what = "finished"
			}
			add("job", name, what, b.State().String(), a.EndReason)
		}
		diffTasks(b, a, name, add)
	}
}

func diffTasks(b, a *Job, job string, add func(kind, name, what, b, a string)) {
	for i, at := range a.Tasks {
		if at == nil {
			continue
		}
		name := job + "/" + fmt.Sprint(i)
		var bt *Task
		if i < len(b.Tasks) {
			bt = b.Tasks[i]
		}
		if bt == nil {
			add("task", name, "submitted", "", at.State.String())
			continue
		}
		live := func(t *Task) bool { return t.State == TaskScheduled || t.State == TaskRunning }
		switch {
		case bt.State != TaskDead && at.State == TaskDead:
			add("task", name, at.End.String(), taskWhere(bt), endedWhy(at))
		case bt.State == TaskDead && at.State != TaskDead:
			add("task", name, "resubmitted", bt.End.String(), taskWhere(at))
		case live(bt) && live(at) && bt.Machine != at.Machine:
			add("task", name, "moved", bt.Machine, at.Machine)
		case bt.State == TaskPending && live(at):
			add("task", name, "started", "pending", taskWhere(at))
		case live(bt) && at.State == TaskPending:
			add("task", name, "pending again", taskWhere(bt), reasonOr(at.Reason, "pending"))
		}
		if at.Restarts > bt.Restarts {
			add("task", name, "restarted", fmt.Sprint(bt.Restarts), fmt.Sprint(at.Restarts))
		}
	}
}

func reasonOr(reason, or string) string {
	if reason == "" {
		return or
	}
	return reason
}

// endedWhy says where a dead task last ran and why it ended: the failure's
// message, or the reason of its kill, eviction or loss.
func endedWhy(t *Task) string {
	out := "dead"
	if t.Machine != "" {
		out += " on " + t.Machine
	}
	switch t.End {
	case Failed:
		return out + reasonSuffix(t.FailMessage)
	case Killed, Evicted, Lost:
		return out + reasonSuffix(t.Reason)
	}
	return out
}

// taskWhere is a task's state and machine, "running on m7".
func taskWhere(t *Task) string {
	if t.Machine == "" || t.State == TaskPending {
		return t.State.String()
	}
	return t.State.String() + " on " + t.Machine
}

func diffQuotas(before, after *State, user string, add func(kind, name, what, b, a string)) {
	keys := make([]UserBand, 0, len(after.Quotas)+len(before.Quotas))
	seen := map[UserBand]bool{}
	for _, m := range []map[UserBand]Resources{after.Quotas, before.Quotas} {
		for k := range m {
			if !seen[k] && (user == "" || k.User == user) {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(x, y UserBand) int {
		return cmp.Or(cmp.Compare(x.User, y.User), cmp.Compare(x.Band, y.Band))
	})
	for _, k := range keys {
		b, inB := before.Quotas[k]
		a, inA := after.Quotas[k]
		if inB == inA && b == a {
			continue
		}
		bs, as := b.String(), a.String()
		if !inB {
			bs = "none"
		}
		if !inA {
			as = "none"
		}
		add("quota", k.User+"/"+k.Band.String(), "set", bs, as)
	}
}
