package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/corralhq/corral/agent/cgroup"
)

// A master killed with SIGKILL leaves its replays' and its Infrastore's
// cgroups behind; the next master removes those of masters that are gone,
// and only the empty ones: a live master's, and one holding a process, are
// left alone.
func TestSweepRemovesOnlyDeadMastersEmptyCgroups(t *testing.T) {
	parent := fmt.Sprintf("corral-sweep-test-%d", os.Getpid())
	mgr, note, err := cgroup.Detect("auto", parent)
	if err != nil || mgr.Mode() == cgroup.ModeSampling {
		t.Fatalf("this test needs cgroups (v1 or v2): %v %s", err, note)
	}
	t.Cleanup(func() { // the parent, in each hierarchy, after its children
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent)
		for _, d := range append(dirs, "/sys/fs/cgroup/"+parent) {
			_ = os.Remove(d)
		}
	})
	// A pid that is gone: a child that has exited and been reaped.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := gone.Process.Pid
	busy := exec.Command("sleep", "60")
	names := map[string]bool{ // name -> still there after the sweep
		fmt.Sprintf("master-%d", dead):        false,
		fmt.Sprintf("master-%d-sim-3", dead):  false,
		fmt.Sprintf("master-%d-sim-4", dead):  true, // holds a process
		fmt.Sprintf("master-%d", os.Getpid()): true, // this master's own
		fmt.Sprintf("master-%d-sim-1", 1):     true, // pid 1 lives
		"other":                               true,
	}
	t.Cleanup(func() {
		_ = busy.Process.Kill()
		_ = busy.Wait()
		for n := range names {
			if c, err := mgr.Open(n); err == nil {
				_ = c.Destroy()
			}
		}
	})
	for n := range names {
		if _, err := mgr.Create(n, cgroup.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := mgr.Open(fmt.Sprintf("master-%d-sim-4", dead))
	if err != nil {
		t.Fatal(err)
	}
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range c.JoinFiles() {
		if err := os.WriteFile(f, []byte(fmt.Sprint(busy.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sweepDeadMasters(mgr, slog.New(slog.NewTextHandler(io.Discard, nil)))
	left, err := mgr.List()
	if err != nil {
		t.Fatal(err)
	}
	for n, stays := range names {
		if got := slices.Contains(left, n); got != stays {
			t.Errorf("%s: there after the sweep %v, want %v", n, got, stays)
		}
	}
}
