package projections

import "github.com/corralhq/corral/events"

// TaskLimit is what task index of spec asks for: the override's resources
// when it has one, else the job's.
func TaskLimit(spec *events.JobSpec, index int32) Resources {
	if ov := spec.GetOverrides()[index]; ov != nil && ov.Resources != nil {
		return ResourcesOf(ov.Resources)
	}
	return ResourcesOf(spec.GetResources())
}

// TaskArgs is the command line of task index: the override's args when set.
func TaskArgs(spec *events.JobSpec, index int32) []string {
	if ov := spec.GetOverrides()[index]; ov != nil && len(ov.Args) > 0 {
		return ov.Args
	}
	return spec.GetArgs()
}

// TaskEnv is the environment of task index: the override's env merged over
// the job's.
func TaskEnv(spec *events.JobSpec, index int32) map[string]string {
	ov := spec.GetOverrides()[index]
	if ov == nil || len(ov.Env) == 0 {
		return spec.GetEnv()
	}
	env := make(map[string]string, len(spec.GetEnv())+len(ov.Env))
	for k, v := range spec.GetEnv() {
		env[k] = v
	}
	for k, v := range ov.Env {
		env[k] = v
	}
	return env
}

// Demand is what all of a spec's tasks ask for together: what a job is
// charged against its user's quota.
func Demand(spec *events.JobSpec) Resources {
	n := int64(spec.GetTaskCount())
	sum := ResourcesOf(spec.GetResources()).Scale(n)
	for idx, ov := range spec.GetOverrides() {
		if ov != nil && ov.Resources != nil && int64(idx) < n && idx >= 0 {
			sum = sum.Add(ResourcesOf(ov.Resources)).Sub(ResourcesOf(spec.GetResources()))
		}
	}
	return sum
}
