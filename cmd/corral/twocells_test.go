package main_test

import (
	"fmt"
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
	for _, copiedCA := range []bool{false, true} {
		name := "own CA"
		if copiedCA {
			name = "copied CA"
		}
		t.Run(name, func(t *testing.T) { twoCells(t, copiedCA) })
	}
}

func twoCells(t *testing.T, copiedCA bool) {
	a := startCellRunningHello(t, 27000, "")
	before := helloPids(t, a.cli(t))
	if len(before) < 5 {
		t.Fatalf("cell A runs %d tasks, want 5", len(before))
	}
	certsFrom := ""
	if copiedCA {
		certsFrom = filepath.Join(a.data, "certs")
	}
	b := startCellRunningHello(t, 28000, certsFrom)
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
	// alive: cell A's processes run, and it recorded none of them failed,
	// killed, lost or evicted.
	alive := func() (string, bool) {
		for _, pid := range before {
			if err := syscall.Kill(pid, 0); err != nil {
				return fmt.Sprintf("cell A's task process %d is gone: %v", pid, err), false
			}
		}
		out, _ := a.run(t, "events", "--job", "hello")
		for _, bad := range []string{"TaskFailed", "TaskKilled", "TaskLost", "TaskEvicted"} {
			if strings.Contains(out, bad) {
				return fmt.Sprintf("cell A recorded %s:\n%s", bad, out), false
			}
		}
		return "", true
	}
	// Past a poll or two of both agents.
	consistently(t, "with cell B up, cell A's tasks run", 3*time.Second, alive)
	b.stop(t) // Ctrl-C stops cell B's tasks, and only those
	consistently(t, "after cell B stopped, cell A's tasks run", 2*time.Second, alive)
}

// startCellRunningHello starts a cell of one machine at portBase, with a
// copy of the certs directory certsFrom when it is not empty, and runs
// hello in it.
func startCellRunningHello(t *testing.T, portBase int, certsFrom string) *testCell {
	t.Helper()
	data := t.TempDir()
	if certsFrom != "" {
		// cp -a, as a person copying a cell would: keys keep their mode.
		if out, err := exec.Command("cp", "-a", certsFrom, filepath.Join(data, "certs")).CombinedOutput(); err != nil {
			t.Fatalf("copy the certs: %v\n%s", err, out)
		}
	}
	c := startCell(t, cellOptions{agents: 1, portBase: portBase, data: data})
	if out, code := c.run(t, "job", "submit", "examples/hello.jsonnet", "--wait"); code != 0 {
		t.Fatalf("submit hello: exit %d\n%s", code, out)
	}
	return c
}
