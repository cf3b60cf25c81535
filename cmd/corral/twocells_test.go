package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Two `corral up` cells on one machine, each with a machine named m1: the
// second one starting (an agent with no saved state sweeps its cgroup
// parent) and stopping kills none of the first one's tasks, because each
// cell's containers live under its own identity.
func TestTwoCellsOnOneMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the corral binary and runs two cells")
	}
	bin := buildCorral(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	type cell struct {
		data string
		env  []string
		up   *upProcess
	}
	start := func(portBase string) *cell {
		c := &cell{data: t.TempDir()}
		grpcAddr, httpAddr, dnsAddr := freeTCP(t), freeTCP(t), freeUDPAndTCP(t)
		c.env = append(os.Environ(), "CORRAL_USER=alice", "CORRAL_MASTER="+grpcAddr, "CORRAL_CELL=dev", "CORRAL_DATA="+c.data)
		c.up = startUp(t, bin, root, c.env, []string{"up", "--data", c.data, "--listen", grpcAddr, "--http", httpAddr, "--dns", dnsAddr,
			"--port-base", portBase, "--agents", "1"})
		if out, code := runCorral(t, bin, root, c.env, "job", "submit", "examples/hello.jsonnet", "--wait"); code != 0 {
			t.Fatalf("submit hello: exit %d\n%s", code, out)
		}
		return c
	}
	a := start("27000")
	pidsOf := func(c *cell) []int {
		return taskPids(t, func(args ...string) (string, int) { return runCorral(t, bin, root, c.env, args...) })
	}
	before := pidsOf(a)
	if len(before) < 5 {
		t.Fatalf("cell A runs %d tasks, want 5", len(before))
	}
	b := start("28000")
	alive := func(when string) {
		t.Helper()
		for _, pid := range before {
			if err := syscall.Kill(pid, 0); err != nil {
				t.Errorf("%s: cell A's task process %d is gone: %v", when, pid, err)
			}
		}
		out, _ := runCorral(t, bin, root, a.env, "events", "--job", "hello")
		for _, bad := range []string{"TaskFailed", "TaskKilled", "TaskLost", "TaskEvicted"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s: cell A recorded %s:\n%s", when, bad, out)
			}
		}
	}
	time.Sleep(3 * time.Second) // past a poll or two of both agents
	alive("with cell B up")
	b.up.stop(t) // Ctrl-C stops cell B's tasks, and only those
	time.Sleep(2 * time.Second)
	alive("after cell B stopped")
}
