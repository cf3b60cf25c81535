package commands

import (
	"fmt"
	"maps"
	"slices"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxDisruptions is how many tasks a rolling update stops at once
// when the spec's update policy does not say.
const DefaultMaxDisruptions = 1

// jobRestartNeeded reports whether any task of new needs a restart.
func jobRestartNeeded(old, new *events.JobSpec) bool {
	if !restartFieldsEqual(old, new) {
		return true
	}
	for i := int32(0); i < min(old.TaskCount, new.TaskCount); i++ {
		if !proto.Equal(old.GetOverrides()[i], new.GetOverrides()[i]) {
			return true
		}
	}
	return false
}

func restartFieldsEqual(a, b *events.JobSpec) bool {
	return a.Command == b.Command && slices.Equal(a.Args, b.Args) && maps.Equal(a.Env, b.Env) &&
		projections.ResourcesOf(a.Resources) == projections.ResourcesOf(b.Resources) &&
		slices.EqualFunc(a.Constraints, b.Constraints, func(x, y *events.Constraint) bool { return proto.Equal(x, y) }) &&
		slices.Equal(a.PortNames, b.PortNames) && slices.Equal(a.SecretEnv, b.SecretEnv) &&
		a.Package == b.Package && a.AllocSet == b.AllocSet && a.Appclass == b.Appclass
}

// maxDisruptions is the update policy's limit on tasks stopped at once.
func maxDisruptions(spec *events.JobSpec) int {
	if n := spec.GetUpdate().GetMaxDisruptions(); n > 0 {
		return int(n)
	}
	return DefaultMaxDisruptions
}

// rollForward moves a job's live tasks toward the spec in force: tasks that
// need no restart, and pending ones, move at once (TaskUpdated); placed
// ones that need a restart are stopped and resubmitted, no more than the
// update policy's max_disruptions stopped and not yet running again.
func (b *draft) rollForward(j *projections.Job) {
	if b.jobEnded(j) {
		return
	}
	target := b.currentOf(j)
	limit := maxDisruptions(target.Spec)
	inFlight := 0
	for _, t := range j.Tasks {
		if t != nil && !b.dead(t) && b.replacing(t) {
			inFlight++
		}
	}
	sameFields := map[int64]bool{} // by old version: the job-wide fields that restart tasks are equal
	for _, t := range j.Tasks {
		if t == nil || t.SpecVersion == target.Version || t.Index >= target.Spec.TaskCount {
			continue
		}
		if _, touched := b.status[t]; touched || t.State == projections.TaskDead {
			continue
		}
		old := j.SpecOf(t.SpecVersion)
		same, ok := sameFields[t.SpecVersion]
		if !ok && old != nil {
			same = restartFieldsEqual(old, target.Spec)
			sameFields[t.SpecVersion] = same
		}
		restart := old == nil || !same || !proto.Equal(old.GetOverrides()[t.Index], target.Spec.GetOverrides()[t.Index])
		switch {
		case !restart:
			b.add(taskStream(t), &events.TaskUpdated{User: j.User, Job: j.Name, Index: t.Index, SpecVersion: target.Version,
				Running: t.State == projections.TaskRunning})
		case t.State == projections.TaskPending:
			b.add(taskStream(t), &events.TaskUpdated{User: j.User, Job: j.Name, Index: t.Index, SpecVersion: target.Version,
				RestartNeeded: true})
		case inFlight < limit:
			b.evictOnly(t, "update", fmt.Sprintf("rolling update to spec version %d", target.Version), nil)
			b.submit(j, t.Index, target.Version, "updated")
			inFlight++
		}
	}
}

// scale kills the tasks beyond a new, smaller count and submits the ones a
// larger count adds.
func (b *draft) scale(j *projections.Job, oldCount, newCount int32, version int64) {
	for _, t := range j.Tasks {
		if t != nil && t.Index >= newCount && !b.dead(t) {
			b.kill(t, "scaled-down")
		}
	}
	for i := oldCount; i < newCount; i++ {
		if t := j.Task(i); t == nil || b.dead(t) {
			b.submit(j, i, version, "scaled-up")
		}
	}
}
