package events

import "time"

// A health check's defaults, for the fields a spec leaves out (zero). The
// master's validation, the agent that runs the check and docs/jobfile.md
// (held to these by a test in package commands) read the same values, so a
// spec the documentation allows is one the master admits and the agent runs.
const (
	DefaultHealthCheckPeriod  = 10 * time.Second
	DefaultHealthCheckTimeout = 5 * time.Second
)

// HealthCheckPeriod is how often h runs: its period, else the default.
func HealthCheckPeriod(h *HealthCheck) time.Duration {
	if ms := h.GetPeriodMs(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return DefaultHealthCheckPeriod
}

// HealthCheckTimeout is how long one check of h may take: its timeout, else
// the default cut to the period (a check must end before the next is due).
func HealthCheckTimeout(h *HealthCheck) time.Duration {
	if ms := h.GetTimeoutMs(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return min(DefaultHealthCheckTimeout, HealthCheckPeriod(h))
}
