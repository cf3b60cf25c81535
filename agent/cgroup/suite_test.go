package cgroup

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// features say which of the suite's promises a manager makes, as
// watermill's Pub/Sub suite asks each implementation for its Features.
type features struct {
	// Persistent: containers outlive the agent, so List and Open find
	// them after a restart (sampling keeps them in memory only).
	Persistent bool
	// Processes: real processes join and are counted, and Destroy kills
	// and removes (a fake cgroupfs has no kernel behind it).
	Processes bool
}

// managerUnderTest opens a manager on a fresh parent path that the test
// removes when it ends.
type managerUnderTest struct {
	name     string
	features features
	open     func(t *testing.T) Manager
}

// managersUnderTest are the three implementations on this host: v1 on its
// controllers; v2 on the kernel's unified hierarchy where it offers memory
// and cpu, else on a directory shaped like one; sampling over /proc.
func managersUnderTest() []managerUnderTest {
	v2, v2features := fakeV2, features{Persistent: true}
	if ms, err := Mounts(); err == nil {
		probe, err := detectV2(ms, "corral-test-probe")
		if err == nil {
			_ = syscall.Rmdir(probe.(*V2).parent)
			v2, v2features = realV2(ms), features{Persistent: true, Processes: true}
		}
	}
	return []managerUnderTest{
		{"v1", features{Persistent: true, Processes: true}, realV1},
		{"v2", v2features, v2},
		{"sampling", features{Processes: true}, func(*testing.T) Manager { return NewSampling() }},
	}
}

func realV1(t *testing.T) Manager {
	mem, cpu, cpuacct := v1Roots(t)
	m, err := NewV1(mem, cpu, cpuacct, testParent(t, mem, cpu, cpuacct))
	if err != nil {
		noCgroups(t, "cgroup v1 not writable: %v", err)
	}
	return m
}

func realV2(ms []Mount) func(t *testing.T) Manager {
	return func(t *testing.T) Manager {
		var root string
		for _, m := range ms {
			if m.V2 {
				root = m.Path
			}
		}
		m, err := NewV2(root, testParent(t, root))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

func fakeV2(t *testing.T) Manager {
	root := t.TempDir()
	write(t, filepath.Join(root, "cgroup.controllers"), "cpu memory\n")
	m, err := NewV2(root, "corral/test")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestManagers runs one suite over every Manager: what the agent relies on
// whichever the host gives it.
func TestManagers(t *testing.T) {
	for _, mt := range managersUnderTest() {
		t.Run(mt.name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				need features
				fn   func(t *testing.T, m Manager)
			}{
				{"RefusesBadNames", features{}, testRefusesBadNames},
				{"UpdatesLimits", features{}, testUpdatesLimits},
				{"OpenAndListFindContainers", features{Persistent: true}, testOpenAndList},
				{"ProcessesJoinAndAreCounted", features{Processes: true}, testProcessesCounted},
				{"DestroyKillsEveryProcess", features{Processes: true}, testDestroyKills},
				{"CreateReplacesALeftover", features{Persistent: true, Processes: true}, testCreateReplaces},
			} {
				if tc.need.Persistent && !mt.features.Persistent || tc.need.Processes && !mt.features.Processes {
					continue // a promise this manager does not make
				}
				t.Run(tc.name, func(t *testing.T) {
					m := mt.open(t)
					if mt.features.Processes {
						t.Cleanup(func() { destroyAll(t, m) })
					}
					tc.fn(t, m)
				})
			}
		})
	}
}

// destroyAll removes what a test left under the manager's parent.
func destroyAll(t *testing.T, m Manager) {
	names, _ := m.List()
	for _, n := range names {
		if c, err := m.Open(n); err == nil {
			if err := c.Destroy(); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	}
}

func testRefusesBadNames(t *testing.T, m Manager) {
	for _, name := range []string{"", "../escape", "a/b", ".hidden", strings.Repeat("x", 201)} {
		if _, err := m.Create(name, Limits{}); err == nil || !strings.Contains(err.Error(), "name") {
			t.Errorf("Create(%q) = %v, want an error naming the name", name, err)
		}
		if _, err := m.Open(name); err == nil {
			t.Errorf("Open(%q) succeeded", name)
		}
	}
	if names, err := m.List(); err != nil || len(names) != 0 {
		t.Errorf("List() after refusals = %v, %v; want nothing", names, err)
	}
}

func testUpdatesLimits(t *testing.T, m Manager) {
	c, err := m.Create("limits", Limits{MemoryBytes: 64 << 20, CPUShares: 1024, CPUQuotaMilli: 1500})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []Limits{{MemoryBytes: 128 << 20, CPUShares: 2, CPUQuotaMilli: 1}, {}} {
		if err := c.Update(l); err != nil {
			t.Errorf("Update(%+v): %v", l, err)
		}
	}
}

func testOpenAndList(t *testing.T, m Manager) {
	for _, n := range []string{"b", "a"} {
		if _, err := m.Create(n, Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	if names, err := m.List(); err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("List() = %v, %v; want [a b]", names, err)
	}
	c, err := m.Open("a")
	if err != nil || c == nil {
		t.Fatalf("Open(a) = %v, %v", c, err)
	}
	if _, err := m.Open("missing"); err == nil {
		t.Error("Open of a container never created succeeded")
	}
}

// runIn creates the container name, starts script in it and waits until
// the container holds the shell and at least procs processes in all. The
// returned channel closes when the shell has exited.
func runIn(t *testing.T, m Manager, name, script string, procs int) (Container, *exec.Cmd, <-chan struct{}) {
	t.Helper()
	c, err := m.Create(name, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := startIn(t, c, "/bin/sh", "-c", script)
	done := waitIn(cmd)
	eventually(t, 2*time.Second, func() string {
		if pids, err := c.Pids(); err != nil || len(pids) < procs || !slices.Contains(pids, cmd.Process.Pid) {
			return fmt.Sprintf("Pids() = %v, %v; want the shell %d among %d or more", pids, err, cmd.Process.Pid, procs)
		}
		return ""
	})
	return c, cmd, done
}

func testProcessesCounted(t *testing.T, m Manager) {
	// A busy child in the process group: counted with its parent.
	c, _, done := runIn(t, m, "busy", "while :; do :; done & wait", 2)
	t.Cleanup(func() { _ = c.Destroy(); <-done })
	eventually(t, 5*time.Second, func() string {
		if st, err := c.Stats(); err != nil || st.CPUNanos == 0 {
			return fmt.Sprintf("Stats() = %+v, %v; want CPU time", st, err)
		}
		return ""
	})
}

func testDestroyKills(t *testing.T, m Manager) {
	child := "sleep 30 & wait"
	if m.KernelEnforced() {
		// A cgroup holds a process that left its process group too.
		child = "setsid sleep 30 & wait"
	}
	c, _, done := runIn(t, m, "left", child, 2)
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the container's processes survived Destroy")
	}
	if names, _ := m.List(); slices.Contains(names, "left") {
		t.Errorf("List() after Destroy = %v", names)
	}
}

func testCreateReplaces(t *testing.T, m Manager) {
	_, _, done := runIn(t, m, "again", "sleep 30", 1)
	c, err := m.Create("again", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("a leftover container's process survived Create")
	}
	if pids, err := c.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("Pids() of the new container = %v, %v; want none", pids, err)
	}
}

// waitIn reaps cmd; the channel closes when it has exited.
func waitIn(cmd *exec.Cmd) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		var ee *exec.ExitError
		if err := cmd.Wait(); err != nil && !errors.As(err, &ee) {
			panic(err)
		}
		close(done)
	}()
	return done
}

// eventually polls cond until it returns "" or d passes, then fails with
// its last complaint. It is internal/testkit.Eventually's loop, kept here
// because testkit imports this package.
func eventually(t *testing.T, d time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(why)
		}
		<-tick.C
	}
}
