package main_test

import (
	"regexp"
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
	c := startCell(t, cellOptions{})
	corral := c.cli(t)
	for name, spec := range map[string]string{
		"crashy": `{"name": "crashy", "priority": "batch", "count": 2, "command": "/bin/sh", "args": ["-c", "sleep 1; exit 3"],
		"resources": {"cpu": "10m", "memory": "8MiB"}, "restart": {"mode": "always", "max_restarts": 1000, "backoff": "100ms", "max_backoff": "200ms"}}`,
		"steady": `{"name": "steady", "priority": "batch", "count": 3, "command": "/bin/sleep", "args": ["1000"],
		"resources": {"cpu": "10m", "memory": "8MiB"}}`,
	} {
		if out, code := corral("job", "submit", writeJob(t, name, spec)); code != 0 {
			t.Fatalf("submit %s: exit %d\n%s", name, code, out)
		}
	}
	// Several 5 s windows of crash loops (each crashy task failed five
	// times and billed in three windows), then the kills, then a window
	// after them so every run is billed to its end.
	eventually(t, "several windows of crash loops", 90*time.Second, func() (string, bool) {
		out, code := corral("sql", "-o", "csv", `SELECT min(f) AS failures, min(w) AS windows FROM (
		  SELECT (SELECT count(*) FROM task_events e WHERE e.user = 'alice' AND e.job = 'crashy' AND e.task_index = i AND e.type = 'TaskFailed') AS f,
		    (SELECT count(*) FROM task_usage u WHERE u.user = 'alice' AND u.job = 'crashy' AND u.task_index = i) AS w
		  FROM range(2) t(i))`)
		m := regexp.MustCompile(`(?m)^(\d+),(\d+)$`).FindStringSubmatch(out)
		if code != 0 || m == nil {
			return out, false
		}
		failures, _ := strconv.Atoi(m[1])
		windows, _ := strconv.Atoi(m[2])
		return out, failures >= 5 && windows >= 3
	})
	for _, j := range []string{"crashy", "steady"} {
		if out, code := corral("job", "kill", j); code != 0 {
			t.Fatalf("kill %s: exit %d\n%s", j, code, out)
		}
	}
	for _, b := range billedToTheirKills(t, corral) {
		ran := b.killed - b.started
		t.Logf("%s: ran %.3f s, billed %.3f s in %d windows (%.4fx), %d failures", b.task,
			float64(ran)/1e6, float64(b.billed)/1e6, b.windows, float64(b.billed)/float64(ran), b.failures)
		if d := b.billed - ran; d > ran/100 || -d > ran/100 {
			t.Errorf("%s billed %.3f s for %.3f s of running", b.task, float64(b.billed)/1e6, float64(ran)/1e6)
		}
		if b.first < b.started || b.last > b.killed {
			t.Errorf("%s billed from %d to %d, ran from %d to %d", b.task, b.first, b.last, b.started, b.killed)
		}
		if strings.HasPrefix(b.task, "crashy/") && b.failures < 5 {
			t.Errorf("%s failed %d times: not the crash loop this test needs", b.task, b.failures)
		}
	}
	// No window of a task starts before the previous one ended.
	out, code := corral("sql", "-o", "csv", `SELECT count(*) AS overlaps FROM (
	  SELECT start_time < lag(end_time) OVER (PARTITION BY user, job, task_index ORDER BY start_time) AS overlap FROM task_usage) WHERE overlap`)
	if code != 0 || strings.TrimSpace(out) != "overlaps\n0" {
		t.Errorf("windows of a task overlap (exit %d):\n%s", code, out)
	}
}

// billing is one task's running time by its events and what it was billed.
type billing struct {
	task                                          string
	started, killed, billed, first, last, windows int64
	failures                                      int64
}

// billedToTheirKills waits until every one of the five tasks is billed
// past its kill, and returns each one's running by the log (from its
// first start to its kill) and billing (its task_usage rows, the rows
// corral bill sums). The machines' windows close at different moments, so
// it waits for every task's.
func billedToTheirKills(t *testing.T, corral func(...string) (string, int)) []billing {
	t.Helper()
	const q = `WITH ev AS (
	  SELECT split_part(stream, '/', 3) AS job, split_part(stream, '/', 4)::INTEGER AS task_index, type, epoch_us(time) AS us
	  FROM events WHERE stream LIKE 'task/alice/%' AND type IN ('TaskStarted', 'TaskKilled', 'TaskFailed')),
	ran AS (SELECT job, task_index, min(us) FILTER (WHERE type = 'TaskStarted') AS started_us,
	    max(us) FILTER (WHERE type = 'TaskKilled') AS killed_us, count(*) FILTER (WHERE type = 'TaskFailed') AS failures
	  FROM ev GROUP BY ALL),
	billed AS (SELECT job, task_index, sum(end_time - start_time) AS billed_us, min(start_time) AS first_us, max(end_time) AS last_us,
	    count(*) AS windows
	  FROM task_usage WHERE user = 'alice' GROUP BY ALL)
	SELECT r.job, r.task_index, r.started_us, coalesce(r.killed_us, 0), coalesce(b.billed_us, 0), coalesce(b.first_us, 0),
	  coalesce(b.last_us, 0), coalesce(b.windows, 0), r.failures
	FROM ran r LEFT JOIN billed b USING (job, task_index) ORDER BY ALL`
	var tasks []billing
	eventually(t, "every task's run billed to its kill", 40*time.Second, func() (string, bool) {
		out, code := corral("sql", "-o", "csv", q)
		if code != 0 {
			return out, false
		}
		tasks = nil
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			f := strings.Split(line, ",")
			if len(f) != 9 {
				return out, false
			}
			var n [7]int64
			for i := range n {
				v, err := strconv.ParseInt(f[2+i], 10, 64)
				if err != nil {
					return out, false
				}
				n[i] = v
			}
			tasks = append(tasks, billing{f[0] + "/" + f[1], n[0], n[1], n[2], n[3], n[4], n[5], n[6]})
		}
		if len(tasks) != 5 {
			return out, false
		}
		for _, b := range tasks {
			if b.killed == 0 || b.last < b.killed {
				return out, false
			}
		}
		return out, true
	})
	return tasks
}
