package scheduler

import (
	"cmp"
	"math"
	"slices"
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

// TaskUsage is one task on a machine, for RelieveOvercommit.
type TaskUsage struct {
	Ref         TaskRef
	Priority    int32
	Limit       Resources
	Reservation Resources
	Usage       Resources
}

// RelieveOvercommit chooses the tasks to kill on a machine whose tasks use
// more memory or disk than it has, which happens when reservations were
// wrong. CPU is compressible and is throttled rather than killed for. Only
// non-prod tasks are chosen, never prod: first those using more than their
// limit of a short resource, then the lowest priority, then the largest
// users of the short resources. It returns the victims in kill order and
// whether killing them ends the overcommit (false when only prod tasks are
// left to blame). Pure.
func RelieveOvercommit(capacity Resources, tasks []TaskUsage) (kill []TaskRef, relieved bool) {
	incompressible := []Dim{Memory, Disk}
	var used Resources
	for _, t := range tasks {
		used = used.Add(t.Usage)
	}
	over := func() bool {
		for _, d := range incompressible {
			if used[d] > capacity[d] {
				return true
			}
		}
		return false
	}
	if !over() {
		return nil, true
	}
	// What a task's kill is worth: its share of the excess it frees.
	relief := func(t *TaskUsage) float64 {
		var r float64
		for _, d := range incompressible {
			if excess := used[d] - capacity[d]; excess > 0 {
				r += float64(min(t.Usage[d], excess)) / float64(excess)
			}
		}
		return r
	}
	aboveLimit := func(t *TaskUsage) bool {
		for _, d := range incompressible {
			if t.Usage[d] > t.Limit[d] {
				return true
			}
		}
		return false
	}
	var cands []*TaskUsage
	for i := range tasks {
		if !IsProd(tasks[i].Priority) {
			cands = append(cands, &tasks[i])
		}
	}
	slices.SortStableFunc(cands, func(a, b *TaskUsage) int {
		if x, y := aboveLimit(a), aboveLimit(b); x != y {
			if x {
				return -1
			}
			return 1
		}
		return cmp.Or(
			cmp.Compare(a.Priority, b.Priority),
			cmp.Compare(relief(b), relief(a)),
			cmp.Compare(a.Ref.User, b.Ref.User), cmp.Compare(a.Ref.Job, b.Ref.Job), cmp.Compare(a.Ref.Index, b.Ref.Index),
		)
	})
	for _, t := range cands {
		if !over() {
			break
		}
		if relief(t) == 0 {
			continue // frees nothing that is short
		}
		kill = append(kill, t.Ref)
		used = used.Sub(t.Usage)
	}
	return kill, !over()
}
