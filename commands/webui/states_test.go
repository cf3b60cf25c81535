package webui_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
)

// A batch job whose tasks all exit 0 is shown finished, in a colour of its
// own, on the jobs list, its page and its tasks' pages; a killed job and
// its killed tasks stay dead in red.
func TestFinishedIsNotDead(t *testing.T) {
	h := &history{}
	h.machine("m0")
	for _, name := range []string{"batch", "doomed"} {
		h.job("alice", name, 4, 2, res(100, 64<<20), nil)
		h.run("alice", name, 0, "m0")
		h.run("alice", name, 1, "m0")
	}
	for i := range int32(2) {
		h.add(events.TaskStream("alice", "batch", i), &events.TaskFinished{User: "alice", Job: "batch", Index: i, Machine: "m0"})
		h.add(events.TaskStream("alice", "doomed", i), &events.TaskKilled{User: "alice", Job: "doomed", Index: i, Machine: "m0", Reason: "job killed"})
	}
	h.add(events.JobStream("alice", "batch"), &events.JobFinished{User: "alice", Job: "batch"})
	h.add(events.JobStream("alice", "doomed"), &events.JobKilled{User: "alice", Job: "doomed", Reason: "by alice"})
	c := openCell(t, h.evs)

	page := func(path string) string {
		t.Helper()
		code, body := c.get(t, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, body)
		}
		checkAccessible(t, path, body)
		return body
	}
	finished := `<span class="state done">finished</span>`
	dead := `<span class="state bad">dead</span>`
	row := func(body, job string) string {
		m := regexp.MustCompile(`(?s)<a href="/jobs/alice/` + job + `">.*?</tr>`).FindString(body)
		if m == "" {
			t.Fatalf("no row of alice/%s in the jobs list", job)
		}
		return m
	}
	jobs := page("/jobs")
	if r := row(jobs, "batch"); !strings.Contains(r, finished) || strings.Contains(r, "bad") {
		t.Errorf("the jobs list shows the finished batch job as %s", r)
	}
	if r := row(jobs, "doomed"); !strings.Contains(r, dead) {
		t.Errorf("the jobs list shows the killed job as %s", r)
	}
	batch := page("/jobs/alice/batch")
	mustContain(t, "the finished job's page", batch, `<dd class="done">finished</dd>`)
	if n := strings.Count(batch, finished); n != 2 {
		t.Errorf("the finished job's page shows %d tasks finished, want 2", n)
	}
	if strings.Contains(batch, `class="state bad"`) || strings.Contains(batch, `<dd class="bad">`) {
		t.Error("the finished job's page shows something red")
	}
	doomed := page("/jobs/alice/doomed")
	mustContain(t, "the killed job's page", doomed, `<dd class="bad">dead</dd>`, dead, `<span class="state bad">(killed)</span>`)
	if strings.Contains(doomed, `class="state done"`) || strings.Contains(doomed, `class="done"`) {
		t.Error("the killed job's page shows something finished")
	}
	mustContain(t, "a finished task's page", page("/jobs/alice/batch/tasks/0"), finished)
	mustContain(t, "a killed task's page", page("/jobs/alice/doomed/tasks/0"), dead)
}
