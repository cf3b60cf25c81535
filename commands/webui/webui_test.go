package webui_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/corralhq/corral/commands/webui"
	"github.com/corralhq/corral/events"
)

func TestPages(t *testing.T) {
	c := openCell(t, smallCell())
	cases := []struct {
		path  string
		wants []string
	}{
		{"/", []string{"Machines up", `href="/machines/m0"`, "draining", "monitoring", "CPU by priority band", "<svg", "Events of the log over time",
			"Tasks to look at", `href="/jobs/alice/web/tasks/0"`, "running (unhealthy: GET /: connection refused)"}},
		{"/jobs", []string{`href="/jobs/alice/web"`, `href="/jobs/bob/huge"`, "team=web"}},
		{"/jobs?user=bob", []string{`href="/jobs/bob/huge"`}},
		{"/jobs?selector=team%3Dweb", []string{`href="/jobs/alice/web"`}},
		{"/jobs?state=pending", []string{`href="/jobs/bob/huge"`}},
		{"/jobs/alice/web", []string{"Why pending?", "insufficient memory", "ask for at most 8GiB", `href="/jobs/alice/web/tasks/0"`,
			`href="/machines/m0"`, "exit 3: exited", "while true; do sleep 1; done", "Timeline", "TaskEvicted"}},
		{"/jobs/alice/web?state=running", []string{`href="/jobs/alice/web/tasks/0"`}},
		{"/jobs/alice/web/tasks/1", []string{"TaskEvicted", `preempted by <a href="/jobs/carol/hog/tasks/0">carol/hog/0</a>`,
			"a monitoring task needed the room", "rescheduled", "reads no logs from agents"}},
		{"/jobs/alice/web/tasks/0?range=24h", []string{"<polyline", "CPU (cores)", "usage: last 0.5", "reservation: last 0.3", "limit: last 0.5"}},
		{"/machines/m0", []string{"rack", "amd64", `href="/jobs/alice/web/tasks/0"`, "Share of capacity"}},
		{"/events", []string{"MachineDown", `href="/machines/m2"`, "data-stream=\"/events/stream?from="}},
		{"/events?job=alice/web&type=TaskEvicted", []string{"TaskEvicted", `href="/jobs/alice/web/tasks/1"`}},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			code, body := c.get(t, tc.path)
			if code != http.StatusOK {
				t.Errorf("GET %s: %d\n%s", tc.path, code, body)
				return
			}
			mustContain(t, tc.path, body, tc.wants...)
			checkAccessible(t, tc.path, body)
		})
	}
	// Filters leave the others out.
	_, body := c.get(t, "/jobs?user=bob")
	if strings.Contains(body, "/jobs/alice/web") {
		t.Error("/jobs?user=bob lists alice's job")
	}
	_, body = c.get(t, "/jobs/alice/web?state=running")
	if strings.Contains(body, "/jobs/alice/web/tasks/1\"") {
		t.Error("the running filter lists pending task 1")
	}
}

func TestBadInputNamesTheField(t *testing.T) {
	c := openCell(t, smallCell())
	cases := []struct {
		path string
		code int
		want string
	}{
		{"/jobs?offset=-1", 400, "offset: &#34;-1&#34; is not a non-negative integer"},
		{"/jobs?state=sleeping", 400, "state: &#34;sleeping&#34; is not one of pending, running, dead"},
		{"/jobs?selector=team%3D%3D%3D", 400, "selector"},
		{"/jobs/alice/nope", 404, "alice/nope does not exist"},
		{"/jobs/alice/web/tasks/x", 400, "index: &#34;x&#34; is not a task index"},
		{"/jobs/alice/web/tasks/7", 404, "task alice/web/7 does not exist"},
		{"/jobs/alice/web/tasks/0?range=2y", 400, "range: &#34;2y&#34;"},
		{"/jobs/alice/web?state=odd", 400, "state: &#34;odd&#34; is not a task state"},
		{"/machines/m9", 404, "machine &#34;m9&#34; is not registered"},
		{"/events?job=web", 400, "job: name its user too"},
		{"/sql?q=SELECT+1&format=csv", 405, "format: a CSV download is a POST"},
		{"/nowhere", 404, "no page at /nowhere"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			code, body := c.get(t, tc.path)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("GET %s: %d, want %d with %q\n%s", tc.path, code, tc.code, tc.want, body)
			}
		})
	}
}

func TestSQLWithoutInfrastoreSaysSo(t *testing.T) {
	c := openCell(t, smallCell())
	// Who may ask comes first (commands.MayQueryCell): a user is refused.
	if code, _ := c.postSQL(t, "SELECT count(*) FROM task_events", ""); code != http.StatusForbidden {
		t.Fatalf("a user's query: status %d, want 403", code)
	}
	ui, err := webui.New(webui.Config{API: c.svc, Cell: c.m, User: "root", Hosts: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	c.ui = ui
	code, body := c.get(t, "/sql")
	if code != http.StatusOK {
		t.Fatalf("an admin's console: status %d", code)
	}
	mustContain(t, "/sql", body, `<label for="q">Query</label>`, "SELECT count(*) FROM task_events")
	checkAccessible(t, "/sql", body)
	code, body = c.postSQL(t, "SELECT count(*) FROM task_events", "")
	if code != http.StatusNotImplemented {
		t.Fatalf("status %d, want 501", code)
	}
	mustContain(t, "sql", body, "this master runs no Infrastore", "start it with one")
}

func TestConfigErrorsNameTheField(t *testing.T) {
	if _, err := webui.New(webui.Config{}); err == nil || !strings.Contains(err.Error(), "config.api") {
		t.Errorf("New without an API: %v", err)
	}
	c := openCell(t, smallCell())
	if _, err := webui.New(webui.Config{API: c.svc}); err == nil || !strings.Contains(err.Error(), "config.cell") {
		t.Errorf("New without a cell: %v", err)
	}
}

// TestEventStream reads the live log as server-sent events: the events
// after the position asked for, then one appended while it watches.
func TestEventStream(t *testing.T) {
	c := openCell(t, smallCell())
	srv := httptest.NewServer(c.ui)
	defer srv.Close()
	head, err := c.store.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events/stream?type=MachineDown", nil)
	req.Header.Set("Last-Event-ID", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	next := func() string {
		for lines.Scan() {
			if l := lines.Text(); strings.HasPrefix(l, "data: ") {
				return l
			}
		}
		t.Fatalf("stream ended: %v", lines.Err())
		return ""
	}
	if l := next(); !strings.Contains(l, `"type":"MachineDown"`) || !strings.Contains(l, `"href":"/machines/m2"`) {
		t.Errorf("first event %s, want m2's MachineDown", l)
	}
	_, err = c.store.Append(context.Background(), events.AppendRequest{ExpectedPosition: head, Events: []events.Event{
		events.New(events.MachineStream("m1"), t0.Add(time.Hour), &events.MachineDown{Machine: "m1", Reason: "unplugged"}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if l := next(); !strings.Contains(l, fmt.Sprintf(`"position":%d`, head+1)) || !strings.Contains(l, "unplugged") {
		t.Errorf("live event %s, want the one appended at %d", l, head+1)
	}
}

// checkAccessible checks what every page promises: labelled form controls,
// scoped header cells, one h1, and no duplicate ids.
func checkAccessible(t *testing.T, what, body string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	attr := func(n *html.Node, k string) (string, bool) {
		for _, a := range n.Attr {
			if a.Key == k {
				return a.Val, true
			}
		}
		return "", false
	}
	labels, ids := map[string]bool{}, map[string]int{}
	var controls []string
	h1 := 0
	var walk func(n *html.Node, inThead bool)
	walk = func(n *html.Node, inThead bool) {
		if n.Type == html.ElementNode {
			if id, ok := attr(n, "id"); ok {
				ids[id]++
			}
			switch n.Data {
			case "label":
				if f, ok := attr(n, "for"); ok {
					labels[f] = true
				}
			case "input", "select", "textarea":
				if typ, _ := attr(n, "type"); typ != "hidden" && typ != "submit" {
					id, _ := attr(n, "id")
					controls = append(controls, id)
				}
			case "th":
				if _, ok := attr(n, "scope"); !ok {
					t.Errorf("%s: a <th> without scope", what)
				}
			case "h1":
				h1++
			case "thead":
				inThead = true
			case "td":
				if inThead {
					t.Errorf("%s: a <td> in a <thead>", what)
				}
			case "img":
				if _, ok := attr(n, "alt"); !ok {
					t.Errorf("%s: an <img> without alt", what)
				}
			}
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch, inThead)
		}
	}
	walk(doc, false)
	for _, id := range controls {
		if id == "" || !labels[id] {
			t.Errorf("%s: a form control %q has no <label for>", what, id)
		}
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("%s: id %q is used %d times", what, id, n)
		}
	}
	if h1 != 1 {
		t.Errorf("%s: %d <h1>, want 1", what, h1)
	}
}

// Close ends live streams, so that a server can shut down.
func TestCloseEndsStreams(t *testing.T) {
	c := openCell(t, smallCell())
	srv := httptest.NewServer(c.ui)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/events/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		done <- err
	}()
	c.ui.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stream ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream outlived Close")
	}
}

// A draining machine's page says how many tasks are left and which job's
// disruption budget holds them; the cell's list says the tasks left.
func TestDrainingMachineShowsWhatHoldsIt(t *testing.T) {
	h := &history{}
	for _, m := range []string{"m0", "m1"} {
		h.machine(m)
	}
	h.job("alice", "web", 9, 2, res(500, 256<<20), nil)
	h.run("alice", "web", 0, "m0")
	h.run("alice", "web", 1, "m0")
	// The drain evicted task 0 (its budget, 1, allows one); its
	// replacement waits, so task 1 is held.
	h.add(events.MachineStream("m0"), &events.MachineDrainSet{Machine: "m0", Draining: true, Reason: "kernel upgrade"})
	h.add(events.TaskStream("alice", "web", 0), &events.TaskEvicted{User: "alice", Job: "web", Index: 0, Machine: "m0", Reason: "drain"})
	h.add(events.TaskStream("alice", "web", 0), &events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1, Reason: "rescheduled"})
	c := openCell(t, h.evs)
	code, body := c.get(t, "/machines/m0")
	if code != http.StatusOK {
		t.Fatalf("GET /machines/m0: %d", code)
	}
	mustContain(t, "/machines/m0", body, "draining, 1 tasks left", "job alice/web: 1 task(s) held, 1 of at most 1 disrupted")
	checkAccessible(t, "/machines/m0", body)
	_, body = c.get(t, "/")
	mustContain(t, "/", body, "draining, 1 tasks left")
}

// Every type of the events catalogue is offered by the events page's type
// filter, and filtering on it is a page, not an error: a new type is
// filterable the day it is registered.
func TestEveryEventTypeFilterable(t *testing.T) {
	c := openCell(t, smallCell())
	_, body := c.get(t, "/events")
	for _, typ := range events.Types() {
		if !strings.Contains(body, "<option>"+typ+"</option>") && !strings.Contains(body, "<option selected>"+typ+"</option>") {
			t.Errorf("the events page's type filter leaves out %s", typ)
		}
		if code, page := c.get(t, "/events?type="+typ); code != http.StatusOK || !strings.Contains(page, "<option selected>"+typ+"</option>") {
			t.Errorf("GET /events?type=%s: %d, the filter not kept", typ, code)
		}
	}
}
