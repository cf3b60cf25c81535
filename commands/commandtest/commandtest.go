package commandtest

import (
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/writer"
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

// Try is Do that returns the refusal, changing nothing then. It decides
// and applies through the writer's own decisions (writer.Plan), as the
// master does, without the append.
func Try(s *projections.State, cmd commands.Command, now time.Time) ([]events.Event, error) {
	b := writer.Plan(s, []writer.Op{{Cmd: cmd}}, 1, 1, writer.NewRecent(1), func() time.Time { return now })
	for _, a := range b.Answers {
		if a.Err != nil {
			return nil, a.Err
		}
	}
	if len(b.Appends) == 0 {
		return nil, nil
	}
	return b.Appends[0].Events, nil
}
