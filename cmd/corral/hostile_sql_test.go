package main_test

import (
	"context"
	"errors"
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
		"--port-base", strconv.Itoa(freeTaskPorts(t, 1)), "--agents", "1", "--infra-memory", "512MiB", "--query-timeout", "5s", "--query-max-bytes", "1MiB"})
	pid := up.cmd.Process.Pid

	sql := func(q string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "sql", "-o", "csv", q)
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
	}
	for _, h := range hostile {
		sqlEventually(`SELECT 1`) // the Infrastore process is (back) up
		out, code := sql(h.q)
		t.Logf("$ corral sql %q  (exit %d)\n%.400s", h.q, code, out)
		if h.mention != "" && (code == 0 || !strings.Contains(out, h.mention)) {
			t.Errorf("%s: exit %d, want a refusal mentioning %q", h.q, code, h.mention)
		}
		if strings.Contains(out, "Internal") {
			t.Errorf("%s: answered as a server failure: %s", h.q, out)
		}
	}
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
		{`SELECT repeat('x', 1000000) FROM range(1000)`, 0},
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
