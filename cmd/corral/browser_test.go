package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/corralhq/corral/internal/testkit"
)

// Screenshots go to t.ArtifactDir() (kept with `go test -artifacts`), or
// to $CORRAL_SCREENSHOTS_DIR when set. CORRAL_UPDATE_SCREENSHOTS=1 also
// writes the job page to docs/job-page.png for the README.

// chromium finds the browser. Under CI=true a missing browser fails the
// test: .ci/run installs Debian's chromium.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on $PATH: install Debian's chromium package (apt-get install -y chromium)")
	}
	t.Skip("no chromium on $PATH (apt-get install -y chromium); CI=true makes this a failure")
	return ""
}

// TestInBrowser drives the web UI of a real `corral up` in headless
// Chromium: the login, the jobs, job, task and machine pages, why a job is
// pending, the SQL console and the live events page.
func TestInBrowser(t *testing.T) {
	browser := chromium(t)
	shots := os.Getenv("CORRAL_SCREENSHOTS_DIR")
	if shots == "" {
		shots = t.ArtifactDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	c := startCell(t, cellOptions{agents: 2})
	// Two jobs: hello runs, unschedulable asks for more memory than any
	// machine has.
	for _, job := range []string{"examples/hello.jsonnet", "examples/unschedulable.jsonnet"} {
		if out, code := c.run(t, "job", "submit", job); code != 0 {
			t.Fatalf("submit %s: exit %d\n%s", job, code, out)
		}
	}
	b := &browserSession{t: t, ctx: newBrowser(t, browser), web: "http://" + c.httpAddr, shots: shots}
	logInInTheBrowser(b, c)
	jobsAndHelloPages(b, c)
	taskPageChartsAndFollows(b)
	longLogOpensAtItsNewestLine(b, c)
	unschedulableSaysWhyOnItsPage(b)
	sqlConsoleAndSchemaPanel(b, c)
	costsPage(b)
	cellDiffSimMachineAndEventsPages(b)
	t.Logf("screenshots in %s", shots)
}

// browserSession is one headless browser driven by a test.
type browserSession struct {
	t     *testing.T
	ctx   context.Context
	web   string // the cell's web UI, http://host:port
	shots string // where screenshots go
}

// shot saves a screenshot of the page under name.
func (b *browserSession) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browserSession) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// until reloads the page until cond holds.
func (b *browserSession) until(what string, timeout time.Duration, cond func() (bool, string)) {
	b.t.Helper()
	first := true
	testkit.EventuallyEvery(b.t, timeout, 300*time.Millisecond, what, func() (bool, string) {
		if !first {
			b.run("reload", chromedp.Reload())
		}
		first = false
		return cond()
	})
}

func (b *browserSession) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (b *browserSession) eval(what, js string) any {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](js))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// column is the trimmed text of a column of the #tasks table.
func (b *browserSession) column(n int) []string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`Array.from(document.querySelectorAll('#tasks tbody tr td:nth-child(%d)')).map(td => td.textContent.trim())`, n)))
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// waitText waits until the element's text contains want, without reloading.
func (b *browserSession) waitText(sel, want string, timeout time.Duration) {
	b.t.Helper()
	testkit.EventuallyEvery(b.t, timeout, 200*time.Millisecond, sel+" says "+want, func() (bool, string) {
		s := b.text(sel)
		return strings.Contains(s, want), s
	})
}

// logInInTheBrowser: nothing is readable before a login: the jobs page
// sends the browser to the login form, and a wrong token is refused
// there; the admin's token logs in.
func logInInTheBrowser(b *browserSession, c *testCell) {
	t := b.t
	t.Helper()
	b.run("jobs page, logged out", chromedp.Navigate(b.web+"/jobs"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	b.run("a wrong token", chromedp.SendKeys(chromedp.CSS(`#token`), "not-a-token"), chromedp.Click(chromedp.CSS(`#login`)),
		chromedp.WaitVisible(chromedp.CSS(`#token-err`)))
	if s := b.text("body"); strings.Contains(s, "hello") {
		t.Errorf("a page shown before a login names a job: %s", s)
	}
	b.shot("login")
	token, err := os.ReadFile(c.adminToken("alice"))
	if err != nil {
		t.Fatal(err)
	}
	b.run("log in", chromedp.SendKeys(chromedp.CSS(`#token`), strings.TrimSpace(string(token))), chromedp.Click(chromedp.CSS(`#login`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/jobs/alice/hello"]`)))
}

// jobsAndHelloPages: the jobs page, by keyboard (the first Tab reaches the
// skip link); its link to hello, whose five tasks run and whose memory is
// measured.
func jobsAndHelloPages(b *browserSession, c *testCell) {
	t := b.t
	t.Helper()
	b.run("jobs page", chromedp.Navigate(b.web+"/jobs"), chromedp.WaitVisible(chromedp.CSS(`a[href="/jobs/alice/hello"]`)))
	b.run("tab", chromedp.KeyEvent(kb.Tab))
	if focused := b.eval("focus", `document.activeElement.className`); focused != "skip" {
		t.Errorf("the first Tab focuses %q, want the skip link", focused)
	}
	b.shot("jobs")
	b.run("follow hello", chromedp.Click(chromedp.CSS(`a[href="/jobs/alice/hello"]`)), chromedp.WaitVisible(chromedp.CSS(`#tasks`)))
	b.until("hello's 5 tasks running", 40*time.Second, func() (bool, string) {
		states := b.column(2)
		return slices.Equal(states, slices.Repeat([]string{"running"}, 5)), fmt.Sprint(states)
	})
	// And their memory measured, for a screenshot worth showing.
	b.until("hello's usage reported", 20*time.Second, func() (bool, string) {
		mem := b.column(9)
		return len(mem) == 5 && !slices.ContainsFunc(mem, func(m string) bool { return strings.HasPrefix(m, "0 /") }), fmt.Sprint(mem)
	})
	if h1 := b.text("h1"); h1 != "Job alice/hello" {
		t.Errorf("job page heading %q", h1)
	}
	b.shot("job")
	if os.Getenv("CORRAL_UPDATE_SCREENSHOTS") == "1" {
		png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.root, "docs", "job-page.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// taskPageChartsAndFollows: a task's page: its history says where it was
// scheduled, its usage is charted, and its stdout follows what it writes
// (a line every 5 s), streamed from its agent through the master.
func taskPageChartsAndFollows(b *browserSession) {
	t := b.t
	t.Helper()
	b.run("task page", chromedp.Click(chromedp.CSS(`a[href="/jobs/alice/hello/tasks/0"]`)), chromedp.WaitVisible(chromedp.CSS(`#usage-h`)))
	b.until("task 0's usage charted", 20*time.Second, func() (bool, string) {
		n := b.eval("usage lines", `document.querySelectorAll('svg polyline.usage').length`)
		return n == 2.0, fmt.Sprintf("%v usage lines", n)
	})
	if h := b.text("#history tbody"); !strings.Contains(h, "TaskScheduled") || !strings.Contains(h, "TaskStarted") {
		t.Errorf("task history: %s", h)
	}
	rounds := func() float64 {
		n, _ := b.eval("rounds", `(document.querySelector('pre[data-follow$="/stdout"]').textContent.match(/\(round /g) || []).length`).(float64)
		return n
	}
	atLoad := rounds()
	b.until("task 0's stdout followed live", 20*time.Second, func() (bool, string) {
		n := rounds()
		return n > atLoad, fmt.Sprintf("%v rounds, %v when the page loaded", n, atLoad)
	})
	b.shot("task")
}

// longLogOpensAtItsNewestLine: a task that wrote more than its log box
// holds: the box opens at the newest line, not the oldest.
func longLogOpensAtItsNewestLine(b *browserSession, c *testCell) {
	t := b.t
	t.Helper()
	chatty := filepath.Join(t.TempDir(), "chatty.yaml")
	if err := os.WriteFile(chatty, []byte(`name: chatty
priority: batch
count: 1
command: /bin/sh
args: ["-c", "i=0; while [ $i -lt 400 ]; do echo \"line $i\"; i=$((i+1)); done; echo the newest line; sleep 3600"]
resources: {cpu: 100m, memory: 32MiB}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := c.run(t, "job", "submit", chatty, "--wait"); code != 0 {
		t.Fatalf("submit chatty: exit %d\n%s", code, out)
	}
	b.run("chatty's task page", chromedp.Navigate(b.web+"/jobs/alice/chatty/tasks/0"), chromedp.WaitVisible(chromedp.CSS(`#logs-h`)))
	b.until("chatty's last line in its page", 20*time.Second, func() (bool, string) {
		s, _ := b.eval("stdout", `document.querySelector('pre[data-follow$="/stdout"]').textContent`).(string)
		return strings.Contains(s, "the newest line"), fmt.Sprintf("%d characters of stdout", len(s))
	})
	scroll := b.eval("the log box's scroll", `(p => [p.scrollHeight, p.clientHeight, p.scrollTop])(document.querySelector('pre[data-follow$="/stdout"]'))`)
	if v, ok := scroll.([]any); !ok || len(v) != 3 {
		t.Errorf("the log box's scroll: %v", scroll)
	} else if height, client, top := v[0].(float64), v[1].(float64), v[2].(float64); height <= client || top+client < height-4 {
		t.Errorf("chatty's log box (%v high, %v shown) opens scrolled to %v, want its newest line at the bottom", height, client, top)
	}
	b.shot("task-chatty")
}

// unschedulableSaysWhyOnItsPage: the job's page says why it waits, and
// what would help.
func unschedulableSaysWhyOnItsPage(b *browserSession) {
	t := b.t
	t.Helper()
	b.run("unschedulable", chromedp.Navigate(b.web+"/jobs/alice/unschedulable"), chromedp.WaitVisible(chromedp.CSS(`#why-h`)))
	b.until("the why-pending explanation", 20*time.Second, func() (bool, string) {
		n := b.eval("classes", `document.querySelectorAll('.why-class').length`)
		s := b.text(".why")
		return n != 0.0 && strings.Contains(s, "memory"), s
	})
	if s := b.text(".why"); !strings.Contains(s, "What would help") {
		t.Errorf("the explanation has no hint: %s", s)
	}
	b.shot("unschedulable")
}

// sqlConsoleAndSchemaPanel: the SQL console, typed into and submitted
// with the keyboard; the schema panel lists every table, view and macro,
// one opens to its columns with type and description, and a click on a
// name puts it into the query at the cursor. corral sql --describe
// answers the same through the master.
func sqlConsoleAndSchemaPanel(b *browserSession, c *testCell) {
	t := b.t
	t.Helper()
	b.run("sql page", chromedp.Navigate(b.web+"/sql"), chromedp.WaitVisible(chromedp.CSS(`#q`)),
		chromedp.SendKeys(chromedp.CSS(`#q`), "SELECT count(*) FROM task_events"),
		chromedp.Click(chromedp.CSS(`#run`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
	count := b.text(`#result tbody td`)
	if n, err := strconv.Atoi(strings.TrimSpace(count)); err != nil || n < 5 {
		t.Errorf("SELECT count(*) FROM task_events shows %q, want a count of at least hello's 5 submissions", count)
	}
	csv, err := chromedp.Run(b.ctx, chromedp.AttributeValue(chromedp.CSS(`#csv`), "value"))
	if err != nil || !csv.Exists || csv.Value != "csv" {
		t.Errorf("no CSV download button: %+v %v", csv, err)
	}
	b.shot("sql")

	b.run("schema panel", chromedp.Navigate(b.web+"/sql"), chromedp.WaitVisible(chromedp.CSS(`#schema`)))
	if n := b.eval("tables", `document.querySelectorAll('#schema details').length`).(float64); n < 20 {
		t.Errorf("the schema panel lists %v tables", n)
	}
	const usage = `#schema details[data-table="task_usage"]`
	b.run("open task_usage", chromedp.Click(chromedp.CSS(usage+` summary .muted`)),
		chromedp.WaitVisible(chromedp.CSS(usage+` button[data-insert="cpu_usage_core_hours"]`)))
	if row := b.text(usage + ` tr:has(button[data-insert="cpu_usage_core_hours"])`); !strings.Contains(row, "DECIMAL(18,9)") || !strings.Contains(row, "core-hours") {
		t.Errorf("task_usage's cpu_usage_core_hours row: %q", row)
	}
	b.run("compose a query by clicks", chromedp.SendKeys(chromedp.CSS(`#q`), "SELECT sum("),
		chromedp.Click(chromedp.CSS(usage+` button[data-insert="cpu_usage_core_hours"]`)),
		chromedp.SendKeys(chromedp.CSS(`#q`), ") AS used FROM "),
		chromedp.Click(chromedp.CSS(usage+` summary button[data-insert="task_usage"]`)))
	if q := b.eval("query", `document.getElementById('q').value`); q != "SELECT sum(cpu_usage_core_hours) AS used FROM task_usage" {
		t.Errorf("the query composed by clicks: %q", q)
	}
	b.run("run it", chromedp.Click(chromedp.CSS(`#run`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
	if h := b.text(`#result thead`); strings.TrimSpace(h) != "used" {
		t.Errorf("the composed query's columns: %q", h)
	}
	b.shot("sql-schema")
	sqlDescribe(t, c)
}

// sqlDescribe: corral sql --describe lists the tables and macros, a
// table's columns, and names the tables there are for one there is not.
func sqlDescribe(t *testing.T, c *testCell) {
	t.Helper()
	if out, code := c.run(t, "sql", "--describe"); code != 0 || !strings.Contains(out, "task_usage") || !strings.Contains(out, "tasks_at(ts)") {
		t.Errorf("corral sql --describe: exit %d\n%s", code, out)
	}
	if out, code := c.run(t, "sql", "--describe", "task_usage"); code != 0 || !regexp.MustCompile(`cpu_usage_core_hours\s+DECIMAL\(18,9\)\s+CPU used`).MatchString(out) {
		t.Errorf("corral sql --describe task_usage: exit %d\n%s", code, out)
	}
	if out, code := c.run(t, "sql", "--describe", "nope"); code == 0 || !strings.Contains(out, `"nope"`) || !strings.Contains(out, "there are: ingest_state") {
		t.Errorf("corral sql --describe nope: exit %d\n%s", code, out)
	}
}

// costsPage: the month so far, priced by the cell's first sheet; hello
// appears among the top jobs once its usage is ingested, and the month's
// FOCUS file comes from the page's own download form.
func costsPage(b *browserSession) {
	t := b.t
	t.Helper()
	b.run("costs page", chromedp.Navigate(b.web+"/costs"), chromedp.WaitVisible(chromedp.CSS(`#cost-summary`)))
	b.until("hello's spend on the costs page", 60*time.Second, func() (bool, string) {
		s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(`main`)))
		return err == nil && strings.Contains(s, "alice/hello"), s
	})
	if s := strings.TrimSpace(b.text(`#cost-total`)); !regexp.MustCompile(`^[0-9]+\.[0-9]+ USD$`).MatchString(s) || regexp.MustCompile(`^0\.0+ `).MatchString(s) {
		t.Errorf("costs total %q, want a positive amount in USD", s)
	}
	if s := b.text(`#cost-idle`); !strings.Contains(s, "% of the total") {
		t.Errorf("idle capacity %q: no share", s)
	}
	if n := b.eval("charts", `document.querySelectorAll('figure.chart svg polyline').length`); n.(float64) < 3 {
		t.Errorf("%v lines drawn on the costs page", n)
	}
	got := b.eval("FOCUS download", `(() => {
		const x = new XMLHttpRequest();
		x.open('POST', '/costs/focus', false);
		x.setRequestHeader('Content-Type', 'application/x-www-form-urlencoded');
		x.send(new URLSearchParams(new FormData(document.querySelector('form.download'))).toString());
		return x.status + ' ' + x.getResponseHeader('Content-Disposition') + '\n' + x.responseText.slice(0, 100000);
	})()`).(string)
	if !strings.HasPrefix(got, "200 attachment; filename=\"corral-focus-") || !strings.Contains(got, "\nBilledCost,") ||
		!strings.Contains(got, ",alice/hello,") || !strings.Contains(got, "Idle capacity") {
		t.Errorf("the FOCUS download: %.2000s", got)
	}
	b.shot("costs")
}

// cellDiffSimMachineAndEventsPages: the cell page; what changed since the
// log's first event, from its form; what if, from its link (the history
// replayed unchanged puts every placement where it went); a machine's
// page; and the events page receiving live events.
func cellDiffSimMachineAndEventsPages(b *browserSession) {
	t := b.t
	t.Helper()
	b.run("cell page", chromedp.Navigate(b.web+"/"), chromedp.WaitVisible(chromedp.CSS(`#alloc-h`)))
	if s := b.text(".stats"); !regexp.MustCompile(`Machines up\s*2`).MatchString(s) {
		t.Errorf("cell summary: %s", s)
	}
	b.shot("cell")
	b.run("diff page", chromedp.SendKeys(chromedp.CSS(`#c-from`), "1"), chromedp.Submit(chromedp.CSS(`#c-from`)),
		chromedp.WaitVisible(chromedp.CSS(`#diff-span`)))
	if s := b.text("main"); !strings.Contains(s, "alice/hello") || !strings.Contains(s, "machine added") {
		t.Errorf("the diff page from position 1: %.2000s", s)
	}
	b.shot("diff")
	b.run("cell page again", chromedp.Navigate(b.web+"/"), chromedp.WaitVisible(chromedp.CSS(`#alloc-h`)))
	b.run("what-if page", chromedp.Click(chromedp.CSS(`a[href="/sim"]`)), chromedp.WaitVisible(chromedp.CSS(`#s-remove`)),
		chromedp.Submit(chromedp.CSS(`#s-remove`)), chromedp.WaitVisible(chromedp.CSS(`#sim-summary`)))
	if m := regexp.MustCompile(`placements as recorded\s*(\d+) of (\d+)`).FindStringSubmatch(b.text("#sim-summary")); m == nil {
		t.Errorf("the what-if page: %.2000s", b.text("#sim-summary"))
	} else if m[1] != m[2] || m[1] == "0" {
		t.Errorf("an unchanged replay placed %s of %s as recorded", m[1], m[2])
	}
	b.shot("sim")
	b.run("cell page again", chromedp.Navigate(b.web+"/"), chromedp.WaitVisible(chromedp.CSS(`#alloc-h`)))
	b.run("machine page", chromedp.Click(chromedp.CSS(`a[href="/machines/m1"]`)), chromedp.WaitVisible(chromedp.CSS(`#cap-h`)))
	b.shot("machine")
	b.run("events page", chromedp.Navigate(b.web+"/events"), chromedp.WaitVisible(chromedp.CSS(`#events`)))
	// Usage windows arrive every few seconds: the stream brings them.
	b.waitText("#live-status", "since the page loaded", 20*time.Second)
	b.shot("events")
}

// newBrowser starts headless Chromium with a fresh profile and nothing
// that reaches the network on its own.
func newBrowser(t *testing.T, path string) context.Context {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("password-store", "basic"),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}
