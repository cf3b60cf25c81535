package events

import "time"

// Backoff defaults when a restart policy gives none: 1 s, doubling to
// 5 minutes, as Kubernetes' CrashLoopBackOff.
const (
	DefaultBackoffInitial = time.Second
	DefaultBackoffMax     = 5 * time.Minute
)

// Backoff is how long a task waits before its consecutive-th start after a
// failure of its own (exit, signal, OOM kill, a start the agent refused):
// the policy's backoff (default 1 s) doubled for each failure in a row, at
// most its max_backoff (default 5 minutes). It is the one rule for the
// agent's restarts in place and the master's reschedules. p may be nil.
func (p *RestartPolicy) Backoff(consecutive int32) time.Duration {
	initial, ceiling := p.backoffBounds()
	delay := initial
	for i := int32(1); i < consecutive && delay < ceiling; i++ {
		delay *= 2
	}
	return min(delay, ceiling)
}

// RanHealthy reports whether a run that lasted ranFor ends a run of
// failures: one that ran twice the longest backoff was healthy for a
// while, and the next failure backs off from the start again.
func (p *RestartPolicy) RanHealthy(ranFor time.Duration) bool {
	_, ceiling := p.backoffBounds()
	return ranFor >= 2*ceiling
}

func (p *RestartPolicy) backoffBounds() (initial, ceiling time.Duration) {
	initial = time.Duration(p.GetBackoffInitialMs()) * time.Millisecond
	if initial <= 0 {
		initial = DefaultBackoffInitial
	}
	ceiling = time.Duration(p.GetBackoffMaxMs()) * time.Millisecond
	if ceiling <= 0 {
		ceiling = max(DefaultBackoffMax, initial)
	}
	return initial, max(ceiling, initial)
}

// CountsAsRestart reports whether an event restarts a task, for the task's
// count of restarts: a failure the agent restarts in place, or a
// resubmission after the task's run ended by itself (endedByItself: it
// failed, or finished under an always policy). Evictions and losses are
// not the task's doing and do not count. It is the projection's rule
// (Task.Restarts), kept here for any other reader of the log to count the
// same way.
func CountsAsRestart(p Payload, endedByItself bool) bool {
	switch e := p.(type) {
	case *TaskFailed:
		return e.WillRestart
	case *TaskSubmitted:
		return e.Reason == "rescheduled" && endedByItself
	}
	return false
}
