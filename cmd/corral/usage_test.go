package main_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestUsageBillsRunningTime: on a real cell with a crash-looping task (it
// exits every second and the agent restarts it in place) beside steady
// ones, every task is billed (task_usage, the rows corral bill sums) for
// the seconds it ran by its events, from its first start to its kill,
// within 1%: no window overlaps another, none starts before the task ran.
func TestUsageBillsRunningTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the corral binary and runs a whole cell")
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
		"--port-base", strconv.Itoa(freeTaskPorts(t, 3))})
	corral := cellCLI(t, bin, root, env)
	jobs := t.TempDir()
	submit := func(name, spec string) {
		p := filepath.Join(jobs, name+".json")
		if err := os.WriteFile(p, []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, code := corral("job", "submit", p); code != 0 {
			t.Fatalf("submit %s: exit %d\n%s", name, code, out)
		}
	}
	submit("crashy", `{"name": "crashy", "priority": "batch", "count": 2, "command": "/bin/sh", "args": ["-c", "sleep 1; exit 3"],
		"resources": {"cpu": "10m", "memory": "8MiB"}, "restart": {"mode": "always", "max_restarts": 1000, "backoff": "100ms", "max_backoff": "200ms"}}`)
	submit("steady", `{"name": "steady", "priority": "batch", "count": 3, "command": "/bin/sleep", "args": ["1000"],
		"resources": {"cpu": "10m", "memory": "8MiB"}}`)
	// Several 5 s windows of crash loops, then the kills, then a window
	// after them so every run is billed to its end.
	time.Sleep(25 * time.Second)
	for _, j := range []string{"crashy", "steady"} {
		if out, code := corral("job", "kill", j); code != 0 {
			t.Fatalf("kill %s: exit %d\n%s", j, code, out)
		}
	}
	// Running seconds by the log: from each task's first start to its
	// kill. Billed seconds: its task_usage rows.
	const q = `WITH ev AS (
	  SELECT split_part(stream, '/', 3) AS job, split_part(stream, '/', 4)::INTEGER AS task_index, type, epoch_us(time) AS us
	  FROM events WHERE stream LIKE 'task/alice/%' AND type IN ('TaskStarted', 'TaskKilled')),
	ran AS (SELECT job, task_index, max(us) FILTER (WHERE type = 'TaskKilled') - min(us) FILTER (WHERE type = 'TaskStarted') AS ran_us
	  FROM ev GROUP BY ALL),
	billed AS (SELECT job, task_index, sum(end_time - start_time) AS billed_us, max(end_time) AS last_us, count(*) AS windows
	  FROM task_usage WHERE user = 'alice' GROUP BY ALL)
	SELECT r.job, r.task_index, r.ran_us, coalesce(b.billed_us, 0), coalesce(b.windows, 0),
	  (SELECT count(*) FROM events WHERE type = 'TaskFailed' AND stream = 'task/alice/' || r.job || '/' || r.task_index)
	FROM ran r LEFT JOIN billed b USING (job, task_index) ORDER BY ALL`
	var rows [][]string
	eventually(t, "every task's run billed to its kill", 40*time.Second, func() (string, bool) {
		out, code := corral("sql", "-o", "csv", q)
		if code != 0 {
			return out, false
		}
		rows = nil
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			rows = append(rows, strings.Split(line, ","))
		}
		if len(rows) != 5 {
			return out, false
		}
		for _, r := range rows {
			ran, _ := strconv.ParseFloat(r[2], 64)
			billed, _ := strconv.ParseFloat(r[3], 64)
			if ran <= 0 || billed < ran*0.99 {
				return out, false
			}
		}
		return out, true
	})
	for _, r := range rows {
		ran, _ := strconv.ParseFloat(r[2], 64)
		billed, _ := strconv.ParseFloat(r[3], 64)
		t.Logf("%s/%s: ran %.3f s, billed %.3f s in %s windows (%.4fx), %s failures", r[0], r[1], ran/1e6, billed/1e6, r[4], billed/ran, r[5])
		if billed > ran*1.01 || billed < ran*0.99 {
			t.Errorf("%s/%s billed %.3f s for %.3f s of running", r[0], r[1], billed/1e6, ran/1e6)
		}
		if r[0] == "crashy" {
			if n, _ := strconv.Atoi(r[5]); n < 5 {
				t.Errorf("%s/%s failed %d times in 25 s: not the crash loop this test needs", r[0], r[1], n)
			}
		}
	}
	// No window of a task starts before the previous one ended.
	out, _ := corral("sql", "-o", "csv", `SELECT count(*) AS overlaps FROM (
	  SELECT start_time < lag(end_time) OVER (PARTITION BY job, task_index ORDER BY start_time) AS overlap FROM task_usage) WHERE overlap`)
	if !strings.Contains(out, "\n0") {
		t.Errorf("windows of a task overlap:\n%s", out)
	}
}
