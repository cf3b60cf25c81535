package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/corralhq/corral/commands/apipb"
)

func TestWriteStateDiff(t *testing.T) {
	var out bytes.Buffer
	v := &apipb.StateDiffView{
		FromPosition: 10, FromTimeUs: 1_700_000_000_000_000, ToPosition: 20, ToTimeUs: 1_700_000_060_000_000, Total: 3,
		Counts: map[string]int32{"task started": 2, "machine down": 1},
		Changes: []*apipb.StateChange{
			{Kind: "machine", Name: "m1", What: "down", Before: "up", After: "down: no heartbeat"},
			{Kind: "task", Name: "alice/web/0", What: "started", Before: "pending", After: "running on m2"},
		},
	}
	if err := writeStateDiff(&out, v); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"from position 10", "to position 20", "3 changes", "task started 2, machine down 1", "alice/web/0", "running on m2", "(2 of 3 changes listed; --limit for more)"} {
		if !strings.Contains(s, want) {
			t.Errorf("state diff output lacks %q:\n%s", want, s)
		}
	}
	out.Reset()
	if err := writeStateDiff(&out, &apipb.StateDiffView{FromPosition: 5, ToPosition: 5}); err != nil || !strings.Contains(out.String(), "0 changes") {
		t.Errorf("an empty diff: %q %v", out.String(), err)
	}
}
