package scheduler

import (
	"slices"
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
		if got := EstimateReservation(tc.s, cfg); got != tc.want {
			t.Errorf("%s:\n got %v\nwant %v", tc.name, got, tc.want)
		}
	}
}

func TestRelieveOvercommit(t *testing.T) {
	capacity := Resources{CPU: 8000, Memory: 16 << 30, Disk: 100 << 30}
	task := func(job string, prio int32, limitGiB, usedGiB int64) TaskUsage {
		return TaskUsage{Ref: ref("u", job, 0), Priority: prio, Limit: Resources{Memory: limitGiB << 30},
			Reservation: Resources{Memory: usedGiB << 30}, Usage: Resources{Memory: usedGiB << 30}}
	}
	tests := []struct {
		name     string
		tasks    []TaskUsage
		kill     []string
		relieved bool
	}{
		{"room enough", []TaskUsage{task("a", 0, 8, 8), task("b", 9, 8, 8)}, nil, true},
		{"lowest priority first", []TaskUsage{task("prod", 9, 8, 8), task("b5", 5, 4, 4), task("b1", 1, 4, 4), task("b3", 3, 4, 4)},
			[]string{"b1"}, true},
		{"until relieved", []TaskUsage{task("prod", 9, 8, 8), task("b5", 5, 4, 4), task("b1", 1, 1, 1), task("b3", 3, 7, 7)},
			[]string{"b1", "b3"}, true},
		{"over its limit first", []TaskUsage{task("prod", 9, 8, 8), task("b1", 1, 4, 4), task("greedy", 6, 2, 6)},
			[]string{"greedy"}, true},
		{"larger first within a priority", []TaskUsage{task("prod", 10, 12, 12), task("small", 2, 2, 2), task("big", 2, 5, 5)},
			[]string{"big"}, true},
		{"never prod", []TaskUsage{task("p9", 9, 10, 10), task("p11", 11, 10, 10), task("b", 4, 1, 1)},
			[]string{"b"}, false},
		{"cpu is throttled, not killed for", []TaskUsage{{Ref: ref("u", "cpu", 0), Priority: 0, Usage: Resources{CPU: 20000}}}, nil, true},
	}
	for _, tc := range tests {
		kill, relieved := RelieveOvercommit(capacity, tc.tasks)
		var got []string
		for _, r := range kill {
			got = append(got, r.Job)
		}
		if !slices.Equal(got, tc.kill) || relieved != tc.relieved {
			t.Errorf("%s: kill %v relieved %v; want %v %v", tc.name, got, relieved, tc.kill, tc.relieved)
		}
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
