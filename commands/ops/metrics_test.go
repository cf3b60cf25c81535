package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/internal/testkit"
)

func openSQLite(t *testing.T) (events.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := sqlitestore.Open(context.Background(), path, sqlitestore.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// The key series exist on a running cell and move when jobs run: events
// appended, placements, pending tasks (up, then down), running tasks on
// the master and on the agents, API requests, polls.
func TestScrapeMovesWhenAJobRuns(t *testing.T) {
	store, _ := openSQLite(t)
	c := startCell(t, store, 2)
	c.waitMachines(2)
	testkit.Eventually(t, 10*time.Second, "the master ready", func() (bool, string) {
		code, body := get(t, c.web, "/readyz")
		return code == 200, body
	})
	before := scrape(t, c.web)
	head := checkFirstScrape(t, before)
	runAndKillJobs(t, c)
	after := scrape(t, c.web)
	checkMoved(t, before, after, head)
	checkBoundedLabels(t, after)
	checkDashboardSeries(t, c, after)
	checkAccessLog(t, c)
}

// checkFirstScrape: the master exposes its series, two machines up and
// registered, the projection within the log; it returns the log's head.
func checkFirstScrape(t *testing.T, before metrics) float64 {
	t.Helper()
	for _, name := range []string{
		"corral_events_appended_total", "corral_store_requests_total", "corral_store_request_duration_seconds_bucket",
		"corral_log_head_position", "corral_consumer_position", "corral_consumer_lag_events", "corral_master_leader",
		"corral_master_epoch", "corral_machines", "corral_tasks", "corral_tasks_pending_by_reason", "corral_jobs",
		"corral_api_requests_total", "corral_api_request_duration_seconds_bucket", "corral_link_polls_total",
		"corral_link_poll_interval_seconds_bucket", "corral_link_poll_duration_seconds_bucket", "corral_store_up",
		"corral_link_clock_skew_max_seconds", "go_goroutines", "process_resident_memory_bytes",
	} {
		if !before.has(name) {
			t.Errorf("%s: not exposed", name)
		}
	}
	if before.sum("corral_master_leader") != 1 || before.sum("corral_master_epoch") < 1 || before.sum("corral_store_up") != 1 {
		t.Errorf("leader %v epoch %v store_up %v", before.sum("corral_master_leader"), before.sum("corral_master_epoch"), before.sum("corral_store_up"))
	}
	if got := before.sum("corral_machines", `state="up"`); got != 2 {
		t.Errorf(`corral_machines{state="up"} = %v, want 2`, got)
	}
	if before.sum("corral_events_appended_total", `type="MachineRegistered"`) != 2 {
		t.Errorf("MachineRegistered appended %v times, want 2", before.sum("corral_events_appended_total", `type="MachineRegistered"`))
	}
	head := before.sum("corral_log_head_position")
	if lag := before.sum("corral_consumer_lag_events", `consumer="projection"`); head < 3 || lag < 0 || lag > head {
		t.Errorf("head %v, projection lag %v", head, lag)
	}
	return head
}

// runAndKillJobs submits a job no machine can hold (pending, for want of
// memory) and one that runs, then kills the first: the gauges follow.
func runAndKillJobs(t *testing.T, c *cell) {
	t.Helper()
	// A job no machine can hold: pending, for want of memory.
	huge := &events.JobSpec{Name: "huge", Priority: 0, TaskCount: 1, Command: "/bin/true", Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 30}}
	if _, err := c.client.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "s1", Spec: huge}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the pending gauges up", func() (bool, string) {
		m := scrape(t, c.web)
		p, why := m.sum("corral_tasks", `band="best-effort"`, `state="pending"`), m.sum("corral_tasks_pending_by_reason", `reason="memory"`)
		return p == 1 && why == 1, fmt.Sprintf("pending %v, by memory %v", p, why)
	})

	// A job that runs: placements, tasks running on the agents.
	sleeper := &events.JobSpec{Name: "sleeper", Priority: 0, TaskCount: 3, Command: "/bin/sh", Args: []string{"-c", "exec sleep 300"},
		Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 32 << 20}}
	if _, err := c.client.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "s2", Spec: sleeper}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "three tasks running", func() (bool, string) {
		m := scrape(t, c.web)
		r := m.sum("corral_tasks", `band="best-effort"`, `state="running"`)
		return r == 3, fmt.Sprintf("running %v", r)
	})
	testkit.Eventually(t, 10*time.Second, "the agents report three running tasks", func() (bool, string) {
		running, cpuSeries := 0.0, 0
		for _, a := range c.agentAddrs() {
			m := scrape(t, a)
			running += m.sum("corral_agent_tasks", `state="running"`)
			if m.has("corral_agent_task_memory_bytes") {
				cpuSeries++
			}
		}
		return running == 3 && cpuSeries > 0, fmt.Sprintf("running %v, agents with per-job memory %d", running, cpuSeries)
	})
	for _, a := range c.agentAddrs() {
		if code, body := get(t, a, "/readyz"); code != 200 {
			t.Errorf("agent %s /readyz: %d %s", a, code, body)
		}
	}

	// Killing the job that cannot fit: pending back down.
	if _, err := c.client.Kill(as("alice"), &apipb.KillRequest{RequestId: "k1", Job: "huge"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the pending gauges down", func() (bool, string) {
		m := scrape(t, c.web)
		p, why := m.sum("corral_tasks", `state="pending"`), m.sum("corral_tasks_pending_by_reason")
		return p == 0 && why == 0, fmt.Sprintf("pending %v, by reason %v", p, why)
	})
}

// checkMoved: the counters moved with the jobs between the scrapes, and
// the Infrastore's consumer caught up with the first scrape's head.
func checkMoved(t *testing.T, before, after metrics, head float64) {
	moved := []struct {
		name   string
		labels []string
		min    float64 // at least this much more than before
	}{
		{"corral_events_appended_total", nil, 8},
		{"corral_events_appended_total", []string{`type="JobSubmitted"`}, 2},
		{"corral_events_appended_total", []string{`type="TaskScheduled"`}, 3},
		{"corral_scheduler_placed_total", []string{`kind="task"`}, 3},
		{"corral_scheduler_passes_total", nil, 1},
		{"corral_scheduler_pass_duration_seconds_count", nil, 1},
		{"corral_log_head_position", nil, 8},
		{"corral_api_requests_total", []string{`method="Submit"`, `code="OK"`}, 2},
		{"corral_api_requests_total", []string{`method="Kill"`, `code="OK"`}, 1},
		{"corral_store_request_duration_seconds_count", []string{`op="append_many"`}, 3},
		{"corral_link_polls_total", []string{`result="answered"`}, 2},
		{"corral_jobs", []string{`state="dead"`}, 1},
	}
	for _, mv := range moved {
		t.Run(mv.name, func(t *testing.T) {
			b, a := before.sum(mv.name, mv.labels...), after.sum(mv.name, mv.labels...)
			if a-b < mv.min {
				t.Errorf("%s%v went from %v to %v; want it up by %v or more", mv.name, mv.labels, b, a, mv.min)
			}
		})
	}
	if got := after.sum("corral_consumer_position", `consumer="infrastore"`); got < head {
		t.Errorf("consumer infrastore at %v, behind the first scrape's head %v", got, head)
	}
}

// checkBoundedLabels: no per-task, per-user or per-machine label on the
// master's series.
func checkBoundedLabels(t *testing.T, after metrics) {
	t.Helper()
	for series := range after {
		if strings.HasPrefix(series, "corral_") && (strings.Contains(series, "job=") || strings.Contains(series, "user=") || strings.Contains(series, "machine=")) {
			t.Errorf("%s: an unbounded label on a master series", series)
		}
	}
}

// checkDashboardSeries: every corral series the dashboard plots is one the
// master or an agent exposes (the checkpoint's appear with the first
// checkpoint).
func checkDashboardSeries(t *testing.T, c *cell, after metrics) {
	t.Helper()
	exposed := map[string]bool{}
	for series := range after {
		name, _, _ := strings.Cut(series, "{")
		exposed[name] = true
	}
	for _, a := range c.agentAddrs() {
		for series := range scrape(t, a) {
			name, _, _ := strings.Cut(series, "{")
			exposed[name] = true
		}
	}
	dashboard, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(dashboard) {
		t.Fatal("docs/grafana-dashboard.json is not JSON")
	}
	plotted := regexp.MustCompile(`corral_[a-z_]+`).FindAllString(string(dashboard), -1)
	if len(plotted) < 20 {
		t.Errorf("the dashboard plots only %d corral series", len(plotted))
	}
	for _, name := range plotted {
		if !exposed[name] && !strings.HasPrefix(name, "corral_checkpoint_") {
			t.Errorf("docs/grafana-dashboard.json plots %s, which nothing exposes", name)
		}
	}
}

// checkAccessLog: a mutation's record names the caller, the job and the
// position it appended, in JSON.
func checkAccessLog(t *testing.T, c *cell) {
	t.Helper()
	var found bool
	for _, line := range strings.Split(c.logs.String(), "\n") {
		if !strings.Contains(line, `"api request"`) || !strings.Contains(line, `"Cell/Submit"`) {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log record %q: %v", line, err)
		}
		if rec["job"] == "sleeper" && rec["caller"] == "alice" && rec["position"].(float64) > 0 && rec["code"] == "OK" {
			found = true
		}
	}
	if !found {
		t.Errorf("no access log record of the submission of sleeper with caller, job and position:\n%s", c.logs.String())
	}
}
