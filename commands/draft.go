package commands

import (
	"fmt"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// draft accumulates the events of one command. The state does not change
// until the events are appended and applied, so a draft keeps an overlay of
// what its own events did (a task's new state, a job's new spec version,
// quota just charged), and later decisions in the same command read
// through it: the job finishes only if no task is left after this command.
type draft struct {
	s       *projections.State
	now     time.Time
	evs     []events.Event
	status  map[*projections.Task]projections.TaskState
	replace map[*projections.Task]bool
	current map[*projections.Job]projections.SpecVersion
	updates map[*projections.Job]*projections.Update
	touched []*projections.Job
	seen    map[*projections.Job]bool
	ended   map[*projections.Job]bool
	charged map[projections.UserBand]projections.Resources
}

func newDraft(s *projections.State, now time.Time) *draft {
	return &draft{s: s, now: now,
		status:  map[*projections.Task]projections.TaskState{},
		replace: map[*projections.Task]bool{},
		current: map[*projections.Job]projections.SpecVersion{},
		updates: map[*projections.Job]*projections.Update{},
		seen:    map[*projections.Job]bool{},
		ended:   map[*projections.Job]bool{},
		charged: map[projections.UserBand]projections.Resources{},
	}
}

func (b *draft) add(stream string, p events.Payload) {
	b.evs = append(b.evs, events.New(stream, b.now, p))
}

// state is a task's state after the draft's events so far.
func (b *draft) state(t *projections.Task) projections.TaskState {
	if st, ok := b.status[t]; ok {
		return st
	}
	return t.State
}

func (b *draft) dead(t *projections.Task) bool { return b.state(t) == projections.TaskDead }

// placed: the task holds a machine after the draft's events so far (its
// process may run there).
func (b *draft) placed(t *projections.Task) bool {
	st := b.state(t)
	return st == projections.TaskScheduled || st == projections.TaskRunning
}

// changed reports whether the draft's events changed the task already.
func (b *draft) changed(t *projections.Task) bool {
	_, ok := b.status[t]
	return ok
}

func (b *draft) replacing(t *projections.Task) bool {
	if r, ok := b.replace[t]; ok {
		return r
	}
	return t.Replacing
}

// currentOf is the job's spec in force after the draft's events so far.
func (b *draft) currentOf(j *projections.Job) projections.SpecVersion {
	if v, ok := b.current[j]; ok {
		return v
	}
	return projections.SpecVersion{Version: j.Current, Spec: j.Spec()}
}

// updateOf is the job's open update after the draft's events so far, or nil.
func (b *draft) updateOf(j *projections.Job) *projections.Update {
	if u, ok := b.updates[j]; ok {
		return u
	}
	return j.Update
}

// latestVersion is the highest spec version given after the draft's events.
func (b *draft) latestVersion(j *projections.Job) int64 {
	return max(j.LatestVersion(), b.currentOf(j).Version)
}

func (b *draft) jobEnded(j *projections.Job) bool { return j.Dead() || b.ended[j] }

func (b *draft) touch(j *projections.Job) {
	if !b.seen[j] {
		b.seen[j] = true
		b.touched = append(b.touched, j)
	}
}

func taskStream(t *projections.Task) string {
	return events.TaskStream(t.Job.User, t.Job.Name, t.Index)
}
func jobStream(j *projections.Job) string { return events.JobStream(j.User, j.Name) }

func ref(t *projections.Task) *events.TaskRef {
	return &events.TaskRef{User: t.Job.User, Job: t.Job.Name, Index: t.Index}
}

// submit makes a task pending at a spec version.
func (b *draft) submit(j *projections.Job, index int32, version int64, reason string) {
	b.submitAfter(j, index, version, reason, 0, 0)
}

// submitAfter submits a task that may not be placed before notBeforeUS
// (0: at once), its failures in a row being streak.
func (b *draft) submitAfter(j *projections.Job, index int32, version int64, reason string, notBeforeUS int64, streak int32) {
	b.add(events.TaskStream(j.User, j.Name, index), &events.TaskSubmitted{User: j.User, Job: j.Name, Index: index, SpecVersion: version,
		Reason: reason, NotBeforeUs: notBeforeUS, FailStreak: streak})
	if t := j.Task(index); t != nil {
		b.status[t] = projections.TaskPending
		b.replace[t] = reason == "updated" || (reason == "rescheduled" && b.replacing(t))
	}
	b.touch(j)
}

// evict evicts a placed task and resubmits it (its job still wants it).
// stopping: its process still runs and is to be stopped (a drain, an
// update), so its machine holds its resources until the agent reports it
// gone (TaskStopped); not for a process the agent ended already.
func (b *draft) evict(t *projections.Task, reason, message string, preemptor *events.TaskRef, stopping bool) {
	b.evictOnly(t, reason, message, preemptor, stopping)
	b.afterDeath(t, projections.Evicted)
}

// evictOnly evicts a placed task; the caller decides what replaces it.
func (b *draft) evictOnly(t *projections.Task, reason, message string, preemptor *events.TaskRef, stopping bool) {
	b.add(taskStream(t), &events.TaskEvicted{User: t.Job.User, Job: t.Job.Name, Index: t.Index, Machine: t.Machine,
		Reason: reason, Preemptor: preemptor, Message: message, Stopping: stopping && b.placed(t)})
	b.status[t] = projections.TaskDead
	b.touch(t.Job)
}

func (b *draft) lose(t *projections.Task, reason string) {
	b.add(taskStream(t), &events.TaskLost{User: t.Job.User, Job: t.Job.Name, Index: t.Index, Machine: t.Machine, Reason: reason})
	b.status[t] = projections.TaskDead
	b.afterDeath(t, projections.Lost)
}

// kill kills a task. One placed is stopping: its machine holds its
// resources until the agent reports its process gone (TaskStopped), after
// the job's kill_timeout at most.
func (b *draft) kill(t *projections.Task, reason string) {
	machine := ""
	if b.state(t) != projections.TaskPending {
		machine = t.Machine
	}
	b.add(taskStream(t), &events.TaskKilled{User: t.Job.User, Job: t.Job.Name, Index: t.Index, Machine: machine, Reason: reason,
		Stopping: b.placed(t)})
	b.status[t] = projections.TaskDead
	b.touch(t.Job)
}

func (b *draft) finish(t *projections.Task, code int32) {
	b.add(taskStream(t), &events.TaskFinished{User: t.Job.User, Job: t.Job.Name, Index: t.Index, Machine: t.Machine, ExitCode: code})
	b.status[t] = projections.TaskDead
	b.afterDeath(t, projections.Finished)
}

func (b *draft) fail(t *projections.Task, f *events.TaskFailed) {
	b.add(taskStream(t), f)
	if f.WillRestart {
		b.status[t] = projections.TaskScheduled
	} else {
		b.status[t] = projections.TaskDead
	}
	// Judge the update first: a revert puts the old spec in force, and
	// the replacement below runs it.
	b.judgeFailure(t, f)
	if !f.WillRestart {
		b.afterDeath(t, projections.Failed)
	}
}

// afterDeath resubmits a task that its job still wants: always after an
// eviction or loss (not the task's fault), after a failure or a clean exit
// as the restart policy says. The replacement runs the spec in force.
func (b *draft) afterDeath(t *projections.Task, how projections.TaskEnd) {
	j := t.Job
	b.touch(j)
	if b.jobEnded(j) {
		return
	}
	cur := b.currentOf(j)
	if t.Index >= cur.Spec.GetTaskCount() {
		return
	}
	policy := cur.Spec.GetRestart()
	mode := policy.GetMode()
	want, own := false, false
	switch how {
	case projections.Evicted, projections.Lost:
		want = true
	case projections.Failed:
		want = mode != "never" && (policy.GetMaxRestarts() == 0 || t.Restarts < policy.GetMaxRestarts())
		own = true
	case projections.Finished:
		want = mode == "always"
		own = true
	}
	if !want {
		return
	}
	// A death of the task's own making backs it off, doubling with each
	// in a row (the rule the agent's restarts in place follow), so a task
	// that cannot run costs a bounded number of events an hour; one that
	// ran healthy for a while starts over. Evictions and losses are not
	// its doing: it goes back at once, its streak kept.
	streak, notBefore := t.FailStreak, int64(0)
	if own {
		if t.StartedUS != 0 && policy.RanHealthy(b.now.Sub(time.UnixMicro(t.StartedUS))) {
			streak = 0
		}
		streak++
		notBefore = b.now.Add(policy.Backoff(streak)).UnixMicro()
	}
	b.submitAfter(j, t.Index, cur.Version, "rescheduled", notBefore, streak)
}

// killJob kills a job's remaining tasks, then the job, then the jobs that
// were waiting for it to finish, which now never will.
func (b *draft) killJob(j *projections.Job, reason string) {
	if b.jobEnded(j) {
		return
	}
	for _, t := range j.Tasks {
		if t != nil && !b.dead(t) {
			b.kill(t, "job killed")
		}
	}
	b.add(jobStream(j), &events.JobKilled{User: j.User, Job: j.Name, Reason: reason})
	b.ended[j] = true
	for _, dep := range b.s.WaitingOn(j.Key()) {
		b.killJob(dep, fmt.Sprintf("job %s, which it was to start after, was killed", j.Name))
	}
}

// finishJobs ends every touched job none of whose tasks is left, and
// starts the jobs deferred until it finished.
func (b *draft) finishJobs() {
	for i := 0; i < len(b.touched); i++ { // killJob and releases may append
		j := b.touched[i]
		if b.jobEnded(j) || j.Deferred || len(j.Tasks) == 0 {
			continue
		}
		done := true
		for _, t := range j.Tasks {
			if t != nil && !b.dead(t) {
				done = false
				break
			}
		}
		if !done {
			continue
		}
		b.add(jobStream(j), &events.JobFinished{User: j.User, Job: j.Name})
		b.ended[j] = true
		for _, dep := range b.s.WaitingOn(j.Key()) {
			if b.jobEnded(dep) {
				continue
			}
			cur := b.currentOf(dep)
			for i := int32(0); i < cur.Spec.GetTaskCount(); i++ {
				b.submit(dep, i, cur.Version, "new")
			}
		}
	}
}

// admit charges asked (giving back release) against user's quota in band,
// counting what this draft charged already, or refuses with the numbers.
// Best-effort quota is unlimited (Borg §2.5).
//
// Every sum is checked: a total past events.MaxTotal is refused, so that no
// charge can wrap negative and let over-quota work in (best-effort too,
// which needs no quota).
func (b *draft) admit(user string, band projections.Band, asked, release projections.Resources, field string) error {
	ub := projections.UserBand{User: user, Band: band}
	inUse := b.s.Charged[ub].Add(b.charged[ub]).Sub(release)
	if asked.Negative() || inUse.Negative() {
		return refuse(InvalidArgument, field, "%s asks for [%s] in band %s with [%s] in use: quantities must not be negative", user, asked, band, inUse)
	}
	after, ok := inUse.AddChecked(asked)
	if !ok {
		return refuse(ResourceExhausted, field,
			"%s would hold more than the most any user may hold in band %s (%d in a dimension): asks for [%s] with [%s] in use. Ask for less",
			user, band, int64(events.MaxTotal), asked, inUse)
	}
	if band != projections.BestEffort {
		granted := b.s.Quotas[ub]
		if !after.LessEq(granted) {
			return refuse(ResourceExhausted, field,
				"over quota: %s asks for [%s] in band %s; granted [%s]; in use [%s]; short in %v. Ask for less, use a lower band, or ask an admin for more %s quota",
				user, asked, band, granted, inUse, after.Exceeding(granted), band)
		}
	}
	b.charged[ub] = b.charged[ub].Add(asked).Sub(release)
	return nil
}
