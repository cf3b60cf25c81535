package events

import (
	"fmt"
	"strings"
)

// Band is a range of priorities with one use (Borg §2.5). Quota is granted
// per band, and prod bands (monitoring, production) never preempt each other.
// This file is the one definition of the bands: the projections, the
// scheduler, the agent and the Infrastore (its SQL through BandSQL) read it.
type Band int8

const (
	BandBestEffort Band = iota // priorities 0-1; quota is unlimited
	BandBatch                  // priorities 2-8
	BandProduction             // priorities 9-10
	BandMonitoring             // priority 11
)

// MaxPriority is the highest priority of a job; MinProdPriority the lowest
// of a prod band.
const (
	MaxPriority     = 11
	MinProdPriority = 9
)

// Bands lists every band, lowest first.
var Bands = []Band{BandBestEffort, BandBatch, BandProduction, BandMonitoring}

// BandOf returns the band of a priority; out-of-range priorities clamp.
func BandOf(priority int32) Band {
	for i := len(Bands) - 1; i > 0; i-- {
		if lo, _ := Bands[i].Range(); priority >= lo {
			return Bands[i]
		}
	}
	return BandBestEffort
}

// IsProd reports whether a priority is in a prod band (monitoring or
// production): such tasks are placed by their limits, never by reclaimed
// resources, and do not preempt one another.
func IsProd(priority int32) bool { return priority >= MinProdPriority }

// CanPreempt reports whether a task of priority preemptor may evict one of
// priority victim: only strictly lower priorities, and prod never evicts
// prod (production and monitoring never preempt each other).
func CanPreempt(preemptor, victim int32) bool { return WhyNoPreemption(preemptor, victim) == "" }

// WhyNoPreemption is the rule of CanPreempt with its reason: "" when a task
// of priority preemptor may evict one of priority victim, else why not.
func WhyNoPreemption(preemptor, victim int32) string {
	switch {
	case victim >= preemptor:
		return "only a lower priority is preempted"
	case IsProd(victim) && IsProd(preemptor):
		return "prod tasks do not preempt each other"
	}
	return ""
}

// String returns the band's name as written in specs and quotas.
func (b Band) String() string {
	switch b {
	case BandBestEffort:
		return "best-effort"
	case BandBatch:
		return "batch"
	case BandProduction:
		return "production"
	case BandMonitoring:
		return "monitoring"
	}
	return fmt.Sprintf("band(%d)", int(b))
}

// Range returns the lowest and highest priority of the band.
func (b Band) Range() (lo, hi int32) {
	switch b {
	case BandBestEffort:
		return 0, 1
	case BandBatch:
		return 2, 8
	case BandProduction:
		return 9, 10
	}
	return 11, 11
}

// DefaultPriority is the priority a spec gets when it names only the band.
// Batch sits mid-band so that a framework can run its masters above and
// its workers below the default (Borg §2.5).
func (b Band) DefaultPriority() int32 {
	switch b {
	case BandBestEffort:
		return 0
	case BandBatch:
		return 4
	case BandProduction:
		return 9
	}
	return 11
}

// ParseBand reads a band name.
func ParseBand(s string) (Band, bool) {
	switch s {
	case "best-effort":
		return BandBestEffort, true
	case "batch":
		return BandBatch, true
	case "production":
		return BandProduction, true
	case "monitoring":
		return BandMonitoring, true
	}
	return 0, false
}

// BandSQL is BandOf in SQL over the integer expression priority (NULL
// stays NULL), generated from the bands' ranges so that the Infrastore's
// tables and this package never disagree.
func BandSQL(priority string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CASE WHEN %s IS NULL THEN NULL", priority)
	for i := len(Bands) - 1; i > 0; i-- {
		lo, _ := Bands[i].Range()
		fmt.Fprintf(&b, " WHEN %s >= %d THEN '%s'", priority, lo, Bands[i])
	}
	fmt.Fprintf(&b, " ELSE '%s' END", Bands[0])
	return b.String()
}
