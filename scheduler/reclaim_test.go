package scheduler

import (
	"testing"
	"time"
)

func TestEstimateReservation(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	limit := Resources{CPU: 4000, Memory: 8 << 30, Disk: 10 << 30, GPU: 1000, Ports: 2}
	cfg := ReservationConfig{StartupPeriod: 300 * time.Second, HalfLife: 10 * time.Minute, Margin: 0.25}
	usage := Resources{CPU: 1000, Memory: 2 << 30, Disk: 1 << 30}
	target := Resources{CPU: 1250, Memory: 2560 << 20, Disk: 1280 << 20, GPU: 1000, Ports: 2}
	tests := []struct {
		name string
		s    ReservationSample
		want Resources
	}{
		{"starts at the limit", ReservationSample{Limit: limit, Usage: usage, Started: t0, Now: t0}, limit},
		{"still starting after 299 s", ReservationSample{Limit: limit, Previous: limit, PreviousAt: t0, Usage: usage, Started: t0, Now: t0.Add(299 * time.Second)}, limit},
		{"no previous estimate", ReservationSample{Limit: limit, Usage: usage, Started: t0, Now: t0.Add(time.Hour)}, limit},
		{"half the gap closes in a half-life", ReservationSample{Limit: limit, Previous: limit, PreviousAt: t0.Add(5 * time.Minute),
			Usage: usage, Started: t0, Now: t0.Add(15 * time.Minute)},
			Resources{CPU: 2625, Memory: (8<<30 + 2560<<20) / 2, Disk: (10<<30 + 1280<<20) / 2, GPU: 1000, Ports: 2}},
		{"reaches usage plus margin", ReservationSample{Limit: limit, Previous: limit, PreviousAt: t0, Usage: usage, Started: t0, Now: t0.Add(100 * time.Hour)}, target},
		{"rises at once", ReservationSample{Limit: limit, Previous: target, PreviousAt: t0.Add(time.Hour), Usage: Resources{CPU: 2000, Memory: 4 << 30, Disk: 1 << 30},
			Started: t0, Now: t0.Add(time.Hour + time.Second)},
			Resources{CPU: 2500, Memory: 5 << 30, Disk: 1280 << 20, GPU: 1000, Ports: 2}},
		{"never above the limit", ReservationSample{Limit: limit, Previous: target, PreviousAt: t0, Usage: Resources{CPU: 9000, Memory: 9 << 30, Disk: 1 << 30},
			Started: t0, Now: t0.Add(time.Hour)},
			Resources{CPU: 4000, Memory: 8 << 30, Disk: 1280 << 20, GPU: 1000, Ports: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := EstimateReservation(tc.s, cfg); got != tc.want {
				t.Errorf("%s:\n got %v\nwant %v", tc.name, got, tc.want)
			}
		})
	}
}

func TestRescheduleLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewRescheduleLimiter(10, 50, 0.2)
	steps := []struct {
		at        time.Duration
		want      int
		downShare float64
		got       int
	}{
		{0, 100, 0.01, 50},                     // the burst
		{0, 100, 0.01, 0},                      // empty
		{time.Second, 100, 0.01, 10},           // refilled at 10/s
		{1500 * time.Millisecond, 3, 0.01, 3},  // 5 more tokens, 3 wanted
		{time.Minute, 100, 0.5, 0},             // half the cell down: a partition, hold
		{time.Minute, 100, 0.1, 50},            // the cell came back: the full burst, no more
		{time.Minute - time.Second, 5, 0.1, 0}, // time going back refills nothing
	}
	for i, s := range steps {
		if got := l.Allow(t0.Add(s.at), s.want, s.downShare); got != s.got {
			t.Errorf("step %d at %v: allowed %d, want %d", i, s.at, got, s.got)
		}
	}
}
