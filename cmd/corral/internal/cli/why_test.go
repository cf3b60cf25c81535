package cli

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/commands/apipb"
)

// corral why prints the master's note on a job not spread as the
// scheduler wants, under the summary.
func TestWhyPrintsSpreadNotMet(t *testing.T) {
	var b strings.Builder
	writeWhy(&b, &apipb.WhyPendingReply{User: "alice", Job: "web", Summary: "job alice/web has no pending task (running)",
		Spread: "spread not met: 2 of 2 tasks on m0"})
	want := "alice/web: job alice/web has no pending task (running)\n  spread not met: 2 of 2 tasks on m0\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}
