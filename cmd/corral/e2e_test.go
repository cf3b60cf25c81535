package main_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/internal/shareddata"
)

// TestNewcomerPath walks the README's newcomer path against a real `corral up`:
// the binary built once, a temporary data dir, free ports. Each step checks
// what a person would look for in the output.
func TestNewcomerPath(t *testing.T) {
	c := startCell(t, cellOptions{})
	checkBanner(t, c)
	submitHelloAndSeeItOnTheWeb(t, c)
	unschedulableSaysWhy(t, c)
	historyAndSQLOfHello(t, c)
	pricesAndTheFocusExport(t, c)
	theCellAtEarlierPositions(t, c)
	webServesAtItsPortsAndNames(t, c)
	// A second cell beside this one, as the walk says: both answer, and
	// neither touches the other's tasks.
	runSecondCell(t, c)
	ctrlCStopsTasksAndUpBringsThemBack(t, c)
	stoppedCellsFilesAnswer(t, c)
	simReplaysTheCell(t, c)
}

// checkBanner: corral up names the cell's machines, addresses, task ports
// and the client's exports, and the first command to try.
func checkBanner(t *testing.T, c *testCell) {
	t.Helper()
	for _, want := range []string{`corral cell "dev" is up: 3 of 3 machines registered`, c.grpcAddr, "http://" + c.httpAddr, c.dnsAddr, "corral job submit examples/hello.jsonnet --wait",
		"export CORRAL_MASTER=" + c.grpcAddr + "\n", "export CORRAL_DATA=" + c.data + "\n", "corral task get hello 0",
		"task ports  " + strconv.Itoa(c.portBase) + "-" + strconv.Itoa(c.portBase+2999)} {
		if !strings.Contains(c.up.out.String(), want) {
			t.Fatalf("corral up printed no %q:\n%s", want, c.up.out.String())
		}
	}
}

// submitHelloAndSeeItOnTheWeb: hello's five tasks run, each on a machine;
// the web UI asks for a login, takes the admin's token and then lists
// it; /healthz says the master leads.
func submitHelloAndSeeItOnTheWeb(t *testing.T, c *testCell) {
	t.Helper()
	corral := c.cli(t)
	out, code := corral("job", "submit", "examples/hello.jsonnet", "--wait")
	if code != 0 || !strings.Contains(out, "job alice/hello submitted: 5 task(s)") || !strings.Contains(out, "alice/hello: all 5 tasks running") {
		t.Errorf("submit --wait: exit %d", code)
	}
	if resp, err := http.Get("http://" + c.httpAddr + "/jobs"); err != nil || resp.Request.URL.Path != "/login" {
		t.Errorf("GET /jobs without a login: %v, want the login page", err)
	} else {
		resp.Body.Close()
	}
	web := c.webLogin(t, c.adminToken("alice"))
	for path, want := range map[string]string{"/healthz": `"leader":true`, "/jobs": "hello", "/jobs/alice/hello/tasks/0": "hello from task 0"} {
		eventually(t, "GET "+path, 15*time.Second, func() (string, bool) {
			resp, err := web.Get("http://" + c.httpAddr + path)
			if err != nil {
				return err.Error(), false
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return string(body), resp.StatusCode == 200 && strings.Contains(string(body), want)
		})
	}
	out, code = corral("task", "list", "hello")
	running := regexp.MustCompile(`(?m)^hello/[0-4]\s+running\s+-\s+m[1-3]\s`).FindAllString(out, -1)
	if code != 0 || len(running) != 5 {
		t.Errorf("task list: exit %d, %d tasks running, want 5", code, len(running))
	}
}

// unschedulableSaysWhy: the unschedulable example waits, and why says it,
// now and at a position of the log; its name is taken.
func unschedulableSaysWhy(t *testing.T, c *testCell) {
	t.Helper()
	corral := c.cli(t)
	out, code := corral("job", "submit", "examples/unschedulable.jsonnet")
	if code != 0 || !strings.Contains(out, "job alice/unschedulable submitted") {
		t.Errorf("submit unschedulable: exit %d", code)
	}
	eventually(t, "why unschedulable explains the memory", 20*time.Second, func() (string, bool) {
		out, code := corral("why", "unschedulable")
		return out, code == 0 && strings.Contains(out, "fit on none of 3 machines") && strings.Contains(out, "3 machine(s): not enough memory")
	})
	// Why it waited is history: recorded once, asked at a position.
	out, _ = corral("events", "--type", "PendingReasonsChanged", "-o", "csv")
	if m := regexp.MustCompile(`(?m)^(\d+),`).FindStringSubmatch(out); m == nil {
		t.Errorf("no PendingReasonsChanged in the log:\n%s", out)
	} else if out, code := corral("why", "unschedulable", "--at", m[1]); code != 0 ||
		!strings.Contains(out, "tasks 0: not enough memory") || !strings.Contains(out, "hint: with memory") {
		t.Errorf("why unschedulable --at %s: exit %d:\n%s", m[1], code, out)
	}
	out, code = corral("job", "submit", "examples/unschedulable.jsonnet", "--wait")
	if code != 1 || !strings.Contains(out, "exists") {
		t.Errorf("submitting it again: exit %d, want 1 and the name taken", code)
	}
}

// historyAndSQLOfHello: hello's events, SQL over task events (five hello
// tasks and one unschedulable submitted, five scheduled) and today's bill
// of alice's batch tasks, once a usage window is in.
func historyAndSQLOfHello(t *testing.T, c *testCell) {
	t.Helper()
	corral := c.cli(t)
	out, code := corral("events", "--job", "hello")
	for _, want := range []string{"JobSubmitted", "job alice/hello submitted: 5 tasks", "TaskScheduled", "TaskStarted"} {
		if !strings.Contains(out, want) {
			t.Errorf("events --job hello: no %q", want)
		}
	}
	if code != 0 || strings.Contains(out, "MachineRegistered") || strings.Contains(out, "unschedulable") {
		t.Errorf("events --job hello: exit %d, or events of other streams", code)
	}
	eventually(t, "sql counts task events by type", 30*time.Second, func() (string, bool) {
		out, code := corral("sql", "SELECT type, count(*) AS n FROM task_events GROUP BY type ORDER BY type")
		return out, code == 0 && regexp.MustCompile(`(?m)^TaskSubmitted\s+6\s*$`).MatchString(out) &&
			regexp.MustCompile(`(?m)^TaskScheduled\s+5\s*$`).MatchString(out)
	})
	eventually(t, "bill shows alice's batch usage", 45*time.Second, func() (string, bool) {
		out, code := corral("bill")
		return out, code == 0 && strings.Contains(out, "bill of ") && regexp.MustCompile(`(?m)^alice\s+batch\s+reservation\s+5\s`).MatchString(out)
	})
}

// pricesAndTheFocusExport: the cell's first sheet, written at its
// creation, prices the bill; a sheet in the past and closing the month
// still running are refused, naming the field; the export holds hello's
// tasks and the idle capacity, and one row explains itself.
func pricesAndTheFocusExport(t *testing.T, c *testCell) {
	t.Helper()
	corral := c.cli(t)
	out, code := corral("price", "get")
	if code != 0 || !regexp.MustCompile(`(?m)^production\s+limit\s+0\.048\s`).MatchString(out) || !strings.Contains(out, "from the cell's start") {
		t.Errorf("price get: exit %d:\n%s", code, out)
	}
	sheet := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(sheet, []byte("currency: EUR\nbands:\n  batch: {basis: usage, cpu_core_hour: 0.01}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code = corral("price", "set", sheet, "--effective", "2020-01-01T00:00:00Z"); code == 0 || !strings.Contains(out, "effective") {
		t.Errorf("price set in the past: exit %d:\n%s", code, out)
	}
	if out, code = corral("bill", "close", time.Now().UTC().Format("2006-01")); code == 0 || !strings.Contains(out, "has not ended") {
		t.Errorf("bill close of the month running: exit %d:\n%s", code, out)
	}
	focus := filepath.Join(t.TempDir(), "focus.csv")
	if out, code = corral("bill", "--format", "focus", "--from", "1d", "--to", "+1h", "--account-by", "label:x'); DROP TABLE events; --", "--out", focus); code == 0 || !strings.Contains(out, "account_by") {
		t.Errorf("bill --account-by with a hostile label key: exit %d:\n%s", code, out)
	}
	if out, code = corral("bill", "--format", "focus", "--from", "1d", "--to", "+1h", "--account-by", "label:team", "--out", focus); code != 0 {
		t.Fatalf("bill --format focus: exit %d:\n%s", code, out)
	}
	rowID := helloRowOfTheFocusExport(t, focus)
	out, code = corral("bill", "--format", "focus", "--from", "1d", "--to", "+1h", "--account-by", "label:team", "--explain", rowID)
	if code != 0 || !strings.HasPrefix(out, "position,window_start") || strings.Count(out, "\n") < 2 {
		t.Errorf("bill --explain: exit %d:\n%s", code, out)
	}
}

// helloRowOfTheFocusExport checks that the FOCUS file holds hello's tasks
// and the idle capacity, and returns the id of a row of hello's.
func helloRowOfTheFocusExport(t *testing.T, focus string) string {
	t.Helper()
	export, err := os.ReadFile(focus)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(export)).ReadAll()
	if err != nil || len(rows) < 3 || rows[0][0] != "BilledCost" {
		t.Fatalf("the FOCUS export is not a CSV with rows (%v):\n%s", err, export)
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	var taskRow []string
	idle := false
	for _, r := range rows[1:] {
		switch {
		case r[col["ResourceType"]] == "Idle capacity":
			idle = true
		case strings.HasPrefix(r[col["ResourceId"]], "alice/hello/") && taskRow == nil:
			taskRow = r
		}
	}
	if taskRow == nil || !idle {
		t.Fatalf("the FOCUS export lacks hello's tasks or idle capacity:\n%s", export)
	}
	return taskRow[col["x_RowId"]]
}

// theCellAtEarlierPositions: five minutes ago this cell did not exist yet.
// At the position of hello's submission, hello is there with its tasks
// pending; planned on the cell just before, hello is a new job whose five
// tasks are placed; from its submission to now, its five tasks started.
func theCellAtEarlierPositions(t *testing.T, c *testCell) {
	t.Helper()
	corral := c.cli(t)
	out, code := corral("state", "--at", "5m")
	if code != 0 || !strings.Contains(out, "before its first event") {
		t.Errorf("state --at 5m: exit %d", code)
	}
	out, _ = corral("events", "--job", "hello", "--type", "TaskSubmitted", "-o", "csv")
	positions := regexp.MustCompile(`(?m)^(\d+),`).FindAllStringSubmatch(out, -1)
	if len(positions) != 5 {
		t.Fatalf("%d TaskSubmitted events of hello, want 5", len(positions))
	}
	submitted := positions[4][1]
	out, code = corral("state", "--at", submitted)
	if code != 0 || !regexp.MustCompile(`alice/hello\s+pending\s+4\s+0\s+5\s+0\s+5`).MatchString(out) {
		t.Errorf("state --at %s: exit %d, want hello with 5 pending tasks", submitted, code)
	}
	first, _ := strconv.Atoi(positions[0][1])
	out, code = corral("job", "plan", "examples/hello.jsonnet", "--at", strconv.Itoa(first-2))
	if code != 0 || !strings.Contains(out, "job alice/hello: a new job") || strings.Count(out, "places alice/hello/") != 5 {
		t.Errorf("job plan --at %d: exit %d, want hello as a new job with five placements:\n%s", first-2, code, out)
	}
	out, code = corral("state", "diff", "--from", submitted)
	if code != 0 || !strings.Contains(out, "task started 5") || !regexp.MustCompile(`task\s+alice/hello/0\s+started\s+pending\s+running on `).MatchString(out) {
		t.Errorf("state diff --from %s: exit %d, want hello's five tasks started:\n%s", submitted, code, out)
	}
}

// webServesAtItsPortsAndNames: a web server's tasks get ports, serve HTTP
// there, and the name service gives the same host and port as task get.
func webServesAtItsPortsAndNames(t *testing.T, c *testCell) {
	t.Helper()
	corral := c.cli(t)
	out, code := corral("job", "submit", "examples/web.jsonnet", "--wait")
	if code != 0 || !strings.Contains(out, "alice/web: all 2 tasks running") {
		t.Errorf("submit web --wait: exit %d", code)
	}
	out, code = corral("task", "get", "web", "0")
	if code != 0 || !strings.Contains(out, "0.web.alice.dev.corral (A, SRV)") {
		t.Errorf("task get: exit %d, no DNS name", code)
	}
	m := regexp.MustCompile(`(?m)^address:\s+(127\.0\.0\.1:(\d+))$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("task get web 0 shows no address")
	}
	eventually(t, "web task 0 serves HTTP at its address", 20*time.Second, func() (string, bool) {
		resp, err := http.Get("http://" + m[1] + "/")
		if err != nil {
			return err.Error(), false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body), resp.StatusCode == 200 && strings.Contains(string(body), "task 0 of alice/web")
	})
	checkDNS(t, c.dnsAddr, m[2])
}

// ctrlCStopsTasksAndUpBringsThemBack: Ctrl-C stops the cell and its
// tasks; up again brings every job back. The cell is stopped after.
func ctrlCStopsTasksAndUpBringsThemBack(t *testing.T, c *testCell) {
	t.Helper()
	corral := c.cli(t)
	pids := helloPids(t, corral)
	c.stop(t)
	if !strings.Contains(c.up.err.String(), "stopped.") {
		t.Errorf("corral up said no goodbye:\n%s", c.up.err.String())
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("task process %d still runs after Ctrl-C", pid)
		}
	}
	c.start(t)
	eventually(t, "hello runs again after a restart", 30*time.Second, func() (string, bool) {
		out, code := corral("job", "list")
		return out, code == 0 && regexp.MustCompile(`alice/hello\s+running\s+4 \(batch\)\s+5\s+0\s+0`).MatchString(out) &&
			regexp.MustCompile(`alice/unschedulable\s+pending`).MatchString(out)
	})
	c.stop(t)
}

// stoppedCellsFilesAnswer: with the cell stopped, its files answer
// directly, and refuse a write.
func stoppedCellsFilesAnswer(t *testing.T, c *testCell) {
	t.Helper()
	corral := c.cli(t)
	db := filepath.Join(c.data, "infrastore.duckdb")
	out, code := corral("infrastore", "rebuild", "--data", c.data)
	if code != 0 || !strings.Contains(out, "rebuilt from") {
		t.Errorf("infrastore rebuild: exit %d", code)
	}
	out, code = corral("sql", "--db", db, "-o", "csv", "SELECT count(DISTINCT task_index) AS n FROM task_events WHERE job = 'hello' AND type = 'TaskSubmitted'")
	if code != 0 || strings.TrimSpace(out) != "n\n5" {
		t.Errorf("sql --db: exit %d, want n=5", code)
	}
	out, code = corral("sql", "--db", db, "DROP TABLE events")
	if code != 1 || !strings.Contains(out, "refused") {
		t.Errorf("a write through sql --db: exit %d, want refused", code)
	}
	out, code = corral("bill", "--db", db, "--from", "1d", "--to", "+1h", "--group-by", "job", "--format", "json")
	if code != 0 || !strings.Contains(out, `"group_by": "job"`) || !strings.Contains(out, `"group": "alice/hello"`) {
		t.Errorf("bill --db --format json: exit %d", code)
	}
}

// simReplaysTheCell: what if, the cell's history replayed through its own
// code. Unchanged, every placement lands where it did, from the log or
// the Infrastore file; without its machines, nothing runs.
func simReplaysTheCell(t *testing.T, c *testCell) {
	t.Helper()
	corral := c.cli(t)
	db := filepath.Join(c.data, "infrastore.duckdb")
	out, code := corral("sim", "--data", c.data)
	// How many of alice's batch tasks the log leaves pending depends on
	// when the cell stopped; the simulated half must equal the recorded.
	batchRow := regexp.MustCompile(`(?m)^alice\s+batch\s+(\S+\s+\d+\s+\d+\s+\d+ \(\d+\))\s+(\S+\s+\d+\s+\d+\s+\d+ \(\d+\))\s*$`).FindStringSubmatch(out)
	if code != 0 || !regexp.MustCompile(`placements: (\d+) of (\d+) recorded runs on the same machine \(100\.0%\)`).MatchString(out) ||
		batchRow == nil || strings.Join(strings.Fields(batchRow[1]), " ") != strings.Join(strings.Fields(batchRow[2]), " ") {
		t.Errorf("sim: exit %d, want every placement as recorded:\n%s", code, out)
	}
	// The Infrastore file holds the log too: the same replay from it (but
	// for the wall time it took).
	wall := regexp.MustCompile(`in [0-9.]+ s \([0-9]+ simulated s per s\)`)
	if fromFile, code := corral("sim", "--infrastore", db); code != 0 || wall.ReplaceAllString(fromFile, "") != wall.ReplaceAllString(out, "") {
		t.Errorf("sim --infrastore: exit %d, want the report the store gave:\n%s", code, fromFile)
	}
	if out, code := corral("sim", "--infrastore", db, "--data", c.data); code != 2 || !strings.Contains(out, "--infrastore") {
		t.Errorf("sim --infrastore with --data: exit %d, want a usage error:\n%s", code, out)
	}
	out, code = corral("sim", "--data", c.data, "--remove", "100%", "-o", "json")
	var rep struct {
		Simulated struct {
			Placed int `json:"placed"`
			Never  int `json:"pending_at_end"`
		} `json:"simulated"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Simulated.Placed != 0 || rep.Simulated.Never == 0 {
		t.Errorf("sim --remove 100%%: exit %d, want nothing placed:\n%s", code, out)
	}
	if out, code = corral("sim", "--data", c.data, "--add", "2x0c4g"); code != 2 || !strings.Contains(out, "add:") {
		t.Errorf("sim --add 2x0c4g: exit %d, want a usage error naming --add:\n%s", code, out)
	}
	simOfTheGoogleTrace(t, corral)
}

// simOfTheGoogleTrace: the public Google trace as a cell, a 2% slice of
// its seven hours; an Infrastore the trace was imported into keeps the
// trace's tables, not a log: sim says so, and which flag replays it.
func simOfTheGoogleTrace(t *testing.T, corral func(...string) (string, int)) {
	t.Helper()
	trace := shareddata.Dir(t, shareddata.GoogleTrace)
	if out, code := corral("sim", "--google-trace", trace, "--share", "0.02"); code != 0 || !strings.Contains(out, "window   2011-05-01T19:00:00Z") ||
		!regexp.MustCompile(`tasks placed\s+\d{4,}\s+\d{4,}`).MatchString(out) {
		t.Errorf("sim --google-trace: exit %d:\n%s", code, out)
	}
	traceDB := filepath.Join(t.TempDir(), "trace.duckdb")
	if out, code := corral("infrastore", "import-google-trace", "--db", traceDB, trace); code != 0 {
		t.Fatalf("import-google-trace: exit %d:\n%s", code, out)
	}
	if out, code := corral("sim", "--infrastore", traceDB); code != 2 || !strings.Contains(out, "holds no log") || !strings.Contains(out, "--google-trace") {
		t.Errorf("sim --infrastore on an imported trace: exit %d, want a usage error pointing at --google-trace:\n%s", code, out)
	}
}

// helloPids are the pids of hello's processes by its TaskStarted events.
func helloPids(t *testing.T, corral func(...string) (string, int)) []int {
	t.Helper()
	pids := startedPids(t, corral, "hello")
	if len(pids) < 5 {
		t.Errorf("found %d pids of hello's tasks, want 5", len(pids))
	}
	return pids
}

// checkDNS asks the name service for hello's task 0 (no port: an A
// record), web's task 0 (A and SRV with its port) and the web job (SRV of
// both tasks) over UDP.
func checkDNS(t *testing.T, addr, webPort string) {
	t.Helper()
	cl := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	ask := func(name string, qtype uint16) *dns.Msg {
		q := new(dns.Msg)
		q.SetQuestion(name, qtype)
		r, _, err := cl.Exchange(q, addr)
		if err != nil {
			t.Errorf("DNS %s: %v", name, err)
			return new(dns.Msg)
		}
		return r
	}
	if r := ask("0.hello.alice.dev.corral.", dns.TypeA); len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "127.0.0.1" {
		t.Errorf("A of 0.hello.alice.dev.corral: %v", r)
	}
	r := ask("0.web.alice.dev.corral.", dns.TypeSRV)
	if len(r.Answer) != 1 || len(r.Extra) != 1 {
		t.Errorf("SRV of 0.web.alice.dev.corral: %v", r)
	} else if srv := r.Answer[0].(*dns.SRV); strconv.Itoa(int(srv.Port)) != webPort || srv.Target != "0.web.alice.dev.corral." {
		t.Errorf("SRV of web task 0: %v, want port %s", srv, webPort)
	}
	if r := ask("web.alice.dev.corral.", dns.TypeSRV); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
		t.Errorf("SRV of the web job: %v", r)
	}
	if r := ask("nosuch.alice.dev.corral.", dns.TypeSRV); r.Rcode != dns.RcodeNameError {
		t.Errorf("unknown job: %v", r)
	}
}
