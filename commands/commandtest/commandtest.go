// Package commandtest is a test kit: it carries commands out against an
// in-memory state as the master would (Decide, then Apply with positions),
// for tests that build a cell out of commands rather than by hand.
package commandtest

import (
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Do decides cmd against s at now and applies its events, failing the test
// on a refusal. It returns the events, positioned.
func Do(tb testing.TB, s *projections.State, cmd commands.Command, now time.Time) []events.Event {
	tb.Helper()
	evs, err := Try(s, cmd, now)
	if err != nil {
		tb.Fatalf("%T: %v", cmd, err)
	}
	return evs
}

// Try is Do that returns the refusal, changing nothing then.
func Try(s *projections.State, cmd commands.Command, now time.Time) ([]events.Event, error) {
	evs, err := commands.Decide(s, cmd, commands.FixedClock(now))
	if err != nil {
		return nil, err
	}
	for i := range evs {
		evs[i].Position = s.Position + 1
		if err := projections.Apply(s, evs[i]); err != nil {
			panic("commandtest: a decided event does not apply: " + err.Error())
		}
	}
	return evs, nil
}
