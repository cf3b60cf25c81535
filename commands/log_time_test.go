package commands

import (
	"testing"
	"time"
)

// A master whose clock is behind the log's (stepped back, or a new leader
// with a slower clock) decides at the log's time: the log's clock never
// runs backwards, so a run that starts after another ended is never stamped
// before it, and no moment is billed twice.
func TestDecideNeverStampsBeforeTheLog(t *testing.T) {
	c := newCell(t)
	c.now = t0.Add(time.Minute)
	first := c.do(SubmitJob{Meta: alice, Spec: spec("web", 0, 1)})
	latest := first[len(first)-1].OccurredAt

	c.now = t0 // the clock stepped back a minute
	evs := c.do(SubmitJob{Meta: bob, Spec: spec("batch", 0, 1)})
	for _, e := range evs {
		if !e.OccurredAt.Equal(latest) {
			t.Fatalf("%s stamped %s with the log at %s: want the log's time", e.Type, e.OccurredAt, latest)
		}
	}
	if got := c.s.TimeUS; got != latest.UnixMicro() {
		t.Fatalf("state time %d, want %d", got, latest.UnixMicro())
	}

	c.now = t0.Add(2 * time.Minute) // ahead again: the clock's own time
	evs = c.do(SubmitJob{Meta: bob, Spec: spec("later", 0, 1)})
	if !evs[0].OccurredAt.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("stamped %s, want the clock's %s", evs[0].OccurredAt, t0.Add(2*time.Minute))
	}
}
