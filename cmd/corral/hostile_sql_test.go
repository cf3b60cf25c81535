package main_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// TestHostileQueriesLeaveTheCellUp sends statements that once crashed the
// master, ran it out of memory or changed the database, through `corral
// sql` and the web console of a real `corral up`. Queries run in the
// Infrastore's own process: the master keeps its pid and serves, the
// tables keep their row counts, and the Infrastore process comes back
// after being killed for memory.
func TestHostileQueriesLeaveTheCellUp(t *testing.T) {
	c := startCell(t, cellOptions{agents: 1, flags: []string{"--infra-memory", "512MiB", "--query-timeout", "5s", "--query-max-bytes", "8MiB"}})
	pid := c.pid()
	q := &sqlClient{t: t, c: c}
	// The log grows as the cell runs (usage windows): the rows up to the
	// position ingested now must stay exactly as they are.
	counts := q.countsUpToNow()
	before := q.eventually(counts)

	// Values that once panicked the master come back as they are.
	for sql, want := range map[string]string{
		`SELECT NULL AS x`: "x\nNULL\n",
		`SELECT '' AS x`:   "x\n\n",
		`SELECT max(position) AS x FROM events WHERE type = 'NoSuchType'`: "x\nNULL\n",
	} {
		if out := q.eventually(sql); out != want {
			t.Errorf("%s: printed %q, want %q", sql, out, want)
		}
	}
	byteBombStaysWithinItsBudget(t, q)
	hostileStatementsAreRefused(t, q)
	q.settled()
	bigResultsAllTypesAndTheTimeLimit(t, q)
	q.settled()
	webConsoleAnswersHostileQueries(t, q)
	q.settled()
	cutCSVDownloadSaysSo(t, q)

	// The master is the same process, still serving; the tables are as
	// they were.
	if err := c.up.cmd.Process.Signal(syscall.Signal(0)); err != nil || c.pid() != pid {
		t.Fatalf("the master process %d is gone: %v", pid, err)
	}
	if out, code := c.run(t, "status"); code != 0 {
		t.Fatalf("corral status after the hostile queries: exit %d\n%s", code, out)
	}
	if after := q.eventually(counts); after != before {
		t.Fatalf("row counts changed:\nbefore %s\nafter  %s", before, after)
	}
	t.Logf("master pid %d served throughout; counts %s", pid, strings.ReplaceAll(before, "\n", " "))
}

// sqlClient is `corral sql -o csv` against a cell whose Infrastore
// process may be restarting.
type sqlClient struct {
	t *testing.T
	c *testCell
	// web and csrf are the admin's session of the web console.
	web  *http.Client
	csrf string
}

// sql runs one query and returns what the command printed and its exit
// code; a bomb may take minutes to be stopped.
func (q *sqlClient) sql(sql string, flags ...string) (string, int) {
	q.t.Helper()
	return runCorral(q.t, q.c.root, q.c.env, 3*time.Minute, append(append([]string{"sql", "-o", "csv"}, flags...), sql)...)
}

// eventually runs a query until it is answered, while the Infrastore
// process restarts; any other failure fails the test.
func (q *sqlClient) eventually(sql string) string {
	q.t.Helper()
	var out string
	eventually(q.t, "corral sql "+sql, 60*time.Second, func() (string, bool) {
		var code int
		out, code = q.sql(sql)
		if code != 0 && !strings.Contains(out, "not answering") {
			q.t.Fatalf("corral sql %q: exit %d\n%s", sql, code, out)
		}
		return out, code == 0
	})
	return out
}

// countsUpToNow is a query counting the rows of the tables up to the
// position the Infrastore has ingested now (right after the start it may
// not have ingested anything yet).
func (q *sqlClient) countsUpToNow() string {
	q.t.Helper()
	var head string
	eventually(q.t, "the Infrastore's position", 60*time.Second, func() (string, bool) {
		head = strings.TrimSpace(strings.TrimPrefix(q.eventually(`SELECT max(position) AS p FROM events`), "p\n"))
		_, err := strconv.Atoi(head)
		return head, err == nil
	})
	return `SELECT (SELECT count(*) FROM events WHERE position <= ` + head + `) AS events, (SELECT count(*) FROM task_events WHERE position <= ` + head +
		`) AS task_events, (SELECT count(*) FROM machine_events WHERE position <= ` + head + `) AS machine_events, (SELECT count(*) FROM ingest_state) AS s`
}

// settled waits for the Infrastore process to give back what hostile
// queries took: a query stopped at its memory or time leaves memory that
// DuckDB's allocator gives back within seconds, and until then a query
// that needs some is refused as too big (the process is near its
// budget). The checks after it start from a settled process.
func (q *sqlClient) settled() {
	q.t.Helper()
	q.eventually(`SELECT 1`)
	eventually(q.t, "the Infrastore process gives back what the hostile queries took", 30*time.Second, func() (string, bool) {
		held := testkit.ProcStatusKB(q.t, q.c.infrastorePid(q.t), "RssAnon:")
		return fmt.Sprintf("it holds %d MiB", held>>10), held < 160<<10
	})
}

// byteBombStaysWithinItsBudget: the byte bomb that once built a gigabyte
// and had the kernel kill the Infrastore process is cut in DuckDB's plan;
// it leaves the process alive (the same pid) and far within its memory,
// and another query is answered while it runs.
func byteBombStaysWithinItsBudget(t *testing.T, q *sqlClient) {
	t.Helper()
	q.eventually(`SELECT 1`)
	infra := q.c.infrastorePid(t)
	// Its peak from here on (the queries before took it up too, and
	// its allocator keeps some of what they freed).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", infra), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the Infrastore process's peak: %v", err)
	}
	held := testkit.ProcStatusKB(t, infra, "VmRSS:")
	bomb := make(chan string, 1)
	go func() {
		out, code := q.sql(`SELECT repeat('x', 1000000) FROM range(1000)`)
		bomb <- fmt.Sprintf("exit %d: %.200s", code, out)
	}()
	if out, code := q.sql(`SELECT count(*) AS n FROM events`); code != 0 {
		t.Errorf("another query while the bomb runs: exit %d\n%s", code, out)
	}
	t.Logf("the byte bomb: %s", <-bomb)
	if now := q.c.infrastorePid(t); now != infra {
		t.Errorf("the Infrastore process was %d, is %d: it was restarted", infra, now)
	}
	peak := testkit.ProcStatusKB(t, infra, "VmHWM:")
	t.Logf("the Infrastore process's peak resident memory (VmHWM) during the bomb: %d MiB of its 512 MiB, %d MiB above the %d MiB it held before",
		peak>>10, (peak-held)>>10, held>>10)
	if peak-held > 128<<10 || peak > 448<<10 {
		t.Errorf("the byte bomb took the Infrastore process from %d to %d MiB, for a result cut at 8 MiB (its budget 512 MiB)", held>>10, peak>>10)
	}
}

// hostileStatementsAreRefused: each statement is refused naming what it
// tried, or stopped, and never answered as a server failure.
func hostileStatementsAreRefused(t *testing.T, q *sqlClient) {
	t.Helper()
	hostile := []struct{ q, mention string }{
		{`SELECT * FROM enable_logging()`, "enable_logging"},
		{`SELECT * FROM checkpoint()`, "checkpoint"},
		{`EXPLAIN (/* ) SELECT 1 -- */ ANALYZE) CHECKPOINT`, ""},
		{`CREATE SECRET (TYPE s3, KEY_ID 'x', SECRET 'y')`, "CREATE"},
		{`DROP TABLE events`, "DROP"},
		{`SELECT 1; DELETE FROM events`, "several statements"},
		{`SELECT * FROM no_such_table`, "does not exist"},
		{`SELECT repeat('x', 1000000) FROM range(1000)`, ""},
		{`SELECT count(*) FROM range(100000000000) a, range(100000000000) b`, ""},
		{`SELECT list(repeat('x', 1000)) FROM range(100000000)`, ""},
		{`SELECT current_setting('temp_directory')`, "current_setting"},
		{`SELECT path FROM duckdb_databases`, "duckdb_databases"},
		{`SELECT * FROM pg_catalog.pg_settings`, "pg_settings"},
		{`SELECT * FROM pragma_database_list`, "pragma_database_list"},
	}
	for i, h := range hostile {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			sub := &sqlClient{t: t, c: q.c}
			sub.eventually(`SELECT 1`) // the Infrastore process is (back) up
			out, code := sub.sql(h.q)
			t.Logf("$ corral sql %q  (exit %d; the Infrastore process holds %d MiB)\n%.400s", h.q, code, testkit.ProcStatusKB(t, q.c.infrastorePid(t), "RssAnon:")>>10, out)
			if h.mention != "" && (code == 0 || !strings.Contains(out, h.mention)) {
				t.Errorf("%s: exit %d, want a refusal mentioning %q", h.q, code, h.mention)
			}
			if strings.Contains(out, "Internal") {
				t.Errorf("%s: answered as a server failure: %s", h.q, out)
			}
		})
	}
}

// bigResultsAllTypesAndTheTimeLimit: a result above gRPC's default 4 MiB
// and within --query-max-bytes arrives whole (the command receives what
// the master may send); every type comes back; a query past its time
// limit says so, naming the limit and the flag.
func bigResultsAllTypesAndTheTimeLimit(t *testing.T, q *sqlClient) {
	t.Helper()
	if out, code := q.sql(`SELECT repeat('x', 100000) AS s FROM range(70)`); code != 0 || strings.Count(out, "\n") != 71 {
		t.Errorf("a 7 MB result: exit %d, %d lines\n%.300s", code, strings.Count(out, "\n"), out)
	}
	if out, code := q.sql(`SELECT * FROM test_all_types()`); code != 0 {
		t.Errorf("test_all_types(): exit %d\n%.500s", code, out)
	}
	if out, code := q.sql(`SELECT count(*) FROM range(1000000000000) t(i) WHERE i % 7 = 3`, "--timeout", "2s"); code == 0 ||
		!strings.Contains(out, "time limit of 2s") || !strings.Contains(out, "--timeout") || strings.Contains(out, "did not answer") {
		t.Errorf("a query past its time limit: exit %d\n%s", code, out)
	}
}

// webConsoleAnswersHostileQueries: a query is a POST with the form's CSRF
// token; a mistake is 400, the values are shown, a query past the
// Infrastore's memory is 422 (the query's doing). It logs q in to the
// console.
func webConsoleAnswersHostileQueries(t *testing.T, q *sqlClient) {
	t.Helper()
	q.web = q.c.webLogin(t, q.c.adminToken("alice"))
	page, _ := webGet(t, q.web, q.c.httpAddr, "/sql")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the console's form has no CSRF token:\n%s", page)
	}
	q.csrf = m[1]
	for _, h := range []struct {
		q    string
		code int
	}{
		{`SELECT NULL`, 200},
		{`SELECT * FROM enable_logging()`, 400},
		{`DROP TABLE events`, 400},
		{`SELECT * FROM no_such_table`, 400},
		{`SELECT repeat('x', 1000000) FROM range(1000)`, 200},
		{`SELECT * FROM test_all_types()`, 200},
		{`SELECT current_setting('home_directory')`, 400},
		{`SELECT length(list(repeat(i::VARCHAR, 2000))) FROM range(10000000) t(i)`, 422},
	} {
		var code int
		var body []byte
		// 503: the Infrastore process is restarting.
		eventually(t, "the web console answers "+h.q, 60*time.Second, func() (string, bool) {
			resp := q.post(url.Values{"q": {h.q}})
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			code = resp.StatusCode
			return fmt.Sprintf("HTTP %d", code), code != http.StatusServiceUnavailable
		})
		if code != h.code {
			t.Errorf("web console %s: HTTP %d, want %d\n%.300s", h.q, code, h.code, body)
		}
		if code >= 500 {
			t.Errorf("web console %s: HTTP %d", h.q, code)
		}
	}
}

// post sends the console's form with the session's CSRF token.
func (q *sqlClient) post(form url.Values) *http.Response {
	q.t.Helper()
	form.Set("csrf", q.csrf)
	resp, err := q.web.PostForm("http://"+q.c.httpAddr+"/sql", form)
	if err != nil {
		q.t.Fatal(err)
	}
	return resp
}

// cutCSVDownloadSaysSo: a cut result downloaded as CSV says it was cut.
func cutCSVDownloadSaysSo(t *testing.T, q *sqlClient) {
	t.Helper()
	resp := q.post(url.Values{"q": {`SELECT repeat('x', 1000000) FROM range(1000)`}, "format": {"csv"}})
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("X-Corral-Truncated"), "byte limit") || !strings.Contains(resp.Header.Get("Content-Disposition"), "truncated") {
		t.Errorf("a cut CSV download: HTTP %d, X-Corral-Truncated %q, %q", resp.StatusCode, resp.Header.Get("X-Corral-Truncated"), resp.Header.Get("Content-Disposition"))
	}
}
