package agent

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/agent/cgroup"
)

// scrape GETs /metrics and returns each sample by its series as the text
// format prints it: name{label="value",...}.
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

func TestMetricsCountWhatTheAgentDid(t *testing.T) {
	h := newHarness(t)
	web := h.a.HTTPHandler()
	if code, body := get(t, web, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, web, "/readyz"); code != 503 || !strings.Contains(body, "no master has polled") {
		t.Errorf("/readyz before any poll: %d %q", code, body)
	}

	// A batch task that crashes once and restarts, and one killed at its
	// memory limit.
	crash, hog := ref("crash", 0), ref("hog", 0)
	h.poll(StartRequest(h.id(), crash, 1, 0, spec()))
	h.rt.last().exitCode(1)
	ts := h.waitState(crash, backoff)
	h.clock.Advance(time.UnixMicro(ts.NextStartAtUs).Sub(h.clock.Now()))
	h.waitState(crash, running)
	h.rt.last().setStats(cgroup.Stats{CPUNanos: 3e9, MemoryBytes: 5 << 20})
	h.poll(StartRequest(h.id(), hog, 1, 0, spec(func(s *agentpb.TaskSpec) { s.Priority = 10 })))
	p := h.rt.last()
	p.setStats(cgroup.Stats{OOMKills: 1, MemoryPeakBytes: 64 << 20})
	p.finish(exitStatus{known: true, code: -1, signal: syscall.SIGKILL})
	h.waitState(hog, evicted)
	h.clock.Advance(time.Second) // a usage sample
	h.clock.Advance(2 * time.Second)
	h.poll()

	if code, body := get(t, web, "/readyz"); code != 200 {
		t.Errorf("/readyz after a poll: %d %q", code, body)
	}
	m := scrape(t, web)
	for series, want := range map[string]float64{
		`corral_agent_task_events_total{kind="failed",reason="exited"}`:               1,
		`corral_agent_task_events_total{kind="started",reason=""}`:                    3,
		`corral_agent_task_events_total{kind="evicted",reason="oom"}`:                 1,
		`corral_agent_task_restarts_total{band="batch"}`:                              1,
		`corral_agent_oom_kills_total{band="production"}`:                             1,
		`corral_agent_tasks{state="running"}`:                                         1,
		`corral_agent_tasks{state="evicted"}`:                                         1,
		`corral_agent_tasks{state="failed"}`:                                          0,
		`corral_agent_task_memory_limit_bytes{band="batch",job="crash",user="alice"}`: 64 << 20,
		`corral_agent_task_memory_bytes{band="batch",job="crash",user="alice"}`:       5 << 20,
		`corral_agent_task_cpu_seconds_total{band="batch",job="crash",user="alice"}`:  3,
		`corral_agent_poll_interval_seconds_count`:                                    2,
		`corral_agent_poll_duration_seconds_count`:                                    3,
		`corral_agent_last_poll_age_seconds`:                                          0,
		`corral_agent_master_epoch`:                                                   1,
		`corral_agent_capacity{resource="cpu"}`:                                       4,
	} {
		got, ok := m[series]
		if !ok {
			t.Errorf("%s: missing", series)
		} else if got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if _, ok := m[`corral_agent_info{cgroup_mode="v1",incarnation="`+h.a.incarnation+`"}`]; !ok {
		t.Errorf("corral_agent_info missing or without its labels")
	}
	for series := range m {
		if strings.Contains(series, "index=") {
			t.Errorf("%s: a per-task label", series)
		}
	}

	// Unpolled for longer than ReregisterAfter: not ready, saying why.
	h.clock.Advance(h.a.cfg.ReregisterAfter + time.Second)
	if code, body := get(t, web, "/readyz"); code != 503 || !strings.Contains(body, "no master has polled machine m1 for 31s") {
		t.Errorf("/readyz after a silence: %d %q", code, body)
	}
	h.a.Close()
	if code, _ := get(t, web, "/healthz"); code != 503 {
		t.Errorf("/healthz of a closed agent: %d", code)
	}
}
