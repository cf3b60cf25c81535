package scheduler

import (
	"math"
	"time"
)

// Resource reclamation (Borg §5.5): a task's reservation is the master's
// estimate of what it will use. Non-prod tasks are scheduled against
// reservations, so what prod tasks reserve but do not use runs batch work.

// ReservationConfig tunes EstimateReservation.
type ReservationConfig struct {
	// StartupPeriod keeps the reservation at the limit while a task starts
	// (start-up transients are not representative).
	StartupPeriod time.Duration
	// HalfLife is how fast the reservation decays toward usage plus margin:
	// half the gap closes per half-life.
	HalfLife time.Duration
	// Margin is the safety margin over measured usage, as a share of it.
	Margin float64
}

// DefaultReservationConfig: 300 s start-up as in Borg, a 10-minute half-life
// and a 15% margin.
func DefaultReservationConfig() ReservationConfig {
	return ReservationConfig{StartupPeriod: 300 * time.Second, HalfLife: 10 * time.Minute, Margin: 0.15}
}

// ReservationSample is what the estimate of one task needs: its limit, the
// previous estimate and when it was made, the usage measured since, when
// the task started and the time now (the caller's clock).
type ReservationSample struct {
	Limit      Resources
	Previous   Resources // the last estimate; the zero vector means none yet
	PreviousAt time.Time
	Usage      Resources // peak usage over the last window for memory and disk
	Started    time.Time
	Now        time.Time
}

// EstimateReservation returns a task's new reservation. It equals the limit
// during the start-up period; afterwards, per measured resource (CPU,
// memory, disk), it rises at once to usage plus margin when that exceeds the
// previous estimate, and otherwise decays toward it. It never exceeds the
// limit. GPUs and ports are not measured and stay at the limit. Pure.
func EstimateReservation(s ReservationSample, cfg ReservationConfig) Resources {
	if s.Now.Sub(s.Started) < cfg.StartupPeriod || s.Previous.IsZero() {
		return s.Limit
	}
	out := s.Limit
	decay := 1.0
	if dt := s.Now.Sub(s.PreviousAt); dt > 0 && cfg.HalfLife > 0 {
		decay = math.Exp2(-float64(dt) / float64(cfg.HalfLife))
	}
	for _, d := range []Dim{CPU, Memory, Disk} {
		target := min(float64(s.Limit[d]), float64(s.Usage[d])*(1+cfg.Margin))
		prev := float64(min(s.Previous[d], s.Limit[d]))
		next := target
		if target < prev {
			next = target + (prev-target)*decay
		}
		out[d] = min(s.Limit[d], int64(math.Ceil(next)))
	}
	return out
}
