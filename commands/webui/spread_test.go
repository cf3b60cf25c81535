package webui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/corralhq/corral/commands/master"
)

// The job page says when a running job's tasks are not spread as the
// scheduler wants, in the master's own words (master.Explanations).
func TestJobPageSaysWhenSpreadIsNotMet(t *testing.T) {
	h := &history{}
	for _, m := range []string{"m0", "m1", "m2"} {
		h.machine(m)
	}
	h.job("alice", "web", 0, 2, res(500, 256<<20), nil)
	h.run("alice", "web", 0, "m0")
	h.run("alice", "web", 1, "m0")
	h.job("alice", "api", 0, 2, res(500, 256<<20), nil)
	h.run("alice", "api", 0, "m0")
	h.run("alice", "api", 1, "m1")
	c := openCell(t, h.evs)
	c.svc.Explain = master.NewExplanations().Explain
	code, body := c.get(t, "/jobs/alice/web")
	if code != http.StatusOK || !strings.Contains(body, "spread not met: 2 of 2 tasks on m0") {
		t.Fatalf("web on m0 twice: status %d, page without the spread note:\n%s", code, body)
	}
	if code, body := c.get(t, "/jobs/alice/api"); code != http.StatusOK || strings.Contains(body, "spread not met") {
		t.Fatalf("api on two machines: status %d, page says spread not met", code)
	}
}
