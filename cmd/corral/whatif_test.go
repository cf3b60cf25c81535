package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// TestWhatIfRunsOutsideTheMaster: the web UI's what-if page replays in a
// child process bounded in memory and time, never in the master. A replay
// that adds 400,000 machines (it once grew the master from 66 MB to 1.6
// GB) is stopped at its memory and said so, naming the flag; meanwhile the
// same user's second replay is refused naming the cap, another user's is
// answered, and the master's resident memory hardly moves. A viewer who
// leaves stops their replay's process. A cell with a short time limit
// stops a long replay at it and says so.
func TestWhatIfRunsOutsideTheMaster(t *testing.T) {
	c := startCell(t, cellOptions{user: "root", flags: []string{"--sim-memory", "128MiB", "--sim-timeout", "90s"}})
	if out, code := c.run(t, "job", "submit", "examples/hello.jsonnet", "--wait"); code != 0 {
		t.Fatalf("submitting hello: exit %d\n%s", code, out)
	}
	_, files := c.issueUserTokens(t, "alice", "bob")
	w := &whatIfPage{t: t, c: c, alice: c.webLogin(t, files["alice"]), bob: c.webLogin(t, files["bob"])}
	if code, body, err := w.get(context.Background(), w.bob, ""); err != nil || code != 200 || !strings.Contains(body, `id="sim-summary"`) {
		t.Fatalf("a small replay: %d %v\n%s", code, err, body)
	}
	w.hugeReplayStaysInItsChild()
	w.viewerWhoLeavesStopsTheReplay()
	c.stop(t)

	// A cell whose replays may take a second stops a longer one at it.
	c.setFlag(t, "--sim-timeout", "1s")
	c.setFlag(t, "--sim-memory", "1GiB")
	c.start(t)
	w.alice = c.webLogin(t, files["alice"])
	code, body, err := w.get(context.Background(), w.alice, "add=100000x8c32g+100000x8c32g")
	if err != nil || code != http.StatusGatewayTimeout || !strings.Contains(body, "--sim-timeout") {
		t.Errorf("a replay past its time: %d %v, want 504 naming --sim-timeout\n%s", code, err, body)
	}
}

// whatIfPage is the what-if page of a cell, asked by alice and bob.
type whatIfPage struct {
	t          *testing.T
	c          *testCell
	alice, bob *http.Client
}

// get runs a replay through the page with query's changes.
func (w *whatIfPage) get(ctx context.Context, c *http.Client, query string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+w.c.httpAddr+"/sim?run=1&"+query, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// hugeReplayStaysInItsChild: alice's replay adding 400,000 machines runs
// in a child of the master whose argv does not name the store, is stopped
// at --sim-memory, and leaves the master's memory as it was; meanwhile
// her second replay is refused and bob's is answered.
func (w *whatIfPage) hugeReplayStaysInItsChild() {
	t := w.t
	t.Helper()
	pid := w.c.pid()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the master's peak: %v", err)
	}
	before := testkit.ProcStatusKB(t, pid, "VmRSS:")
	huge := "add=100000x8c32g+100000x8c32g+100000x8c32g+100000x8c32g"
	var wg sync.WaitGroup
	wg.Add(1)
	var hugeCode int
	var hugeBody string
	start := time.Now()
	go func() {
		defer wg.Done()
		hugeCode, hugeBody, _ = w.get(context.Background(), w.alice, huge)
	}()
	testkit.Eventually(t, 30*time.Second, "the huge replay starts a child process of the master", func() (bool, string) {
		return len(simChildren(pid)) > 0, "none"
	})
	// The store's URL (which may hold a password) is not in any child's
	// argv, which every user of the machine may read.
	for _, p := range append(simChildren(pid), w.c.infrastorePid(t)) {
		if cmd := readFile(fmt.Sprintf("/proc/%d/cmdline", p)); strings.Contains(cmd, "--store") || strings.Contains(cmd, "events.db") {
			t.Errorf("process %d's argv names the store: %q", p, strings.ReplaceAll(cmd, "\x00", " "))
		}
	}
	// Alice's second replay is refused while her first runs; bob's is
	// answered.
	if code, body, _ := w.get(context.Background(), w.alice, ""); code != http.StatusTooManyRequests || !strings.Contains(body, "--sim-per-user") {
		t.Errorf("alice's second replay: %d, want 429 naming --sim-per-user\n%s", code, body)
	}
	if code, body, err := w.get(context.Background(), w.bob, ""); err != nil || code != 200 || !strings.Contains(body, `id="sim-summary"`) {
		t.Errorf("bob's replay beside alice's huge one: %d %v\n%s", code, err, body)
	}
	wg.Wait()
	if hugeCode != http.StatusBadRequest || !strings.Contains(hugeBody, "--sim-memory") {
		t.Errorf("the huge replay: %d, want 400 naming --sim-memory\n%s", hugeCode, hugeBody)
	}
	peak := testkit.ProcStatusKB(t, pid, "VmHWM:")
	t.Logf("the huge replay ended in %s; the master's resident memory: %d MiB before, peak %d MiB", time.Since(start).Round(time.Millisecond), before>>10, peak>>10)
	if grew := peak - before; grew > 64<<10 {
		t.Errorf("the master's resident memory grew %d MiB during the huge replay, want it to stay in the child", grew>>10)
	}
}

// viewerWhoLeavesStopsTheReplay: a viewer who leaves while the replay's
// process runs stops it, and her slot is free again once the master has
// seen her go.
func (w *whatIfPage) viewerWhoLeavesStopsTheReplay() {
	t := w.t
	t.Helper()
	pid := w.c.pid()
	leave, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		testkit.Poll(time.Minute, func() bool { return len(simChildren(pid)) > 0 || leave.Err() != nil })
		cancel()
	}()
	if _, _, err := w.get(leave, w.alice, "add=100000x8c32g"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the replay the viewer left: %v, want it canceled", err)
	}
	left := time.Now()
	testkit.Eventually(t, 5*time.Second, "the replay's process ends after its viewer left", func() (bool, string) {
		kids := simChildren(pid)
		return len(kids) == 0, fmt.Sprint(kids, " still run")
	})
	t.Logf("the replay's process was gone %s after its viewer left", time.Since(left).Round(time.Millisecond))
	testkit.EventuallyEvery(t, 10*time.Second, 100*time.Millisecond, "alice's replay after she left one", func() (bool, string) {
		code, body, err := w.get(context.Background(), w.alice, "")
		if err == nil && code == 200 {
			return true, ""
		}
		if code != http.StatusTooManyRequests {
			t.Fatalf("alice's replay after she left one: %d %v\n%s", code, err, body)
		}
		return false, body
	})
}

// simChildren are the what-if replays (corral sim children) of process
// parent.
func simChildren(parent int) []int {
	return processes(func(pid int, argv []string) bool {
		if len(argv) < 2 || argv[1] != "sim" {
			return false
		}
		// pid (comm) state ppid ...
		stat := readFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
		return len(f) >= 2 && f[1] == strconv.Itoa(parent)
	})
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
