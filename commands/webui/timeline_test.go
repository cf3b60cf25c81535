package webui_test

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
)

// busyService is a log where alice/web's three tasks fail and start again
// restarts times each, with every=k events of bob/noise between two of
// web's: a busy service, its events sparse in a busier log.
func busyService(restarts, every int) (evs []events.Event, webPositions []int64) {
	h := &history{}
	for _, m := range []string{"m0", "m1"} {
		h.machine(m)
	}
	h.job("bob", "noise", 4, 1, res(100, 64<<20), nil)
	noise := func() {
		for range every {
			h.add(events.TaskStream("bob", "noise", 0), &events.TaskFailed{User: "bob", Job: "noise", Index: 0, Machine: "m1", ExitCode: 1, WillRestart: true})
		}
	}
	h.job("alice", "web", 9, 3, res(500, 256<<20), nil)
	for i := range int32(3) {
		h.run("alice", "web", i, "m0")
	}
	for r := range restarts {
		for i := range int32(3) {
			noise()
			h.add(events.TaskStream("alice", "web", i), &events.TaskFailed{User: "alice", Job: "web", Index: i, Machine: "m0", ExitCode: int32(r), WillRestart: true})
			noise()
			h.add(events.TaskStream("alice", "web", i), &events.TaskStarted{User: "alice", Job: "web", Index: i, Machine: "m0", Pid: 5000 + int64(r)})
		}
	}
	noise()
	for p, e := range h.evs {
		if strings.HasPrefix(e.Stream, "job/alice/web") || strings.HasPrefix(e.Stream, "task/alice/web/") {
			webPositions = append(webPositions, int64(p+1))
		}
	}
	return h.evs, webPositions
}

var timelineRow = regexp.MustCompile(`<tr><td class="num">(\d+)</td>`)
var earlierLink = regexp.MustCompile(`<a href="([^"]+)" rel="next">Earlier events</a>`)

// timelinePage reads a job page's timeline: its positions, top to bottom,
// and the link to earlier events ("" when none).
func timelinePage(t *testing.T, c *testCell, path string) ([]int64, string) {
	t.Helper()
	code, body := c.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, code, body)
	}
	i := strings.Index(body, `id="timeline"`)
	if i < 0 {
		t.Fatalf("GET %s: no timeline", path)
	}
	var pos []int64
	for _, m := range timelineRow.FindAllStringSubmatch(body[i:], -1) {
		p, _ := strconv.ParseInt(m[1], 10, 64)
		pos = append(pos, p)
	}
	link := ""
	if m := earlierLink.FindStringSubmatch(body[i:]); m != nil {
		link = html.UnescapeString(m[1])
	}
	return pos, link
}

// A job's timeline opens at its newest event and pages back to its
// submission, each event once, newest first: for services few and many,
// alone in the log or sparse among another job's events.
func TestJobTimelineNewestFirst(t *testing.T) {
	for _, c := range []struct{ restarts, every int }{{0, 0}, {5, 0}, {40, 0}, {40, 3}, {7, 120}} {
		t.Run(fmt.Sprintf("%d restarts, %d between", c.restarts, c.every), func(t *testing.T) {
			evs, want := busyService(c.restarts, c.every)
			cell := openCell(t, evs)
			slices.Reverse(want)
			var got []int64
			path := "/jobs/alice/web"
			pages := 0
			for path != "" {
				pos, next := timelinePage(t, cell, path)
				pages++
				if len(pos) == 0 || len(pos) > 50 {
					t.Fatalf("%s shows %d events, want 1 to 50", path, len(pos))
				}
				if len(got) == 0 && pos[0] != want[0] {
					t.Fatalf("the job page opens at event %d, want its newest, %d", pos[0], want[0])
				}
				got = append(got, pos...)
				path = strings.TrimSuffix(next, "#timeline")
				if pages > 100 {
					t.Fatal("the timeline pages back without end")
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("paging back the timeline shows %d events %v...; want the job's %d, newest first %v...",
					len(got), got[:min(5, len(got))], len(want), want[:min(5, len(want))])
			}
			if wantPages := (len(want) + 49) / 50; pages != wantPages {
				t.Errorf("%d pages for %d events, want %d", pages, len(want), wantPages)
			}
		})
	}
	// A page back links to the newest again; a bad position is refused.
	evs, _ := busyService(40, 0)
	cell := openCell(t, evs)
	_, next := timelinePage(t, cell, "/jobs/alice/web")
	_, body := cell.get(t, strings.TrimSuffix(next, "#timeline"))
	mustContain(t, "an earlier page", body, ">Newest events</a>")
	if code, body := cell.get(t, "/jobs/alice/web?before=x"); code != http.StatusBadRequest || !strings.Contains(body, "before") {
		t.Errorf("before=x: %d, want 400 naming before:\n%s", code, body)
	}
}
