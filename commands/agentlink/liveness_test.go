package agentlink_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/commands/agentlink"
)

// TestHoldLoss: a hold needs at least two machines and 55% of the cell.
func TestHoldLoss(t *testing.T) {
	for i, tc := range []struct {
		missing, machines int
		want              bool
	}{
		{0, 0, false},
		{1, 1, false}, // one machine alone is its own fault
		{1, 2, false},
		{2, 2, true},
		{1, 3, false},
		{2, 3, true},
		{3, 3, true},
		{54, 100, false},
		{55, 100, true},
		{5000, 10000, false},
		{5500, 10000, true},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := agentlink.HoldLoss(tc.missing, tc.machines); got != tc.want {
				t.Errorf("HoldLoss(%d, %d) = %v, want %v", tc.missing, tc.machines, got, tc.want)
			}
		})
	}
}

// TestLossRuleCountsOnlyTheMachinesSilence: a machine is down after three
// counted misses and six seconds of silence; a poll the master started
// late (its loop woke late), one before the count's start, or one during a hold counts nothing;
// a later start (an answer, the grace's or a hold's end) begins anew.
func TestLossRuleCountsOnlyTheMachinesSilence(t *testing.T) {
	iv := time.Second
	r := agentlink.LossRule{Interval: iv, MissedPolls: 3, Silence: 6 * time.Second}
	answered := t0
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	// Polls on time every second after the last answer: three misses come
	// at 3 s, but the machine is silent for 6 s only at the sixth.
	var s agentlink.Silence
	for k := 1; k <= 6; k++ {
		due := at(time.Duration(k) * iv)
		down := r.Miss(&s, due, 0, answered, due.Add(iv), false)
		if want := k >= 5; down != want { // answered at 0, the 5th miss ends at 6 s
			t.Errorf("miss %d (silent %s): down %v, want %v", k, due.Add(iv).Sub(answered), down, want)
		}
	}
	if s.Misses != 6 {
		t.Errorf("%d misses counted, want 6", s.Misses)
	}

	// The master's loop woke 800 ms late for each poll (its own delay):
	// nothing counts, however long.
	s = agentlink.Silence{}
	for k := 1; k <= 20; k++ {
		due := at(time.Duration(k) * iv)
		if r.Miss(&s, due.Add(800*time.Millisecond), 800*time.Millisecond, answered, due.Add(2*iv), false) {
			t.Fatalf("late poll %d marked the machine down", k)
		}
	}
	if s.Misses != 0 {
		t.Errorf("late polls counted %d misses", s.Misses)
	}
	if !r.Late(600*time.Millisecond) || r.Late(400*time.Millisecond) || r.Late(-time.Hour) {
		t.Error("Late: more than half an interval")
	}

	// During a hold nothing counts; when it ends, the count starts over
	// from its end: three misses and six seconds more.
	s = agentlink.Silence{}
	for k := 1; k <= 10; k++ {
		due := at(time.Duration(k) * iv)
		if r.Miss(&s, due, 0, answered, due.Add(iv), true) {
			t.Fatalf("held miss %d marked the machine down", k)
		}
	}
	holdEnd := at(10 * iv)
	from := agentlink.CountFrom(answered, at(2*iv), holdEnd)
	if !from.Equal(holdEnd) {
		t.Fatalf("CountFrom = %v, want the hold's end", from.Sub(t0))
	}
	for k := 11; k <= 14; k++ {
		due := at(time.Duration(k) * iv)
		if r.Miss(&s, due, 0, from, due.Add(iv), false) {
			t.Fatalf("miss %d, %s after the hold ended, marked the machine down", k, due.Add(iv).Sub(holdEnd))
		}
	}
	due := at(15 * iv)
	if !r.Miss(&s, due, 0, from, due.Add(iv), false) {
		t.Errorf("five counted misses and %s of silence after the hold: not down", due.Add(iv).Sub(holdEnd))
	}

	// A poll started before the count's start (a new leader's first polls,
	// before its grace ended) counts nothing.
	s = agentlink.Silence{}
	graceEnd := at(6 * iv)
	for k := 1; k <= 5; k++ {
		due := at(time.Duration(k) * iv)
		r.Miss(&s, due, 0, agentlink.CountFrom(time.Time{}, graceEnd, time.Time{}), due.Add(iv), false)
	}
	if s.Misses != 0 {
		t.Errorf("polls before the grace ended counted %d misses", s.Misses)
	}
}
