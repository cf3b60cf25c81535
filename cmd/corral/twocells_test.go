package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Two `corral up` cells on one machine, each with a machine named m1: the
// second one starting (an agent with no saved state sweeps its cgroup
// parent) and stopping kills none of the first one's tasks, because each
// cell's containers live under its own identity. The second cell is made
// either with certificates of its own or with a copy of the first's certs
// directory (one CA, one cell name): a cell's identity is its data
// directory's, not its CA's.
func TestTwoCellsOnOneMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the corral binary and runs two cells")
	}
	bin := buildCorral(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, copiedCA := range []bool{false, true} {
		name := "own CA"
		if copiedCA {
			name = "copied CA"
		}
		t.Run(name, func(t *testing.T) { twoCells(t, bin, root, copiedCA) })
	}
}

func twoCells(t *testing.T, bin, root string, copiedCA bool) {
	type cell struct {
		data string
		env  []string
		up   *upProcess
	}
	start := func(portBase, certsFrom string) *cell {
		c := &cell{data: t.TempDir()}
		if certsFrom != "" {
			// cp -a, as a person copying a cell would: keys keep their mode.
			if out, err := exec.Command("cp", "-a", certsFrom, filepath.Join(c.data, "certs")).CombinedOutput(); err != nil {
				t.Fatalf("copy the certs: %v\n%s", err, out)
			}
		}
		grpcAddr, httpAddr, dnsAddr := freeTCP(t), freeTCP(t), freeUDPAndTCP(t)
		c.env = append(os.Environ(), "CORRAL_USER=alice", "CORRAL_MASTER="+grpcAddr, "CORRAL_CELL=dev", "CORRAL_DATA="+c.data)
		c.up = startUp(t, bin, root, c.env, []string{"up", "--data", c.data, "--listen", grpcAddr, "--http", httpAddr, "--dns", dnsAddr,
			"--port-base", portBase, "--agents", "1"})
		if out, code := runCorral(t, bin, root, c.env, "job", "submit", "examples/hello.jsonnet", "--wait"); code != 0 {
			t.Fatalf("submit hello: exit %d\n%s", code, out)
		}
		return c
	}
	a := start("27000", "")
	pidsOf := func(c *cell) []int {
		return taskPids(t, func(args ...string) (string, int) { return runCorral(t, bin, root, c.env, args...) })
	}
	before := pidsOf(a)
	if len(before) < 5 {
		t.Fatalf("cell A runs %d tasks, want 5", len(before))
	}
	certsFrom := ""
	if copiedCA {
		certsFrom = filepath.Join(a.data, "certs")
	}
	b := start("28000", certsFrom)
	if copiedCA {
		caA, _ := os.ReadFile(filepath.Join(a.data, "certs", "ca.crt"))
		caB, _ := os.ReadFile(filepath.Join(b.data, "certs", "ca.crt"))
		if len(caA) == 0 || string(caA) != string(caB) {
			t.Fatal("cell B does not run with cell A's CA")
		}
	}
	idA, _ := os.ReadFile(filepath.Join(a.data, "cell-id"))
	idB, _ := os.ReadFile(filepath.Join(b.data, "cell-id"))
	if len(idA) == 0 || string(idA) == string(idB) {
		t.Errorf("cell ids %q and %q: want two, each its own", idA, idB)
	}
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
