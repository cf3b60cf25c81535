package projections

// Rollout is how a job's live tasks stand against the spec version in
// force: what the update rules judge (commands' stepUpdate) and what
// `corral job get` and `--wait` show.
type Rollout struct {
	Version   int64 // the version in force
	Live      int   // tasks not dead
	OnVersion int   // of them, on Version
	Settled   int   // of them, on Version and settled (healthy, or run min_healthy_time)
	Disrupted int   // replacements that do not serve yet
	// CanariesSettled: every live task below the update policy's canary
	// count is settled on Version.
	CanariesSettled bool
	// ProgressUS is when the last task on Version settled (0: none yet).
	ProgressUS int64
}

// Complete reports whether every live task serves the version in force.
func (r Rollout) Complete() bool { return r.Settled == r.Live }

// Rollout returns j's rollout at nowUS.
func (j *Job) Rollout(nowUS int64) Rollout {
	r := Rollout{Version: j.Current, CanariesSettled: true}
	canaries := j.Spec().GetUpdate().GetCanary()
	for _, t := range j.Tasks {
		if t == nil || t.State == TaskDead {
			continue
		}
		r.Live++
		if t.Disrupted(nowUS) {
			r.Disrupted++
		}
		if t.SpecVersion != j.Current {
			if t.Index < canaries {
				r.CanariesSettled = false
			}
			continue
		}
		r.OnVersion++
		if at, ok := t.SettledAt(); ok && at <= nowUS {
			r.Settled++
			r.ProgressUS = max(r.ProgressUS, at)
		} else if t.Index < canaries {
			r.CanariesSettled = false
		}
	}
	return r
}

// UpdateOutcome is how a job's last update ended.
type UpdateOutcome struct {
	Version int64  // the version the update put in force
	How     string // "committed", "rolled back" (by a user), "reverted" (by the master)
	Reason  string // why, when the master did it
}

// UpdatePhase is where a job's open update stands.
type UpdatePhase string

const (
	UpdateRolling         UpdatePhase = "rolling"          // tasks still to replace or not yet healthy
	UpdateHalted          UpdatePhase = "halted"           // failed: nothing more rolls
	UpdateAwaitingPromote UpdatePhase = "awaiting-promote" // its canaries serve; a person decides
	UpdateAwaitingCommit  UpdatePhase = "awaiting-commit"  // every task serves it; auto_commit is off
	UpdateComplete        UpdatePhase = "complete"         // every task serves it; it commits itself at the next step
)

// UpdatePhase is the phase of j's open update at nowUS ("" without one),
// with the rollout it was judged on: the one rule the update step, the
// API and the CLI's --wait follow.
func (j *Job) UpdatePhase(nowUS int64) (UpdatePhase, Rollout) {
	r := j.Rollout(nowUS)
	u := j.Update
	switch {
	case u == nil || j.Current != u.To:
		return "", r
	case u.Halted != "":
		return UpdateHalted, r
	}
	spec := j.Spec()
	waiting := spec.GetUpdate().GetCanary() > 0 && !u.Promoted
	switch {
	case waiting && r.CanariesSettled:
		return UpdateAwaitingPromote, r
	case waiting || !r.Complete():
		return UpdateRolling, r
	case spec.AutoCommit():
		return UpdateComplete, r
	}
	return UpdateAwaitingCommit, r
}
