package events_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
)

// TestKeepLeading: a leader keeps a renewed lease, gives up a lost one at
// once, and an unreachable store only once its lease has run out.
func TestKeepLeading(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	held := events.Lease{Name: events.LeaderLease, Holder: "m1#a", Epoch: 3, ExpiresAt: now.Add(time.Second)}
	down := errors.New("connection refused")
	for i, tc := range []struct {
		err  error
		at   time.Time
		keep bool
	}{
		{nil, now, true},
		{events.ErrLeaseLost, now, false},
		{down, now, true},
		{down, now.Add(2 * time.Second), false},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if keep, why := events.KeepLeading(held, tc.err, tc.at); keep != tc.keep || (!keep && why == "") {
				t.Errorf("err %v at +%s: keep %v (%q), want %v", tc.err, tc.at.Sub(now), keep, why, tc.keep)
			}
		})
	}
}
