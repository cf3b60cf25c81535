package projections

import "fmt"

// Band is a range of priorities with one use (Borg §2.5). Quota is granted
// per band, and prod bands (monitoring, production) never preempt each other.
type Band int8

const (
	BestEffort Band = iota // priorities 0-1; quota is unlimited
	Batch                  // priorities 2-8
	Production             // priorities 9-10
	Monitoring             // priority 11
)

// MaxPriority is the highest priority of a job.
const MaxPriority = 11

// Bands lists every band, lowest first.
var Bands = []Band{BestEffort, Batch, Production, Monitoring}

// BandOf returns the band of a priority; out-of-range priorities clamp.
func BandOf(priority int32) Band {
	switch {
	case priority >= 11:
		return Monitoring
	case priority >= 9:
		return Production
	case priority >= 2:
		return Batch
	}
	return BestEffort
}

// IsProd reports whether a priority is in a prod band (monitoring or
// production): such tasks are placed by their limits, never by reclaimed
// resources, and do not preempt one another.
func IsProd(priority int32) bool { return priority >= 9 }

// String returns the band's name as written in specs and quotas.
func (b Band) String() string {
	switch b {
	case BestEffort:
		return "best-effort"
	case Batch:
		return "batch"
	case Production:
		return "production"
	case Monitoring:
		return "monitoring"
	}
	return fmt.Sprintf("band(%d)", int(b))
}

// Range returns the lowest and highest priority of the band.
func (b Band) Range() (lo, hi int32) {
	switch b {
	case BestEffort:
		return 0, 1
	case Batch:
		return 2, 8
	case Production:
		return 9, 10
	}
	return 11, 11
}

// DefaultPriority is the priority a spec gets when it names only the band.
// Batch sits mid-band so that a framework can run its masters above and
// its workers below the default (Borg §2.5).
func (b Band) DefaultPriority() int32 {
	switch b {
	case BestEffort:
		return 0
	case Batch:
		return 4
	case Production:
		return 9
	}
	return 11
}

// ParseBand reads a band name.
func ParseBand(s string) (Band, bool) {
	switch s {
	case "best-effort":
		return BestEffort, true
	case "batch":
		return Batch, true
	case "production":
		return Production, true
	case "monitoring":
		return Monitoring, true
	}
	return 0, false
}
