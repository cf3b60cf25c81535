package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostileQueriesLeaveTheCellUp sends statements that once crashed the
// master, ran it out of memory or changed the database, through `corral
// sql` and the web console of a real `corral up`. Queries run in the
// Infrastore's own process: the master keeps its pid and serves, the
// tables keep their row counts, and the Infrastore process comes back
// after being killed for memory.
func TestHostileQueriesLeaveTheCellUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the corral binary and runs a whole cell")
	}
	bin := buildCorral(t)
	data := t.TempDir()
	grpcAddr, httpAddr, dnsAddr := freeTCP(t), freeTCP(t), freeUDPAndTCP(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CORRAL_USER=alice", "CORRAL_MASTER="+grpcAddr, "CORRAL_CELL=dev", "CORRAL_DATA="+data)
	up := startUp(t, bin, root, env, []string{"up", "--data", data, "--listen", grpcAddr, "--http", httpAddr, "--dns", dnsAddr,
		"--port-base", strconv.Itoa(freeTaskPorts(t, 1)), "--agents", "1", "--infra-memory", "512MiB", "--query-timeout", "5s", "--query-max-bytes", "8MiB"})
	pid := up.cmd.Process.Pid

	sql := func(q string, flags ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(append([]string{"sql", "-o", "csv"}, flags...), q)...)
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("corral sql %q: %v", q, err)
		}
		return string(out), 0
	}
	// sqlEventually retries while the Infrastore process restarts.
	sqlEventually := func(q string) string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, code := sql(q)
			if code == 0 {
				return out
			}
			if time.Now().After(deadline) || !strings.Contains(out, "not answering") {
				t.Fatalf("corral sql %q: exit %d\n%s", q, code, out)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	// The log grows as the cell runs (usage windows): the rows up to the
	// position ingested now must stay exactly as they are.
	// Right after start the Infrastore may not have ingested anything yet.
	var head string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		head = strings.TrimSpace(strings.TrimPrefix(sqlEventually(`SELECT max(position) AS p FROM events`), "p\n"))
		if _, err := strconv.Atoi(head); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Infrastore's position: %q", head)
		}
	}
	counts := `SELECT (SELECT count(*) FROM events WHERE position <= ` + head + `) AS events, (SELECT count(*) FROM task_events WHERE position <= ` + head +
		`) AS task_events, (SELECT count(*) FROM machine_events WHERE position <= ` + head + `) AS machine_events, (SELECT count(*) FROM ingest_state) AS s`
	before := sqlEventually(counts)

	// Values that once panicked the master come back as they are.
	for q, want := range map[string]string{
		`SELECT NULL AS x`: "x\nNULL\n",
		`SELECT '' AS x`:   "x\n\n",
		`SELECT max(position) AS x FROM events WHERE type = 'NoSuchType'`: "x\nNULL\n",
	} {
		if out := sqlEventually(q); out != want {
			t.Errorf("%s: printed %q, want %q", q, out, want)
		}
	}
	// The byte bomb that once built a gigabyte and had the kernel kill
	// the Infrastore process: cut in DuckDB's plan, it leaves the process
	// alive (the same pid) and far within its memory, and another
	// query is answered while it runs.
	sqlEventually(`SELECT 1`)
	infra := infrastorePid(t, data)
	// Its peak from here on (the queries above took it up too, and
	// its allocator keeps some of what they freed).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", infra), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the Infrastore process's peak: %v", err)
	}
	held := procStatusKB(t, infra, "VmRSS:")
	bomb := make(chan string, 1)
	go func() {
		out, code := sql(`SELECT repeat('x', 1000000) FROM range(1000)`)
		bomb <- fmt.Sprintf("exit %d: %.200s", code, out)
	}()
	if out, code := sql(`SELECT count(*) AS n FROM events`); code != 0 {
		t.Errorf("another query while the bomb runs: exit %d\n%s", code, out)
	}
	t.Logf("the byte bomb: %s", <-bomb)
	if now := infrastorePid(t, data); now != infra {
		t.Errorf("the Infrastore process was %d, is %d: it was restarted", infra, now)
	}
	peak := procStatusKB(t, infra, "VmHWM:")
	t.Logf("the Infrastore process's peak resident memory (VmHWM) during the bomb: %d MiB of its 512 MiB, %d MiB above the %d MiB it held before",
		peak>>10, (peak-held)>>10, held>>10)
	if peak-held > 128<<10 || peak > 448<<10 {
		t.Errorf("the byte bomb took the Infrastore process from %d to %d MiB, for a result cut at 8 MiB (its budget 512 MiB)", held>>10, peak>>10)
	}

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
			sqlEventually(`SELECT 1`) // the Infrastore process is (back) up
			out, code := sql(h.q)
			t.Logf("$ corral sql %q  (exit %d; the Infrastore process holds %d MiB)\n%.400s", h.q, code, procStatusKB(t, infrastorePid(t, data), "RssAnon:")>>10, out)
			if h.mention != "" && (code == 0 || !strings.Contains(out, h.mention)) {
				t.Errorf("%s: exit %d, want a refusal mentioning %q", h.q, code, h.mention)
			}
			if strings.Contains(out, "Internal") {
				t.Errorf("%s: answered as a server failure: %s", h.q, out)
			}
		})
	}
	// A query stopped at its memory or time leaves memory that DuckDB's
	// allocator gives back within seconds; until then a query that needs
	// some is refused as too big (the process is near its budget). The
	// checks below start from a settled process.
	settled := func() {
		t.Helper()
		sqlEventually(`SELECT 1`)
		eventually(t, "the Infrastore process gives back what the hostile queries took", 30*time.Second, func() (string, bool) {
			held := procStatusKB(t, infrastorePid(t, data), "RssAnon:")
			return fmt.Sprintf("it holds %d MiB", held>>10), held < 160<<10
		})
	}
	settled()
	// A result above gRPC's default 4 MiB and within --query-max-bytes
	// arrives whole: the command receives what the master may send.
	if out, code := sql(`SELECT repeat('x', 100000) AS s FROM range(70)`); code != 0 || strings.Count(out, "\n") != 71 {
		t.Errorf("a 7 MB result: exit %d, %d lines\n%.300s", code, strings.Count(out, "\n"), out)
	}
	// Every type comes back.
	if out, code := sql(`SELECT * FROM test_all_types()`); code != 0 {
		t.Errorf("test_all_types(): exit %d\n%.500s", code, out)
	}
	// A query past its time limit says so, naming the limit and the flag.
	if out, code := sql(`SELECT count(*) FROM range(1000000000000) t(i) WHERE i % 7 = 3`, "--timeout", "2s"); code == 0 ||
		!strings.Contains(out, "time limit of 2s") || !strings.Contains(out, "--timeout") || strings.Contains(out, "did not answer") {
		t.Errorf("a query past its time limit: exit %d\n%s", code, out)
	}

	settled()
	// The web console: a query is a POST with the form's CSRF token; a
	// mistake is 400, the values are shown.
	web := webLogin(t, httpAddr, filepath.Join(data, "certs", "admins", "alice.token"))
	resp, err := web.Get("http://" + httpAddr + "/sql")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("the console's form has no CSRF token:\n%s", page)
	}
	csrf := string(m[1])
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
		// Past the Infrastore's memory: the query's doing.
		{`SELECT length(list(repeat(i::VARCHAR, 2000))) FROM range(10000000) t(i)`, 422},
	} {
		deadline := time.Now().Add(60 * time.Second)
		for {
			resp, err := web.PostForm("http://"+httpAddr+"/sql", url.Values{"q": {h.q}, "csrf": {csrf}})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && h.code != 0 && time.Now().Before(deadline) {
				time.Sleep(500 * time.Millisecond)
				continue
			}
			if h.code != 0 && resp.StatusCode != h.code {
				t.Errorf("web console %s: HTTP %d, want %d\n%.300s", h.q, resp.StatusCode, h.code, body)
			}
			if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("web console %s: HTTP %d", h.q, resp.StatusCode)
			}
			break
		}
	}

	settled()
	// A cut result downloaded as CSV says it was cut.
	resp, err = web.PostForm("http://"+httpAddr+"/sql", url.Values{"q": {`SELECT repeat('x', 1000000) FROM range(1000)`}, "csrf": {csrf}, "format": {"csv"}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("X-Corral-Truncated"), "byte limit") || !strings.Contains(resp.Header.Get("Content-Disposition"), "truncated") {
		t.Errorf("a cut CSV download: HTTP %d, X-Corral-Truncated %q, %q", resp.StatusCode, resp.Header.Get("X-Corral-Truncated"), resp.Header.Get("Content-Disposition"))
	}

	// The master is the same process, still serving; the tables are as
	// they were.
	if err := up.cmd.Process.Signal(syscallZero); err != nil || up.cmd.Process.Pid != pid {
		t.Fatalf("the master process %d is gone: %v", pid, err)
	}
	if out, code := runCorral(t, bin, root, env, "status"); code != 0 {
		t.Fatalf("corral status after the hostile queries: exit %d\n%s", code, out)
	}
	if after := sqlEventually(counts); after != before {
		t.Fatalf("row counts changed:\nbefore %s\nafter  %s", before, after)
	}
	t.Logf("master pid %d served throughout; counts %s", pid, strings.ReplaceAll(before, "\n", " "))
}

var syscallZero = syscall.Signal(0)

func runCorral(t *testing.T, bin, dir string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("corral %s: %v", strings.Join(args, " "), err)
	}
	return string(out), 0
}

// cellCLI returns runCorral for one cell, logging each command and its
// output as a person would see them.
func cellCLI(t *testing.T, bin, dir string, env []string) func(args ...string) (string, int) {
	return func(args ...string) (string, int) {
		t.Helper()
		out, code := runCorral(t, bin, dir, env, args...)
		t.Logf("$ corral %s  (exit %d)\n%s", strings.Join(args, " "), code, out)
		return out, code
	}
}

// eventually retries check every half second until it holds, and fails
// the test with the last output when limit passes first.
func eventually(t *testing.T, what string, limit time.Duration, check func() (string, bool)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		out, ok := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after %s; last output:\n%s", what, limit, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// infrastorePid finds the Infrastore process of the cell whose data dir
// is data: the corral infrastore serve whose --db is under it.
func infrastorePid(t *testing.T, data string) int {
	t.Helper()
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 3 && args[1] == "infrastore" && args[2] == "serve" && strings.Contains(string(b), data) {
			return pid
		}
	}
	t.Fatalf("no Infrastore process of %s", data)
	return 0
}

// procStatusKB reads a field of /proc/PID/status, in kB.
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}
