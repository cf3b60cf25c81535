package projections

import (
	"fmt"
	"slices"
	"testing"

	"github.com/corralhq/corral/events/golden"
)

// A PendingOrder asked between events gives PendingTasks' order at every
// step of the golden histories (submissions, placements, evictions,
// failures, kills, in-place priority changes), asked every event and every
// few events, with the log trimmed often and rarely, and across a
// checkpoint's decode (another state).
func TestPendingOrderIsPendingTasks(t *testing.T) {
	defer func(old int) { pendingLogSlack = old }(pendingLogSlack)
	merged, trimmed, fresh := 0, 0, 0
	for seed := 1; seed <= 8; seed++ {
		evs, err := golden.ReadFile(fmt.Sprintf("testdata/histories/small-%d.jsonl.gz", seed))
		if err != nil {
			t.Fatal(err)
		}
		pendingLogSlack = []int{4096, 0, 16}[seed%3]
		every := 1 + seed%4
		s := New()
		var o PendingOrder
		for i, e := range evs {
			if err := Apply(s, e); err != nil {
				t.Fatal(err)
			}
			if i%997 == 500 { // a checkpoint read back: another state
				if s, err = Decode(Encode(s)); err != nil {
					t.Fatal(err)
				}
			}
			if i%every != 0 {
				continue
			}
			before := o.cursor
			got, want := o.Tasks(s), s.PendingTasks()
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d, position %d: the kept order differs from a fresh sort (%d tasks, %d)", seed, s.Position, len(got), len(want))
			}
			switch {
			case before < s.pendingLogBase:
				trimmed++
			case len(want) > 0 && o.state == s:
				merged++
			default:
				fresh++
			}
		}
	}
	if merged == 0 || trimmed == 0 {
		t.Fatalf("merged %d times, sorted afresh after a trim %d times: not exercised", merged, trimmed)
	}
	t.Logf("merged %d, after a trim %d, other %d", merged, trimmed, fresh)
}
