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

// Demand is what all of a spec's tasks ask for together: what a job is
// charged against its user's quota.
func Demand(spec *events.JobSpec) Resources {
	d, _ := DemandChecked(spec)
	return d
}

// DemandChecked is Demand, and false when some dimension of the total passes
// events.MaxTotal (that dimension is then cut to it): admission refuses such
// a job.
func DemandChecked(spec *events.JobSpec) (Resources, bool) {
	n := int64(spec.GetTaskCount())
	if n < 0 {
		return Resources{}, false
	}
	var overridden []Resources
	for idx, ov := range spec.GetOverrides() {
		if ov != nil && ov.Resources != nil && int64(idx) < n && idx >= 0 {
			overridden = append(overridden, ResourcesOf(ov.Resources))
		}
	}
	base := ResourcesOf(spec.GetResources())
	if base.Negative() {
		return Resources{}, false
	}
	sum, ok := base.ScaleChecked(n - int64(len(overridden)))
	for _, o := range overridden {
		if o.Negative() {
			return sum.Saturate(), false
		}
		var added bool
		sum, added = sum.AddChecked(o)
		ok = ok && added
	}
	if !ok {
		return sum.Saturate(), false
	}
	return sum, true
}
