package main_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// TestSeparateProcesses runs a cell as an operator would spread it over
// machines: one `corral master` process and three `corral agent`
// processes, each agent in a rack of its own. A 6-task job spread by rack
// lands 2-2-2, and task logs come from the agents' processes through the
// master: the tail, a follow that sees new lines, and the run before a
// restart in place.
func TestSeparateProcesses(t *testing.T) {
	c := newCell(t, cellOptions{cell: "procs"})
	corral := c.cli(t)
	c.startProcess(t, "master", "master", "--insecure", "--name", "m", "--store", filepath.Join(c.data, "log.db"), "--listen", c.grpcAddr, "--admins", "root", "--cell", "procs")
	suffix := fmt.Sprint(rand.IntN(1 << 20))
	portBase := 40000 + 1000*rand.IntN(8)
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("p%d-%s", i, suffix)
		c.startProcess(t, "agent-"+name, "agent", "--name", name, "--listen", testkit.FreeAddr(t), "--data", filepath.Join(c.data, name),
			"--cpu", "2", "--memory", "2GiB", "--disk", "10GiB", "--attr", fmt.Sprintf("rack=r%d", i),
			"--port-first", fmt.Sprint(portBase+i*100), "--ports", "100", "--stop-tasks-on-exit")
	}
	eventually(t, "three machines up", 30*time.Second, func() (string, bool) {
		out, _ := corral("machine", "list")
		return out, strings.Count(out, " up ") == 3
	})

	jobs := filepath.Join(c.data, "jobs.jsonnet")
	if err := os.WriteFile(jobs, []byte(`{ jobs: [
  { name: 'spread', count: 6, command: '/bin/sh', args: ['-c', 'echo serving; exec sleep 3600'],
    resources: { cpu: '100m', memory: '32MiB' }, spread: ['rack'] },
  { name: 'crasher', count: 1, command: '/bin/sh',
    args: ['-c', 'echo "run at $(date +%s%N)"; echo "to stderr" >&2; sleep 3; exit 3'],
    resources: { cpu: '100m', memory: '32MiB' }, restart: { mode: 'always', backoff: '1s', max_backoff: '1s' } },
] }`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := corral("job", "submit", jobs, "--wait"); code != 0 && !strings.Contains(out, "crasher") {
		t.Fatalf("submit: exit %d", code)
	}
	spreadByRack(t, corral, suffix)
	logsThroughTheMaster(t, c)
}

// spreadByRack: the 6 spread tasks land 2-2-2 on the three racks.
func spreadByRack(t *testing.T, corral func(...string) (string, int), suffix string) {
	t.Helper()
	eventually(t, "6 spread tasks running", 30*time.Second, func() (string, bool) {
		out, _ := corral("task", "list", "spread")
		return out, len(regexp.MustCompile(`(?m)^spread/\d\s+running`).FindAllString(out, -1)) == 6
	})
	out, _ := corral("task", "list", "spread")
	perMachine := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^spread/\d\s+running\s+\S+\s+(p\d-\d+)\s`).FindAllStringSubmatch(out, -1) {
		perMachine[m[1]]++
	}
	for i := 1; i <= 3; i++ {
		if n := perMachine[fmt.Sprintf("p%d-%s", i, suffix)]; n != 2 {
			t.Errorf("rack r%d holds %d of the 6 spread tasks, want 2 (%v)", i, n, perMachine)
		}
	}
}

// logsThroughTheMaster: task logs from the agents' processes: the current
// run's tail, stderr, the run before a restart in place, a follow that
// sees new runs; only the owner or an admin reads them.
func logsThroughTheMaster(t *testing.T, c *testCell) {
	t.Helper()
	corral := c.cli(t)
	eventually(t, "spread/0's stdout", 20*time.Second, func() (string, bool) {
		out, code := corral("task", "logs", "spread", "0")
		return out, code == 0 && strings.Contains(out, "--- corral: run 1 started") && strings.Contains(out, "serving")
	})
	// The crasher restarts in place every few seconds: its previous run is
	// one whole run, apart from the current one.
	eventually(t, "crasher restarted in place", 30*time.Second, func() (string, bool) {
		out, _ := corral("task", "logs", "crasher", "0")
		return out, regexp.MustCompile(`--- corral: run [2-9]\d* started`).MatchString(out)
	})
	cur, _ := corral("task", "logs", "crasher", "0")
	prev, code := corral("task", "logs", "crasher", "0", "--previous")
	if code != 0 || strings.Count(prev, "--- corral: run ") != 1 || !strings.Contains(prev, "run at ") || prev == cur {
		t.Errorf("--previous: exit %d, want exactly the run before the current one", code)
	}
	if out, _ := corral("task", "logs", "crasher", "0", "--stderr", "-n", "1"); strings.TrimSpace(out) != "to stderr" && !strings.Contains(out, "--- corral: run") {
		t.Errorf("--stderr -n 1: %q", out)
	}
	// Follow: new runs' lines arrive while the command runs (8 s of it).
	followed, _ := runCorral(t, c.root, c.env, 8*time.Second, "task", "logs", "crasher", "0", "-f", "-n", "1")
	if n := strings.Count(followed, "--- corral: run "); n < 1 {
		t.Errorf("task logs -f over 8 s saw %d new runs' markers:\n%s", n, followed)
	}
	// Only the owner or an admin reads a task's logs.
	if out, code := runCorral(t, c.root, append(slices.Clone(c.env), "CORRAL_USER=bob"), time.Minute, "task", "logs", "spread", "0", "--owner", "alice"); code == 0 || !strings.Contains(out, "only their own") {
		t.Errorf("bob read alice's logs: exit %d\n%s", code, out)
	}
}
