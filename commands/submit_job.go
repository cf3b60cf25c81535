package commands

import (
	"strings"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"google.golang.org/protobuf/proto"
)

// SubmitJob creates a job. Its tasks become pending at once, or when the
// job its spec names in start_after finishes. The job belongs to the actor,
// whatever the spec's user says. Admission control happens here, never in
// the scheduler: a job over its user's quota in its band is refused.
type SubmitJob struct {
	Meta
	Spec *events.JobSpec
}

func (c SubmitJob) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if c.Spec == nil {
		return nil, invalid("spec", "must be set")
	}
	spec := proto.Clone(c.Spec).(*events.JobSpec)
	spec.User = c.Actor.User
	if err := ValidateSpec(spec); err != nil {
		return nil, err
	}
	if err := secretsGiven(spec); err != nil {
		return nil, err
	}
	if j := s.Job(spec.User, spec.Name); j != nil && !j.Dead() {
		return nil, refuse(AlreadyExists, "name", "%s exists and is %s: update it, or kill it first", jobRef(spec.User, spec.Name), j.State())
	}
	deferred := false
	if sa := spec.StartAfter; sa != "" {
		pre := s.Job(spec.User, sa)
		switch {
		case pre == nil:
			return nil, refuse(NotFound, "start_after", "%s does not exist", jobRef(spec.User, sa))
		case pre.End == projections.JobKilledEnd:
			return nil, refuse(FailedPrecondition, "start_after", "%s was killed, so it will never finish", jobRef(spec.User, sa))
		case pre.End == projections.NotEnded:
			deferred = true
		}
	}
	b := newDraft(s, now)
	if err := checkAllocSet(s, spec); err != nil {
		return nil, err
	}
	if spec.AllocSet == "" {
		demand, ok := projections.DemandChecked(spec)
		if !ok {
			return nil, tooLarge(spec)
		}
		if err := b.admit(spec.User, projections.BandOf(spec.Priority), demand, projections.Resources{}, "resources"); err != nil {
			return nil, err
		}
	}
	b.add(events.JobStream(spec.User, spec.Name), &events.JobSubmitted{Spec: spec, SpecVersion: 1})
	if !deferred {
		for i := int32(0); i < spec.TaskCount; i++ {
			b.add(events.TaskStream(spec.User, spec.Name, i), &events.TaskSubmitted{User: spec.User, Job: spec.Name, Index: i, SpecVersion: 1, Reason: "new"})
		}
	}
	return b.evs, nil
}

// checkAllocSet refuses a spec naming an alloc set that does not exist or
// whose allocs are too small for one of its tasks. Quota is not charged
// again for tasks inside an alloc set: the set holds it.
func checkAllocSet(s *projections.State, spec *events.JobSpec) error {
	if spec.AllocSet == "" {
		return nil
	}
	set := s.AllocSets[projections.JobKey{User: spec.User, Name: spec.AllocSet}]
	if set == nil {
		return refuse(NotFound, "alloc_set", "alloc set %s/%s does not exist", spec.User, spec.AllocSet)
	}
	check := func(field string, r projections.Resources) error {
		if !r.LessEq(set.Resources) {
			return refuse(FailedPrecondition, field, "a task asks for [%s], more than an alloc of set %s holds [%s]", r, set.Name, set.Resources)
		}
		return nil
	}
	if err := check("resources", projections.ResourcesOf(spec.Resources)); err != nil {
		return err
	}
	for _, i := range sortedIndexes(spec.Overrides) {
		if ov := spec.Overrides[i]; ov != nil && ov.Resources != nil {
			if err := check(index("tasks", int(i))+".resources", projections.ResourcesOf(ov.Resources)); err != nil {
				return err
			}
		}
	}
	return nil
}

// tooLarge refuses a job whose total demand passes what the cell keeps.
func tooLarge(spec *events.JobSpec) error {
	return refuse(InvalidArgument, "resources", "%d tasks of [%s] total more than any total the cell keeps (%d in a dimension): ask for fewer or smaller tasks",
		spec.GetTaskCount(), projections.ResourcesOf(spec.GetResources()), int64(events.MaxTotal))
}

// secretsGiven refuses a spec naming secret_env variables whose values never
// arrived: the master seals the values it is given (package auth) before
// the command is decided, so a spec with names and nothing sealed would run
// its tasks without them.
func secretsGiven(spec *events.JobSpec) error {
	if len(spec.SecretEnv) > 0 && len(spec.SealedEnv) == 0 {
		return invalid("secret_env", "%s named, but no value was given: pass each with --secret NAME (from your environment) or in env; a master without a secrets key takes no secret_env", strings.Join(spec.SecretEnv, ", "))
	}
	return nil
}
