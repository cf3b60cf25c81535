package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
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
	if testing.Short() {
		t.Skip("builds the corral binary and runs a whole cell")
	}
	browser := chromium(t)
	shots := os.Getenv("CORRAL_SCREENSHOTS_DIR")
	if shots == "" {
		shots = t.ArtifactDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := buildCorral(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	grpcAddr, httpAddr, dnsAddr := freeTCP(t), freeTCP(t), freeUDPAndTCP(t)
	env := append(os.Environ(), "CORRAL_USER=alice", "CORRAL_MASTER="+grpcAddr, "CORRAL_CELL=dev", "CORRAL_DATA="+data)
	startUp(t, bin, root, env, []string{"up", "--data", data, "--listen", grpcAddr, "--http", httpAddr, "--dns", dnsAddr,
		"--port-base", strconv.Itoa(freeTaskPorts(t, 2)), "--agents", "2"})
	web := "http://" + httpAddr
	// Two jobs: hello runs, unschedulable asks for more memory than any
	// machine has.
	for _, job := range []string{"examples/hello.jsonnet", "examples/unschedulable.jsonnet"} {
		if out, code := runCorral(t, bin, root, env, "job", "submit", job); code != 0 {
			t.Fatalf("submit %s: exit %d\n%s", job, code, out)
		}
	}

	ctx := newBrowser(t, browser)
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// until reloads the page until cond holds.
	until := func(what string, timeout time.Duration, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		last := ""
		for {
			ok, msg := cond()
			if ok {
				return
			}
			last = msg
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
			}
			time.Sleep(300 * time.Millisecond)
			run("reload", chromedp.Reload())
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	eval := func(what, js string) any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}

	// Nothing is readable before a login: the jobs page sends the browser
	// to the login form, and a wrong token is refused there.
	run("jobs page, logged out", chromedp.Navigate(web+"/jobs"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	run("a wrong token", chromedp.SendKeys(chromedp.CSS(`#token`), "not-a-token"), chromedp.Click(chromedp.CSS(`#login`)),
		chromedp.WaitVisible(chromedp.CSS(`#token-err`)))
	if s := text("body"); strings.Contains(s, "hello") {
		t.Errorf("a page shown before a login names a job: %s", s)
	}
	shot("login")
	token, err := os.ReadFile(filepath.Join(data, "certs", "admins", "alice.token"))
	if err != nil {
		t.Fatal(err)
	}
	run("log in", chromedp.SendKeys(chromedp.CSS(`#token`), strings.TrimSpace(string(token))), chromedp.Click(chromedp.CSS(`#login`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/jobs/alice/hello"]`)))

	// The jobs page, by keyboard: the first Tab reaches the skip link.
	run("jobs page", chromedp.Navigate(web+"/jobs"), chromedp.WaitVisible(chromedp.CSS(`a[href="/jobs/alice/hello"]`)))
	run("tab", chromedp.KeyEvent(kb.Tab))
	if focused := eval("focus", `document.activeElement.className`); focused != "skip" {
		t.Errorf("the first Tab focuses %q, want the skip link", focused)
	}
	shot("jobs")

	// Follow the link to hello and see its five tasks running.
	run("follow hello", chromedp.Click(chromedp.CSS(`a[href="/jobs/alice/hello"]`)), chromedp.WaitVisible(chromedp.CSS(`#tasks`)))
	until("hello's 5 tasks running", 40*time.Second, func() (bool, string) {
		states, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#tasks tbody tr td:nth-child(2)')).map(td => td.textContent.trim())`))
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, s := range states {
			if s == "running" {
				running++
			}
		}
		return running == 5 && len(states) == 5, fmt.Sprint(states)
	})
	// And their memory measured, for a screenshot worth showing.
	until("hello's usage reported", 20*time.Second, func() (bool, string) {
		mem, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#tasks tbody tr td:nth-child(9)')).map(td => td.textContent.trim())`))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mem {
			if strings.HasPrefix(m, "0 /") {
				return false, fmt.Sprint(mem)
			}
		}
		return len(mem) == 5, fmt.Sprint(mem)
	})
	if h1 := text("h1"); h1 != "Job alice/hello" {
		t.Errorf("job page heading %q", h1)
	}
	shot("job")
	if os.Getenv("CORRAL_UPDATE_SCREENSHOTS") == "1" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "docs", "job-page.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A task's page: its history says where it was scheduled, and its
	// usage is charted.
	run("task page", chromedp.Click(chromedp.CSS(`a[href="/jobs/alice/hello/tasks/0"]`)), chromedp.WaitVisible(chromedp.CSS(`#usage-h`)))
	until("task 0's usage charted", 20*time.Second, func() (bool, string) {
		n := eval("usage lines", `document.querySelectorAll('svg polyline.usage').length`)
		return n == 2.0, fmt.Sprintf("%v usage lines", n)
	})
	if h := text("#history tbody"); !strings.Contains(h, "TaskScheduled") || !strings.Contains(h, "TaskStarted") {
		t.Errorf("task history: %s", h)
	}
	// Its stdout follows what it writes (a line every 5 s), streamed from
	// its agent through the master.
	rounds := func() float64 {
		n, _ := eval("rounds", `(document.querySelector('pre[data-follow$="/stdout"]').textContent.match(/\(round /g) || []).length`).(float64)
		return n
	}
	atLoad := rounds()
	until("task 0's stdout followed live", 20*time.Second, func() (bool, string) {
		n := rounds()
		return n > atLoad, fmt.Sprintf("%v rounds, %v when the page loaded", n, atLoad)
	})
	shot("task")

	// A task that wrote more than its log box holds: the box opens at the
	// newest line, not the oldest.
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
	if out, code := runCorral(t, bin, root, env, "job", "submit", chatty, "--wait"); code != 0 {
		t.Fatalf("submit chatty: exit %d\n%s", code, out)
	}
	run("chatty's task page", chromedp.Navigate(web+"/jobs/alice/chatty/tasks/0"), chromedp.WaitVisible(chromedp.CSS(`#logs-h`)))
	until("chatty's last line in its page", 20*time.Second, func() (bool, string) {
		s, _ := eval("stdout", `document.querySelector('pre[data-follow$="/stdout"]').textContent`).(string)
		return strings.Contains(s, "the newest line"), fmt.Sprintf("%d characters of stdout", len(s))
	})
	scroll := eval("the log box's scroll", `(p => [p.scrollHeight, p.clientHeight, p.scrollTop])(document.querySelector('pre[data-follow$="/stdout"]'))`)
	if v, ok := scroll.([]any); !ok || len(v) != 3 {
		t.Errorf("the log box's scroll: %v", scroll)
	} else if height, client, top := v[0].(float64), v[1].(float64), v[2].(float64); height <= client || top+client < height-4 {
		t.Errorf("chatty's log box (%v high, %v shown) opens scrolled to %v, want its newest line at the bottom", height, client, top)
	}
	shot("task-chatty")

	// unschedulable says why it waits.
	run("unschedulable", chromedp.Navigate(web+"/jobs/alice/unschedulable"), chromedp.WaitVisible(chromedp.CSS(`#why-h`)))
	until("the why-pending explanation", 20*time.Second, func() (bool, string) {
		n := eval("classes", `document.querySelectorAll('.why-class').length`)
		s := text(".why")
		return n != 0.0 && strings.Contains(s, "memory"), s
	})
	if s := text(".why"); !strings.Contains(s, "What would help") {
		t.Errorf("the explanation has no hint: %s", s)
	}
	shot("unschedulable")

	// The SQL console, typed into and submitted with the keyboard.
	run("sql page", chromedp.Navigate(web+"/sql"), chromedp.WaitVisible(chromedp.CSS(`#q`)),
		chromedp.SendKeys(chromedp.CSS(`#q`), "SELECT count(*) FROM task_events"),
		chromedp.Click(chromedp.CSS(`#run`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
	count := text(`#result tbody td`)
	n, err := strconv.Atoi(strings.TrimSpace(count))
	if err != nil || n < 5 {
		t.Errorf("SELECT count(*) FROM task_events shows %q, want a count of at least hello's 5 submissions", count)
	}
	csv, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#csv`), "value"))
	if err != nil || !csv.Exists || csv.Value != "csv" {
		t.Errorf("no CSV download button: %+v %v", csv, err)
	}
	shot("sql")

	// The schema panel: every table, view and macro; one opens to its
	// columns with type and description, and a click on a name puts it
	// into the query at the cursor.
	run("schema panel", chromedp.Navigate(web+"/sql"), chromedp.WaitVisible(chromedp.CSS(`#schema`)))
	if n := eval("tables", `document.querySelectorAll('#schema details').length`).(float64); n < 20 {
		t.Errorf("the schema panel lists %v tables", n)
	}
	const usage = `#schema details[data-table="task_usage"]`
	run("open task_usage", chromedp.Click(chromedp.CSS(usage+` summary .muted`)),
		chromedp.WaitVisible(chromedp.CSS(usage+` button[data-insert="cpu_usage_core_hours"]`)))
	if row := text(usage + ` tr:has(button[data-insert="cpu_usage_core_hours"])`); !strings.Contains(row, "DECIMAL(18,9)") || !strings.Contains(row, "core-hours") {
		t.Errorf("task_usage's cpu_usage_core_hours row: %q", row)
	}
	run("compose a query by clicks", chromedp.SendKeys(chromedp.CSS(`#q`), "SELECT sum("),
		chromedp.Click(chromedp.CSS(usage+` button[data-insert="cpu_usage_core_hours"]`)),
		chromedp.SendKeys(chromedp.CSS(`#q`), ") AS used FROM "),
		chromedp.Click(chromedp.CSS(usage+` summary button[data-insert="task_usage"]`)))
	if q := eval("query", `document.getElementById('q').value`); q != "SELECT sum(cpu_usage_core_hours) AS used FROM task_usage" {
		t.Errorf("the query composed by clicks: %q", q)
	}
	run("run it", chromedp.Click(chromedp.CSS(`#run`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
	if h := text(`#result thead`); strings.TrimSpace(h) != "used" {
		t.Errorf("the composed query's columns: %q", h)
	}
	shot("sql-schema")
	// corral sql --describe answers the same through the master.
	if out, code := runCorral(t, bin, root, env, "sql", "--describe"); code != 0 || !strings.Contains(out, "task_usage") || !strings.Contains(out, "tasks_at(ts)") {
		t.Errorf("corral sql --describe: exit %d\n%s", code, out)
	}
	if out, code := runCorral(t, bin, root, env, "sql", "--describe", "task_usage"); code != 0 || !regexp.MustCompile(`cpu_usage_core_hours\s+DECIMAL\(18,9\)\s+CPU used`).MatchString(out) {
		t.Errorf("corral sql --describe task_usage: exit %d\n%s", code, out)
	}
	if out, code := runCorral(t, bin, root, env, "sql", "--describe", "nope"); code == 0 || !strings.Contains(out, `"nope"`) || !strings.Contains(out, "there are: ingest_state") {
		t.Errorf("corral sql --describe nope: exit %d\n%s", code, out)
	}

	// The costs page: the month so far, priced by the cell's first sheet;
	// hello appears among the top jobs once its usage is ingested, and the
	// month's FOCUS file comes from the page's own download form.
	run("costs page", chromedp.Navigate(web+"/costs"), chromedp.WaitVisible(chromedp.CSS(`#cost-summary`)))
	until("hello's spend on the costs page", 60*time.Second, func() (bool, string) {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`main`)))
		return err == nil && strings.Contains(s, "alice/hello"), s
	})
	if s := strings.TrimSpace(text(`#cost-total`)); !regexp.MustCompile(`^[0-9]+\.[0-9]+ USD$`).MatchString(s) || regexp.MustCompile(`^0\.0+ `).MatchString(s) {
		t.Errorf("costs total %q, want a positive amount in USD", s)
	}
	if s := text(`#cost-idle`); !strings.Contains(s, "% of the total") {
		t.Errorf("idle capacity %q: no share", s)
	}
	if n := eval("charts", `document.querySelectorAll('figure.chart svg polyline').length`); n.(float64) < 3 {
		t.Errorf("%v lines drawn on the costs page", n)
	}
	got := eval("FOCUS download", `(() => {
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
	shot("costs")

	// The cell page, and the events page receiving live events.
	run("cell page", chromedp.Navigate(web+"/"), chromedp.WaitVisible(chromedp.CSS(`#alloc-h`)))
	if s := text(".stats"); !regexp.MustCompile(`Machines up\s*2`).MatchString(s) {
		t.Errorf("cell summary: %s", s)
	}
	shot("cell")
	// What changed since the log's first event, from the cell page's form.
	run("diff page", chromedp.SendKeys(chromedp.CSS(`#c-from`), "1"), chromedp.Submit(chromedp.CSS(`#c-from`)),
		chromedp.WaitVisible(chromedp.CSS(`#diff-span`)))
	if s := text("main"); !strings.Contains(s, "alice/hello") || !strings.Contains(s, "machine added") {
		t.Errorf("the diff page from position 1: %.2000s", s)
	}
	shot("diff")
	// What if: from the cell page's link, the cell's history replayed
	// unchanged puts every placement where it went.
	run("cell page again", chromedp.Navigate(web+"/"), chromedp.WaitVisible(chromedp.CSS(`#alloc-h`)))
	run("what-if page", chromedp.Click(chromedp.CSS(`a[href="/sim"]`)), chromedp.WaitVisible(chromedp.CSS(`#s-remove`)),
		chromedp.Submit(chromedp.CSS(`#s-remove`)), chromedp.WaitVisible(chromedp.CSS(`#sim-summary`)))
	if s := text("#sim-summary"); !regexp.MustCompile(`placements as recorded\s*(\d+) of (\d+)`).MatchString(s) {
		t.Errorf("the what-if page: %.2000s", s)
	} else if m := regexp.MustCompile(`placements as recorded\s*(\d+) of (\d+)`).FindStringSubmatch(s); m[1] != m[2] || m[1] == "0" {
		t.Errorf("an unchanged replay placed %s of %s as recorded", m[1], m[2])
	}
	shot("sim")
	run("cell page again", chromedp.Navigate(web+"/"), chromedp.WaitVisible(chromedp.CSS(`#alloc-h`)))
	run("machine page", chromedp.Click(chromedp.CSS(`a[href="/machines/m1"]`)), chromedp.WaitVisible(chromedp.CSS(`#cap-h`)))
	shot("machine")
	run("events page", chromedp.Navigate(web+"/events"), chromedp.WaitVisible(chromedp.CSS(`#events`)))
	// Usage windows arrive every few seconds: the stream brings them.
	waitText(t, ctx, "#live-status", "since the page loaded", 20*time.Second)
	shot("events")
	t.Logf("screenshots in %s", shots)
}

// waitText waits until the element's text contains want, without reloading.
func waitText(t *testing.T, ctx context.Context, sel, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var s string
	for time.Now().Before(deadline) {
		var err error
		if s, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel))); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(s, want) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %q, want %q within %s", sel, s, want, timeout)
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
