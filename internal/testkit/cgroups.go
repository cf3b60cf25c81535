package testkit

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/cgroup"
)

// RemoveCgroups removes the cgroups under top in every hierarchy, killing
// what still runs in them, deepest first (a cgroup with children cannot be
// removed), and fails the test when one is left behind.
func RemoveCgroups(t testing.TB, top string) {
	t.Helper()
	ms, err := cgroup.Mounts()
	if err != nil {
		return
	}
	for _, m := range ms {
		root := filepath.Join(m.Path, top)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			removed := func() bool {
				if pids, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
					for _, f := range strings.Fields(string(pids)) {
						if pid, err := strconv.Atoi(f); err == nil {
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
				err := syscall.Rmdir(d)
				return err == nil || err == syscall.ENOENT
			}
			// The killed processes leave the cgroup when the kernel has
			// reaped them: until then it is busy.
			Poll(2*time.Second, removed)
		}
		if _, err := os.Stat(root); err == nil {
			t.Errorf("test cgroup %s left behind", root)
		}
	}
}
