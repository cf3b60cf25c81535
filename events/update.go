package events

import "time"

// Update policy defaults when a spec gives none, Nomad's: a replacement
// without a health check must run 10 s to count as healthy, and an update
// in which no replacement turns healthy for 10 minutes has failed.
const (
	DefaultMinHealthyTime   = 10 * time.Second
	DefaultProgressDeadline = 10 * time.Minute
)

// MinHealthyTime is how long a replacement without a health check must run
// before it counts as healthy. p may be nil.
func (p *UpdatePolicy) MinHealthyTime() time.Duration {
	if ms := p.GetMinHealthyTimeMs(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return DefaultMinHealthyTime
}

// ProgressDeadline is how long an update may go without a replacement
// turning healthy before it has failed. p may be nil.
func (p *UpdatePolicy) ProgressDeadline() time.Duration {
	if ms := p.GetProgressDeadlineMs(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return DefaultProgressDeadline
}

// Kill timeout (Nomad's kill_timeout): how long a stopped task has between
// SIGTERM and SIGKILL, when its spec says nothing, and the most it may ask.
const (
	DefaultKillTimeout = 10 * time.Second
	MaxKillTimeout     = 5 * time.Minute
)

// IsService reports whether a job is a long-running service: its tasks
// restart always, whatever their exit.
func (s *JobSpec) IsService() bool { return s.GetRestart().GetMode() == "always" }

// AutoRevert reports whether a failed update of this spec rolls back by
// itself: as the policy says, else for services.
func (s *JobSpec) AutoRevert() bool {
	if u := s.GetUpdate(); u != nil && u.AutoRevert != nil {
		return *u.AutoRevert
	}
	return s.IsService()
}

// AutoCommit reports whether an update to this spec commits by itself once
// every task runs it healthy: as the policy says, else on.
func (s *JobSpec) AutoCommit() bool {
	if u := s.GetUpdate(); u != nil && u.AutoCommit != nil {
		return *u.AutoCommit
	}
	return true
}
