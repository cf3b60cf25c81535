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
		a.Package == b.Package && a.AllocSet == b.AllocSet && a.Appclass == b.Appclass &&
		slices.Equal(a.Spread, b.Spread) && a.DistinctHosts == b.DistinctHosts && a.Pack == b.Pack
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
// job's disruption budget allows (disruptionBudget, the rule drains keep
// too). A halted update rolls
// nothing more; an update with canaries not yet promoted rolls only the
// canaries (the lowest indexes).
func (b *draft) rollForward(j *projections.Job) {
	if b.jobEnded(j) {
		return
	}
	target := b.currentOf(j)
	budget := b.disruptionBudget(j)
	u := b.updateOf(j)
	halted := u != nil && u.To == target.Version && u.Halted != ""
	canaries := int32(-1) // no gate
	if u != nil && u.To == target.Version && !u.Promoted && target.Spec.GetUpdate().GetCanary() > 0 {
		canaries = target.Spec.GetUpdate().GetCanary()
	}
	sameFields := map[int64]bool{} // by old version: the job-wide fields that restart tasks are equal
	for _, t := range j.Tasks {
		if t == nil || t.SpecVersion == target.Version || t.Index >= target.Spec.TaskCount {
			continue
		}
		if b.changed(t) || t.State == projections.TaskDead {
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
				Running: t.Live()}) // placed: UPDATE_RUNNING, as the trace has it of a scheduled task
		case t.State == projections.TaskPending:
			b.add(taskStream(t), &events.TaskUpdated{User: j.User, Job: j.Name, Index: t.Index, SpecVersion: target.Version,
				RestartNeeded: true})
		case halted || (canaries >= 0 && t.Index >= canaries):
		case b.disrupted(t):
			// It does not serve anyway (a bad version being reverted):
			// replacing it disrupts nothing more.
			b.replaceTask(j, t, target.Version)
		case budget > 0:
			b.replaceTask(j, t, target.Version)
			budget--
		}
	}
}

func (b *draft) replaceTask(j *projections.Job, t *projections.Task, version int64) {
	b.evictOnly(t, "update", fmt.Sprintf("rolling update to spec version %d", version), nil, true)
	b.submit(j, t.Index, version, "updated")
}

// stepUpdate judges a job's open update at the draft's time: once every
// task runs the new version settled it commits itself (unless the policy
// opts out, or canaries wait for a promote); an update in which no
// replacement settled for the progress deadline has failed. It reads the
// projection: call it before the draft changes the job's tasks.
func (b *draft) stepUpdate(j *projections.Job) {
	if _, changed := b.updates[j]; changed || b.jobEnded(j) {
		return
	}
	u := j.Update
	phase, r := j.UpdatePhase(b.now.UnixMicro())
	switch phase {
	case projections.UpdateComplete:
		b.commitUpdate(j, fmt.Sprintf("every task runs spec version %d and is healthy", u.To))
	case projections.UpdateRolling:
		deadline := j.Spec().GetUpdate().ProgressDeadline()
		if b.now.UnixMicro()-max(u.SinceUS, r.ProgressUS) > deadline.Microseconds() {
			b.failUpdate(j, fmt.Sprintf("no task turned healthy on spec version %d in %s (progress_deadline)", u.To, deadline))
		}
	}
}

// judgeFailure fails a job's open update when a task on its new version
// failed before it settled: the version does not work.
func (b *draft) judgeFailure(t *projections.Task, f *events.TaskFailed) {
	j := t.Job
	u := b.updateOf(j)
	if u == nil || u.Halted != "" || t.SpecVersion != u.To || b.jobEnded(j) || t.Settled(b.now.UnixMicro()) {
		return
	}
	why := f.Message
	if why == "" {
		why = fmt.Sprintf("exit code %d", f.ExitCode)
		if f.Signal != "" {
			why = "killed by " + f.Signal
		}
	}
	b.failUpdate(j, fmt.Sprintf("task %d failed on spec version %d before it was healthy: %s", t.Index, u.To, why))
}

// failUpdate halts a job's open update and, when its policy says so,
// reverts it.
func (b *draft) failUpdate(j *projections.Job, reason string) {
	u := b.updateOf(j)
	b.add(jobStream(j), &events.JobUpdateHalted{User: j.User, Job: j.Name, SpecVersion: u.To, Reason: reason})
	halted := *u
	halted.Halted = reason
	b.updates[j] = &halted
	b.touch(j)
	if b.currentOf(j).Spec.AutoRevert() {
		b.rollback(j, fmt.Sprintf("reverted to spec version %d: %s", u.From, reason))
	}
}

func (b *draft) commitUpdate(j *projections.Job, reason string) {
	u := b.updateOf(j)
	b.add(jobStream(j), &events.JobUpdateCommitted{User: j.User, Job: j.Name, SpecVersion: u.To, Reason: reason})
	b.updates[j] = nil
	b.touch(j)
}

// rollback puts the spec the open update replaced in force again, as a
// new version, and rolls the tasks back to it.
func (b *draft) rollback(j *projections.Job, reason string) error {
	u := b.updateOf(j)
	back := j.SpecOf(u.From)
	if back == nil {
		return refuse(FailedPrecondition, "job", "%s: spec version %d is missing", jobRef(j.User, j.Name), u.From)
	}
	cur := b.currentOf(j)
	v := b.latestVersion(j) + 1
	b.add(jobStream(j), &events.JobUpdateRolledBack{User: j.User, Job: j.Name, FromVersion: cur.Version, ToVersion: u.From,
		SpecVersion: v, Reason: reason})
	b.current[j] = projections.SpecVersion{Version: v, Spec: back}
	b.updates[j] = nil
	b.touch(j)
	b.scale(j, cur.Spec.TaskCount, back.TaskCount, v)
	b.rollForward(j)
	return nil
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
