package main_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHealthGatedRollouts runs examples/web.jsonnet (two replicas of an
// HTTP server with a health check) on a real `corral up` and pushes
// updates at it, while a probe asks every task port of the cell for a
// page ten times a second: a bad release halts at its first replica and
// reverts by itself, a good one commits itself, a canary waits for its
// promote, and at no moment do fewer than count - max_disruptions = 1
// replicas answer.
func TestHealthGatedRollouts(t *testing.T) {
	c := startCell(t, cellOptions{})
	corral := c.cli(t)
	if out, code := corral("version"); code != 0 || !strings.HasPrefix(out, "corral ") || !strings.Contains(out, ", go1.") {
		t.Errorf("version: exit %d", code)
	}
	out, code := corral("job", "submit", "examples/web.jsonnet", "--wait")
	if code != 0 || !strings.Contains(out, "alice/web: all 2 tasks running and healthy") {
		t.Fatalf("submit --wait: exit %d", code)
	}
	out, _ = corral("task", "list", "web")
	if n := len(regexp.MustCompile(`(?m)^web/[01]\s+running\s+healthy\s`).FindAllString(out, -1)); n != 2 {
		t.Fatalf("task list shows %d healthy tasks, want 2", n)
	}

	p := startProbe(c.portBase, 3)
	defer p.stop()
	eventually(t, "the probe sees both replicas", 10*time.Second, func() (string, bool) {
		n := p.now()
		return fmt.Sprintf("%d answer", n), n == 2
	})
	p.reset()

	badReleaseRevertsItself(t, corral)
	goodReleaseCommitsAtItsPlan(t, corral)
	canaryWaitsForItsPromote(t, corral)
	historyAndRevertToAVersion(t, corral)
	// Health is history too: SQL over the log finds every transition.
	eventually(t, "health transitions in SQL", time.Minute, func() (string, bool) {
		out, code := corral("sql", "-o", "csv", `SELECT json_extract_string(payload, '$.healthy') AS healthy, count(*) AS n FROM events `+
			`WHERE type = 'TaskHealthChanged' AND json_extract_string(payload, '$.job') = 'web' GROUP BY 1 ORDER BY 1`)
		return out, code == 0 && regexp.MustCompile(`(?m)^true,\d+$`).MatchString(out)
	})

	low, high := p.stop()
	if high != 2 || low < 1 {
		t.Errorf("replicas answering the probe through the updates: between %d and %d, want at least 1 (count 2 - max_disruptions 1) and 2 at times; moves: %s", low, high, p.timeline())
	}
}

// badReleaseRevertsItself: a bad release halts at the first replica and
// reverts by itself, saying why.
func badReleaseRevertsItself(t *testing.T, corral func(...string) (string, int)) {
	t.Helper()
	out, code := corral("job", "update", "examples/web-broken.jsonnet", "--wait")
	if code != 1 || !strings.Contains(out, "the update was reverted") || !strings.Contains(out, "health check failed") {
		t.Errorf("update to a bad release --wait: exit %d, want 1 with the revert and its reason", code)
	}
	eventually(t, "the revert finishes", time.Minute, func() (string, bool) {
		out, _ := corral("job", "get", "web")
		healthy := regexp.MustCompile(`(?m)^web/[01]\s+running\s+healthy\s`).FindAllString(out, -1)
		return out, strings.Contains(out, "last update: version 2 reverted") && len(healthy) == 2 && !strings.Contains(out, "\nupdate: ")
	})
	out, _ = corral("events", "--job", "web", "--type", "JobUpdateHalted")
	if !strings.Contains(out, "before it was healthy") {
		t.Errorf("no JobUpdateHalted saying why")
	}
}

// goodReleaseCommitsAtItsPlan: a good release, planned first (nothing
// appended), then applied at the plan's position; it commits itself.
func goodReleaseCommitsAtItsPlan(t *testing.T, corral func(...string) (string, int)) {
	t.Helper()
	out, code := corral("job", "plan", "examples/web-v2.jsonnet")
	m := regexp.MustCompile(`planned at position (\d+)`).FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, "version 3 -> 4") || !strings.Contains(out, `+ env.WEB_VERSION: "2"`) ||
		!strings.Contains(out, "places alice/web/") {
		t.Fatalf("job plan: exit %d", code)
	}
	if out, _ := corral("job", "get", "web"); !strings.Contains(out, "(version 3)") {
		t.Fatalf("job plan changed the job")
	}
	out, code = corral("job", "update", "examples/web-v2.jsonnet", "--if-position", m[1], "--wait")
	if code != 0 || !strings.Contains(out, "committed: every task healthy") {
		t.Errorf("update to a good release --wait: exit %d, want 0 and committed", code)
	}
}

// canaryWaitsForItsPromote: a canary, once healthy, waits (for the 3 s
// asked here) until it is promoted; promote --wait follows the roll it
// sets going, as update --wait.
func canaryWaitsForItsPromote(t *testing.T, corral func(...string) (string, int)) {
	t.Helper()
	out, code := corral("job", "update", "examples/web-canary.jsonnet", "--wait")
	if code != 0 || !strings.Contains(out, "canaries healthy") {
		t.Errorf("canary update --wait: exit %d, want 0 once the canary is healthy", code)
	}
	consistently(t, "job get shows the canary waiting for its promote", 3*time.Second, func() (string, bool) {
		out, _ := corral("job", "get", "web")
		return out, strings.Contains(out, "canaries healthy") && strings.Contains(out, "corral job promote web")
	})
	if out, code := corral("job", "promote", "web", "--wait"); code != 0 || !strings.Contains(out, "alice/web: version 5 committed: every task healthy") {
		t.Errorf("promote --wait: exit %d, want 0 once version 5 is committed", code)
	}
	eventually(t, "the promoted update commits itself", time.Minute, func() (string, bool) {
		out, _ := corral("job", "get", "web")
		return out, strings.Contains(out, "last update: version 5 committed")
	})
}

// historyAndRevertToAVersion: every version, who made it, how its update
// ended, what changed; a revert pushes an old one again.
func historyAndRevertToAVersion(t *testing.T, corral func(...string) (string, int)) {
	t.Helper()
	out, code := corral("job", "history", "web")
	for _, want := range []string{"version 1", "submitted", "version 2", "reverted", "version 3", "reverted to version 1's spec",
		"version 4", "committed: every task runs spec version 4", "env.WEB_VERSION", "* version 5", "alice"} {
		if !strings.Contains(out, want) {
			t.Errorf("job history: exit %d, no %q", code, want)
		}
	}
	if out, code := corral("job", "revert", "web", "4", "--wait"); code != 0 || !strings.Contains(out, "alice/web: version 6 committed: every task healthy") {
		t.Errorf("revert --wait: exit %d, want 0 once version 6 is committed", code)
	}
	eventually(t, "the revert to version 4 commits itself", time.Minute, func() (string, bool) {
		out, _ := corral("job", "get", "web")
		return out, strings.Contains(out, "last update: version 6 committed") && strings.Contains(out, "(version 6)")
	})
	out, _ = corral("job", "history", "web", "-o", "json")
	if !strings.Contains(out, `"current": "6"`) && !strings.Contains(out, `"current":"6"`) {
		t.Errorf("job history -o json does not say version 6 is current")
	}
}

// probe counts, every interval, the addresses that answer an HTTP GET:
// the replicas that serve, whatever corral says of them.
type probe struct {
	mu        sync.Mutex
	last      int
	low, high int
	changes   []string // when the count of answering replicas moved, and to what
	rounds    int      // rounds asked since the start
	done      chan struct{}
	wg        sync.WaitGroup
}

func startProbe(portBase, machines int) *probe {
	return startProbeEvery(portBase, machines, 100*time.Millisecond)
}

// startProbeEvery probes every task port of a cell whose machines hand
// out their lowest free ports from portBase, every interval.
func startProbeEvery(portBase, machines int, interval time.Duration) *probe {
	var addrs []string
	for m := range machines {
		for k := range 8 { // each machine hands out its lowest free ports
			addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", portBase+1000*m+k))
		}
	}
	return probeAddrs(addrs, interval)
}

// probeAddrs probes addrs every interval.
func probeAddrs(addrs []string, interval time.Duration) *probe {
	p := &probe{done: make(chan struct{}), low: 1 << 30}
	// A loaded host (CI runs this under -race on 2 cores) answers slowly,
	// not never: a second tells a replica that is gone (refused at once)
	// from one that is busy.
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// A ticker: the probe's pace is its point, it waits for nothing.
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			p.record(askAll(client, addrs))
			select {
			case <-p.done:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// askAll asks every address at once, so that a round lasts one request's
// timeout at most and a short outage is not missed between rounds, and
// returns how many answered.
func askAll(client *http.Client, addrs []string) int {
	var n atomic.Int32
	var round sync.WaitGroup
	for _, a := range addrs {
		round.Add(1)
		go func() {
			defer round.Done()
			if resp, err := client.Get("http://" + a + "/"); err == nil {
				if resp.StatusCode == 200 {
					n.Add(1)
				}
				resp.Body.Close()
			}
		}()
	}
	round.Wait()
	return int(n.Load())
}

func (p *probe) record(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n != p.last || len(p.changes) == 0 {
		p.changes = append(p.changes, fmt.Sprintf("%s: %d", time.Now().Format("15:04:05.000"), n))
	}
	p.last, p.low, p.high = n, min(p.low, n), max(p.high, n)
	p.rounds++
}

// round is how many rounds the probe has finished.
func (p *probe) round() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rounds
}

func (p *probe) now() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// lowest is the fewest that answered at once since the start (or reset).
func (p *probe) lowest() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.low
}

func (p *probe) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.low, p.high, p.changes = 1<<30, 0, nil
}

// timeline is when the count of answering replicas moved since the last
// reset, for the log of a failure.
func (p *probe) timeline() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.changes, ", ")
}

// stop ends the probe (once) and returns the fewest and most replicas seen.
func (p *probe) stop() (low, high int) {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.low, p.high
}
