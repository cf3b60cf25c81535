package commands

import (
	"maps"
	"strings"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"google.golang.org/protobuf/proto"
)

// UpdateJob pushes a new spec to one job (Spec), or one change to every
// live job a label selector matches (Selector and Change). A change that
// needs a restart (command, args, env, resources, constraints, ...) rolls
// through the tasks a few at a time, never more than the update policy's
// max_disruptions stopped at once (RollingUpdateStep continues it); one
// that does not (priority, labels, policies) moves every task in place.
// The update can be rolled back until it is committed; a job takes one
// uncommitted update at a time. Admission control charges the new spec.
type UpdateJob struct {
	Meta
	User     string          // the jobs' owner; default: the actor
	Spec     *events.JobSpec // the whole new spec of the job named Spec.Name
	Selector string          // or: the jobs to change ...
	Change   JobChange       // ... and how
	Job      string          // or: the job whose ...
	RevertTo int64           // ... spec version RevertTo is pushed again as a new update
	// IfPosition, when set, refuses the update of a job whose spec or
	// update changed after that log position (a plan made then is stale).
	IfPosition int64
}

// JobChange is a partial update applied to each job a selector matches.
type JobChange struct {
	Priority       *int32
	TaskCount      *int32
	SetLabels      map[string]string
	RemoveLabels   []string
	MaxDisruptions *int32
}

func (c JobChange) empty() bool {
	return c.Priority == nil && c.TaskCount == nil && len(c.SetLabels) == 0 && len(c.RemoveLabels) == 0 && c.MaxDisruptions == nil
}

func (c JobChange) apply(spec *events.JobSpec) {
	if c.Priority != nil {
		spec.Priority = *c.Priority
	}
	if c.TaskCount != nil {
		spec.TaskCount = *c.TaskCount
	}
	if len(c.SetLabels) > 0 || len(c.RemoveLabels) > 0 {
		labels := maps.Clone(spec.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, c.SetLabels)
		for _, k := range c.RemoveLabels {
			delete(labels, k)
		}
		spec.Labels = labels
	}
	if c.MaxDisruptions != nil {
		u := proto.Clone(spec.GetUpdate()).(*events.UpdatePolicy)
		if u == nil {
			u = &events.UpdatePolicy{}
		}
		u.MaxDisruptions = *c.MaxDisruptions
		spec.Update = u
	}
}

func (c UpdateJob) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	b := newDraft(s, now)
	switch {
	case c.Spec != nil && c.Selector != "":
		return nil, invalid("selector", "give a spec or a selector with a change, not both")
	case c.RevertTo != 0 && (c.Spec != nil || c.Selector != ""):
		return nil, invalid("revert_to", "a revert takes a job and a version, not a spec or a selector")
	case c.RevertTo != 0 || c.Job != "":
		j, err := liveJob(s, c.Actor, c.User, c.Job)
		if err != nil {
			return nil, err
		}
		old := j.SpecOf(c.RevertTo)
		if old == nil {
			return nil, refuse(NotFound, "revert_to", "%s has no spec version %d (it has 1 to %d)", jobRef(j.User, j.Name), c.RevertTo, j.LatestVersion())
		}
		if err := b.updateJob(c, j, proto.Clone(old).(*events.JobSpec), false); err != nil {
			return nil, err
		}
	case c.Spec != nil:
		user := owner(c.Actor, c.User)
		j := s.Job(user, c.Spec.Name)
		if j == nil {
			if !ValidName(c.Spec.Name) {
				return nil, ValidateSpec(c.Spec)
			}
			return nil, refuse(NotFound, "name", "%s does not exist; submit it first", jobRef(user, c.Spec.Name))
		}
		spec := proto.Clone(c.Spec).(*events.JobSpec)
		if err := b.updateJob(c, j, spec, false); err != nil {
			return nil, err
		}
	case c.Selector != "":
		if c.Change.empty() {
			return nil, invalid("change", "a selector update needs something to change: priority, count, labels or max_disruptions")
		}
		jobs, err := selectJobs(s, c.Actor, c.User, c.Selector)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			spec := proto.Clone(j.Spec()).(*events.JobSpec)
			c.Change.apply(spec)
			if err := b.updateJob(c, j, spec, true); err != nil {
				return nil, err
			}
		}
	default:
		return nil, invalid("spec", "give the new spec, or a selector and a change")
	}
	b.finishJobs()
	return b.evs, nil
}

// updateJob adds the events of one job's update to b.
func (b *draft) updateJob(c UpdateJob, j *projections.Job, spec *events.JobSpec, several bool) error {
	changes, err := b.mayUpdate(c, j, spec)
	if err != nil || !changes {
		return naming(err, j, several)
	}
	if err := b.chargeUpdate(j, spec); err != nil {
		return naming(err, j, several)
	}
	b.recordUpdate(j, spec)
	return nil
}

// naming makes err name job j when several jobs are updated: fields become
// jobs[user/name].field, messages start with the job.
func naming(err error, j *projections.Job, several bool) error {
	e, ok := err.(*Error)
	if !ok || !several {
		return err
	}
	if len(e.Details) > 0 {
		for i := range e.Details {
			e.Details[i].Field = "jobs[" + j.Key().String() + "]." + e.Details[i].Field
		}
		e.Field = e.Details[0].Field
	} else if ref := jobRef(j.User, j.Name); !strings.Contains(e.Msg, ref) {
		e.Msg = ref + ": " + e.Msg
	}
	return err
}

// mayUpdate checks that c may give job j the new spec, and reports whether
// the spec changes anything.
func (b *draft) mayUpdate(c UpdateJob, j *projections.Job, spec *events.JobSpec) (bool, error) {
	if err := mayChange(c.Actor, j.User, jobRef(j.User, j.Name)); err != nil {
		return false, err
	}
	if c.IfPosition > 0 && j.ChangedPos > c.IfPosition {
		return false, refuse(FailedPrecondition, "if_position", "%s changed at log position %d, after the plan at %d: plan again", jobRef(j.User, j.Name), j.ChangedPos, c.IfPosition)
	}
	if j.Dead() {
		return false, refuse(FailedPrecondition, "", "%s is dead (%s); submit it again instead", jobRef(j.User, j.Name), endName(j))
	}
	if u := b.updateOf(j); u != nil {
		return false, refuse(FailedPrecondition, "", "%s has an uncommitted update to spec version %d: commit it or roll it back first", jobRef(j.User, j.Name), u.To)
	}
	spec.User = j.User
	if err := ValidateSpec(spec); err != nil {
		return false, err
	}
	if err := secretsGiven(spec); err != nil {
		return false, err
	}
	cur := j.Spec()
	if spec.StartAfter != cur.StartAfter {
		return false, invalid("start_after", "cannot change once the job is submitted (it is %q)", cur.StartAfter)
	}
	return !proto.Equal(spec, cur), nil
}

// chargeUpdate admits the new spec's demand against the user's quota in its
// band, releasing what the job holds now.
func (b *draft) chargeUpdate(j *projections.Job, spec *events.JobSpec) error {
	if err := checkAllocSet(b.s, spec); err != nil {
		return err
	}
	var demand projections.Resources
	if spec.AllocSet == "" {
		var ok bool
		if demand, ok = projections.DemandChecked(spec); !ok {
			return tooLarge(spec)
		}
	}
	band := projections.BandOf(spec.Priority)
	release := projections.Resources{}
	if j.ChargeBand == band {
		release = j.Charge
	} else if !j.Charge.IsZero() {
		ub := projections.UserBand{User: j.User, Band: j.ChargeBand}
		b.charged[ub] = b.charged[ub].Sub(j.Charge)
	}
	return b.admit(j.User, band, demand, release, "resources")
}

// recordUpdate records job j's new spec version and starts rolling it out.
func (b *draft) recordUpdate(j *projections.Job, spec *events.JobSpec) {
	cur := j.Spec()
	v := j.LatestVersion() + 1
	restart := jobRestartNeeded(cur, spec)
	b.add(jobStream(j), &events.JobUpdated{Spec: spec, SpecVersion: v, PreviousVersion: j.Current, RestartNeeded: restart})
	b.current[j] = projections.SpecVersion{Version: v, Spec: spec}
	b.updates[j] = &projections.Update{From: j.Current, To: v, SinceUS: b.now.UnixMicro()}
	b.touch(j)
	b.scale(j, cur.TaskCount, spec.TaskCount, v)
	b.rollForward(j)
	if !restart {
		// Count, priority, labels and policies change in place (Borg
		// §2.3): nothing rolls, so no update stays open to block the
		// next change.
		b.commitUpdate(j, CommittedInPlace)
	}
}

func endName(j *projections.Job) string {
	if j.End == projections.JobKilledEnd {
		return "killed"
	}
	return "finished"
}

// CommittedInPlace is the reason of the commit of a change that restarts
// nothing.
const CommittedInPlace = "nothing to restart: the change takes effect in place"

// selectJobs returns the live jobs a selector matches among those the actor
// may see: a user's own, or for an admin every user's (or user's when set).
func selectJobs(s *projections.State, a Actor, user, selector string) ([]*projections.Job, error) {
	sel, err := projections.ParseSelector(selector)
	if err != nil {
		return nil, invalid("selector", "%v", err)
	}
	if !a.Admin && user != "" && user != a.User {
		return nil, refuse(PermissionDenied, "user", "%s may select only their own jobs, not %s's: that needs the admin capability", a.User, user)
	}
	scope := user
	if scope == "" && !a.Admin {
		scope = a.User
	}
	var out []*projections.Job
	for _, j := range s.SelectJobs(sel, scope) {
		if !j.Dead() {
			out = append(out, j)
		}
	}
	if len(out) == 0 {
		who := "of yours"
		if scope == "" {
			who = "in the cell"
		} else if scope != a.User {
			who = "of " + scope
		}
		return nil, refuse(NotFound, "selector", "no live job %s matches %q", who, selector)
	}
	return out, nil
}
