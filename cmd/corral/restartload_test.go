package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// A `corral up` running many small tasks and a 3-replica web service
// (health-checked, max_disruptions 1) is killed with SIGKILL while the
// host is loaded to twice its cores by CPU burners, and started again on
// the same data: the new master, slow itself, must not blame the machines
// for it. No machine is marked down, no task lost, and a probe asking
// every replica's port ten times a second never sees fewer than 2 of 3
// answer. CORRAL_RESTART_TASKS sets how many small tasks (default 1,500;
// `make restart-load` runs more).
func TestRestartUnderLoadKeepsServicesUp(t *testing.T) {
	tasks := 1500
	if s := os.Getenv("CORRAL_RESTART_TASKS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CORRAL_RESTART_TASKS=%q: want a positive number of tasks", s)
		}
		tasks = n
	}
	c := startCell(t, cellOptions{agents: 3, flags: offerFor(t, tasks, 3)})
	p := probeAddrs(webReplicas(t, c), 100*time.Millisecond)
	defer p.stop()
	manySmallTasksRun(t, c, tasks)
	if low := p.lowest(); low < 3 {
		t.Fatalf("before the restart only %d of 3 replicas answered at times", low)
	}

	// Twice the host's cores of busy loops, bounded by the test: the new
	// master and its agents get a third of the CPU they would.
	burners := burnCPU(t, 2*runtime.NumCPU())
	killed := time.Now()
	c.kill(t)
	c.start(t)
	t.Logf("restarted in %s under load", time.Since(killed).Truncate(time.Millisecond))
	// Past the grace a new leader gives machines (2 x 3 polls of 1 s) and
	// many polls after it, all under load: asked every 2 s, the log never
	// holds a machine down or a task lost.
	testkit.Consistently(t, 25*time.Second, 2*time.Second, "no MachineDown or TaskLost after a restart under load", func() (bool, string) {
		for _, typ := range []string{"MachineDown", "TaskLost"} {
			out, _ := c.run(t, "events", "--type", typ, "-o", "csv")
			if n := strings.Count(out, "\n") - 1; n > 0 {
				return false, fmt.Sprintf("the log holds %d %s events:\n%.2000s", n, typ, out)
			}
		}
		return true, ""
	})
	burners()

	for _, line := range strings.Split(c.up.err.String(), "\n") {
		if strings.Contains(line, "machine loss") || strings.Contains(line, "missed its polls") {
			t.Logf("restarted cell: %s", line)
		}
	}
	out, _ := c.run(t, "events", "--type", "MachineLossHeld", "-o", "csv")
	holds := strings.Count(out, ",MachineLossHeld,")
	t.Logf("loss holds' starts and ends recorded: %d\n%s", holds, out)
	if low := p.lowest(); low < 2 {
		t.Errorf("through the restart as few as %d of 3 replicas answered, want at least 2 (count 3 - max_disruptions 1)", low)
	}
	t.Logf("restart under load: %d tasks, %d burners on %d cores, lowest answering replicas %d of 3, %d MachineLossHeld, %s from kill to checks",
		tasks, 2*runtime.NumCPU(), runtime.NumCPU(), p.lowest(), holds, time.Since(killed).Truncate(time.Second))
	c.stop(t)
}

// offerFor is what each of agents machines offers for tasks small tasks
// and the service. Each small task reserves 1m of CPU (the least a task
// can ask) and 4 MiB (a cgroup limit: sleep uses far less), the service
// 150m and 288 MiB. `corral up` offers this host's cores and memory; when
// the tasks need more, each machine is told to offer two thirds of what
// they need, so that any two hold them all.
func offerFor(t *testing.T, tasks, agents int) []string {
	var offer []string
	if need := int64(tasks + 150); need > int64(runtime.NumCPU())*1000 {
		offer = append(offer, "--machine-cpu", strconv.FormatInt((2*need+int64(agents)-1)/int64(agents), 10)+"m")
	}
	if need := int64(tasks)*4<<20 + 3*96<<20; need > hostMemory(t) {
		offer = append(offer, "--machine-memory", strconv.FormatInt((2*need+int64(agents)-1)/int64(agents), 10))
	}
	if offer != nil {
		t.Logf("each machine offers %s", strings.Join(offer, " "))
	}
	return offer
}

// webReplicas runs a 3-replica web service, health-checked with
// max_disruptions 1, and returns its replicas' addresses.
func webReplicas(t *testing.T, c *testCell) []string {
	t.Helper()
	web := filepath.Join(t.TempDir(), "web.json")
	if err := os.WriteFile(web, []byte(`{"name": "web", "priority": "production", "count": 3,
		"command": "/bin/sh", "args": ["-c", "exec python3 -m http.server --bind 127.0.0.1 \"$PORT\""],
		"port_names": ["http"], "resources": {"cpu": "50m", "memory": "96MiB"},
		"health_check": {"path": "/", "port": "http", "period": "2s", "timeout": "1s", "failures_allowed": 2},
		"restart": {"mode": "always", "backoff": "1s", "max_backoff": "30s"},
		"update": {"max_disruptions": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := c.run(t, "job", "submit", web, "--wait"); code != 0 || !strings.Contains(out, "all 3 tasks running and healthy") {
		t.Fatalf("submit web: exit %d\n%s", code, out)
	}
	var replicas []string
	for i := range 3 {
		out, _ := c.run(t, "task", "get", "web", strconv.Itoa(i))
		m := regexp.MustCompile(`(?m)^address:\s+(127\.0\.0\.1:\d+)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("task get web %d shows no address:\n%s", i, out)
		}
		replicas = append(replicas, m[1])
	}
	return replicas
}

// manySmallTasksRun submits a job of tasks small batch tasks and waits
// until every one runs.
func manySmallTasksRun(t *testing.T, c *testCell, tasks int) {
	t.Helper()
	many := filepath.Join(t.TempDir(), "many.json")
	if err := os.WriteFile(many, []byte(fmt.Sprintf(`{"name": "many", "priority": "batch", "count": %d,
		"command": "/bin/sleep", "args": ["100000"],
		"resources": {"cpu": "1m", "memory": "4MiB"}}`, tasks)), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Not --wait: the agents start 10 tasks a poll each, and 1,500 take
	// longer than one CLI call is given.
	if out, code := c.run(t, "job", "submit", many); code != 0 {
		t.Fatalf("submit many: exit %d\n%s", code, out)
	}
	eventually(t, "every small task runs", time.Duration(tasks/5)*time.Second, func() (string, bool) {
		out, _ := c.run(t, "job", "get", "many", "-o", "json")
		m := regexp.MustCompile(`"running":\s*(\d+)`).FindStringSubmatch(out)
		return fmt.Sprintf("want %d running:\n%.500s", tasks, out), m != nil && m[1] == strconv.Itoa(tasks)
	})
	t.Logf("%d tasks running in %s", tasks, time.Since(start).Truncate(time.Second))
}

// burnCPU starts n busy-loop processes and returns what stops them; the
// test's cleanup stops them too.
func burnCPU(t *testing.T, n int) (stop func()) {
	t.Helper()
	var cmds []*exec.Cmd
	for range n {
		c := exec.Command("/bin/sh", "-c", "while :; do :; done")
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	// Busy from the moment they run: wait until each has used the CPU.
	testkit.Eventually(t, 10*time.Second, "every burner busy", func() (bool, string) {
		for _, c := range cmds {
			if f := strings.Fields(readFile(fmt.Sprintf("/proc/%d/stat", c.Process.Pid))); len(f) < 15 || f[13] == "0" {
				return false, fmt.Sprintf("burner %d has used no CPU yet", c.Process.Pid)
			}
		}
		return true, ""
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, c := range cmds {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// hostMemory is this host's MemTotal in bytes.
func hostMemory(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^MemTotal:\s+(\d+) kB$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("/proc/meminfo has no MemTotal:\n%s", b)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}
