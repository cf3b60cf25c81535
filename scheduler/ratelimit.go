package scheduler

import (
	"math"
	"time"
)

// RescheduleLimiter paces the rescheduling of tasks from machines that
// became unreachable (Borg §4): the master cannot tell a large machine
// failure from a network partition, and rescheduling a partitioned cell's
// worth of tasks at once would double its load when the partition heals.
// It is a token bucket refilled at Rate tasks per second up to Burst, plus
// a brake: while more than MaxDownShare of the cell is down, nothing is
// rescheduled, since a partition is the likelier cause. The clock is an
// argument; the limiter never reads one.
type RescheduleLimiter struct {
	Rate         float64 // tasks per second
	Burst        float64 // most tasks at once
	MaxDownShare float64 // share of machines down beyond which nothing moves; 0: no brake

	tokens float64
	last   time.Time
	primed bool
}

// NewRescheduleLimiter returns a limiter starting with a full bucket.
func NewRescheduleLimiter(rate float64, burst int, maxDownShare float64) *RescheduleLimiter {
	return &RescheduleLimiter{Rate: rate, Burst: float64(burst), MaxDownShare: maxDownShare}
}

// Allow returns how many of want lost tasks may be rescheduled at now,
// given the share of the cell's machines currently down, and takes them
// from the bucket. Calls must come with non-decreasing times; an earlier
// time refills nothing.
func (l *RescheduleLimiter) Allow(now time.Time, want int, downShare float64) int {
	if !l.primed {
		l.tokens, l.last, l.primed = l.Burst, now, true
	}
	if dt := now.Sub(l.last); dt > 0 {
		l.tokens = math.Min(l.Burst, l.tokens+dt.Seconds()*l.Rate)
		l.last = now
	}
	if want <= 0 || (l.MaxDownShare > 0 && downShare > l.MaxDownShare) {
		return 0
	}
	n := min(want, int(math.Floor(l.tokens)))
	l.tokens -= float64(n)
	return n
}
