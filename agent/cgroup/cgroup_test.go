package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testParent returns a fresh parent path under the corral-test- prefix and
// removes it from every hierarchy when the test ends.
func testParent(t *testing.T, roots ...string) string {
	t.Helper()
	parent := fmt.Sprintf("corral-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		for _, r := range roots {
			_ = syscall.Rmdir(filepath.Join(r, parent))
		}
	})
	return parent
}

func v1Roots(t *testing.T) (mem, cpu, cpuacct string) {
	t.Helper()
	ms, err := Mounts()
	if err != nil {
		noCgroups(t, "no mountinfo: %v", err)
	}
	roots := map[string]string{}
	for _, m := range ms {
		for _, c := range m.Controllers {
			roots[c] = m.Path
		}
	}
	if roots["memory"] == "" || roots["cpu"] == "" || roots["cpuacct"] == "" {
		noCgroups(t, "cgroup v1 memory, cpu and cpuacct are not all mounted")
	}
	return roots["memory"], roots["cpu"], roots["cpuacct"]
}

// startIn starts argv inside c the way the agent does: a shell writes its
// own pid into the join files, then execs the command.
func startIn(t *testing.T, c Container, argv ...string) *exec.Cmd {
	t.Helper()
	script := `n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"`
	args := append([]string{"-c", script, "sh", fmt.Sprint(len(c.JoinFiles()))}, c.JoinFiles()...)
	cmd := exec.Command("/bin/sh", append(args, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func TestV1MemoryLimitKillsAndCountsOOM(t *testing.T) {
	mem, cpu, cpuacct := v1Roots(t)
	parent := testParent(t, mem, cpu, cpuacct)
	m, err := NewV1(mem, cpu, cpuacct, parent)
	if err != nil {
		noCgroups(t, "cgroup v1 not writable: %v", err)
	}
	c, err := m.Create("oom", Limits{MemoryBytes: 32 << 20, CPUShares: 64, CPUQuotaMilli: 500})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })

	for file, want := range map[string]string{
		filepath.Join(mem, parent, "oom", "memory.limit_in_bytes"): "33554432",
		filepath.Join(cpu, parent, "oom", "cpu.shares"):            "64",
		filepath.Join(cpu, parent, "oom", "cpu.cfs_quota_us"):      "50000",
	} {
		if got := readTrim(t, file); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}

	// The shell joins the container itself, then waits a second before it
	// eats memory, so a loaded host cannot let the OOM kill come before the
	// look.
	cmd := startIn(t, c, "/bin/sh", "-c", "sleep 1; exec tail /dev/zero")
	eventually(t, time.Second, func() string {
		pids, err := c.Pids()
		if err != nil || !slices.Contains(pids, cmd.Process.Pid) {
			return fmt.Sprintf("Pids() = %v, %v; want it to hold %d", pids, err, cmd.Process.Pid)
		}
		return ""
	})
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("wait: %v, want killed", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("exit %v, want SIGKILL", ws)
	}
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.OOMKills < 1 || st.LimitHits < 1 {
		t.Errorf("Stats = %+v, want an OOM kill and limit hits", st)
	}
	if st.MemoryPeakBytes < 30<<20 {
		t.Errorf("peak %d, want near the 32 MiB limit", st.MemoryPeakBytes)
	}
	if st.CPUNanos == 0 {
		t.Errorf("no CPU time accounted")
	}
	names, err := m.List()
	if err != nil || !slices.Equal(names, []string{"oom"}) {
		t.Errorf("List() = %v, %v", names, err)
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mem, parent, "oom")); !os.IsNotExist(err) {
		t.Errorf("container still exists after Destroy: %v", err)
	}
}

// The v2 implementation is exercised against a directory shaped like a
// cgroup2 mount: the files it writes are checked and the files the kernel
// would write are faked.
func TestV2AgainstFakeCgroupfs(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	m, err := NewV2(root, "corral/m1")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"", "corral", "corral/m1"} {
		if got := readTrim(t, filepath.Join(root, d, "cgroup.subtree_control")); got != "+memory +cpu" {
			t.Errorf("%s/cgroup.subtree_control = %q", d, got)
		}
	}
	c, err := m.Create("alice.web.3.1", Limits{MemoryBytes: 64 << 20, CPUShares: 1024, CPUQuotaMilli: 1500})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "corral/m1/alice.web.3.1")
	for file, want := range map[string]string{
		"memory.max": "67108864",
		"cpu.weight": "39",
		"cpu.max":    "150000 100000",
	} {
		if got := readTrim(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if got := c.JoinFiles(); !slices.Equal(got, []string{filepath.Join(dir, "cgroup.procs")}) {
		t.Errorf("JoinFiles() = %v", got)
	}
	if err := c.Update(Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, filepath.Join(dir, "memory.max")); got != "max" {
		t.Errorf("memory.max without limit = %q", got)
	}
	if got := readTrim(t, filepath.Join(dir, "cpu.max")); got != "max 100000" {
		t.Errorf("cpu.max without quota = %q", got)
	}

	write(t, filepath.Join(dir, "cpu.stat"), "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
	write(t, filepath.Join(dir, "memory.current"), "50000000\n")
	write(t, filepath.Join(dir, "memory.stat"), "anon 40000000\nfile 10000000\ninactive_file 8000000\n")
	write(t, filepath.Join(dir, "memory.peak"), "60000000\n")
	write(t, filepath.Join(dir, "memory.events"), "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\n")
	write(t, filepath.Join(dir, "cgroup.procs"), "101\n102\n")
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{CPUNanos: 2500000000, MemoryBytes: 42000000, MemoryPeakBytes: 60000000, OOMKills: 1, LimitHits: 12}
	if st != want {
		t.Errorf("Stats() = %+v, want %+v", st, want)
	}
	if pids, _ := c.Pids(); !slices.Equal(pids, []int{101, 102}) {
		t.Errorf("Pids() = %v", pids)
	}
	if names, _ := m.List(); !slices.Equal(names, []string{"alice.web.3.1"}) {
		t.Errorf("List() = %v", names)
	}
	if _, err := m.Open("alice.web.3.1"); err != nil {
		t.Errorf("Open: %v", err)
	}
	if _, err := m.Open("nope"); err == nil {
		t.Errorf("Open of a missing container succeeded")
	}
}

func TestV2RefusesMissingControllers(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "cgroup.controllers"), "hugetlb\n")
	_, err := NewV2(root, "corral")
	if err == nil || !strings.Contains(err.Error(), `"memory" is not available`) {
		t.Fatalf("NewV2 = %v, want a missing-controller error", err)
	}
	if _, err := os.Stat(filepath.Join(root, "corral")); !os.IsNotExist(err) {
		t.Errorf("NewV2 created the parent despite refusing")
	}
}

// Sampling sums a process group's memory: a child's counts with its
// parent's (the suite checks the rest of its promises).
func TestSamplingFollowsProcessGroup(t *testing.T) {
	m := NewSampling()
	c, _, done := runIn(t, m, "s", `python3 -c "b=bytearray(40<<20); b[::4096]=b'x'*len(b[::4096]); import time; time.sleep(30)" & wait`, 2)
	t.Cleanup(func() { _ = c.Destroy(); <-done })
	eventually(t, 5*time.Second, func() string {
		if st, err := c.Stats(); err != nil || st.MemoryBytes <= 40<<20 {
			return fmt.Sprintf("Stats() = %+v, %v; want more than 40 MiB", st, err)
		}
		return ""
	})
	if m.KernelEnforced() {
		t.Error("sampling claims kernel enforcement")
	}
}

func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Mount
		ok   bool
	}{
		{"35 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:13 - cgroup cgroup rw,memory", Mount{Path: "/sys/fs/cgroup/memory", Controllers: []string{"memory"}}, true},
		{"36 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct", Mount{Path: "/sys/fs/cgroup/cpu,cpuacct", Controllers: []string{"cpu", "cpuacct"}}, true},
		{"37 25 0:32 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd", Mount{Path: "/sys/fs/cgroup/systemd", Controllers: []string{"xattr"}}, true},
		{"30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate", Mount{Path: "/sys/fs/cgroup", V2: true}, true},
		{"22 1 0:21 / /proc rw - proc proc rw", Mount{}, false},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, ok := parseMountinfo(tc.line)
			if ok != tc.ok || got.Path != tc.want.Path || got.V2 != tc.want.V2 || !slices.Equal(got.Controllers, tc.want.Controllers) {
				t.Errorf("parseMountinfo(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestDetectRefusesUnknownMode(t *testing.T) {
	if _, _, err := Detect("v3", "corral-test-x"); err == nil || !strings.Contains(err.Error(), "want auto, v1, v2 or sampling") {
		t.Fatalf("Detect(v3) = %v", err)
	}
	m, note, err := Detect("sampling", "corral-test-x")
	if err != nil || m.Mode() != ModeSampling || note == "" {
		t.Fatalf("Detect(sampling) = %v, %q, %v", m, note, err)
	}
}

func TestSharesToWeight(t *testing.T) {
	for shares, want := range map[uint64]uint64{0: 100, 2: 1, 1024: 39, 262144: 10000, 1 << 30: 10000} {
		if got := SharesToWeight(shares); got != want {
			t.Errorf("SharesToWeight(%d) = %d, want %d", shares, got, want)
		}
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// noCgroups skips a test that needs cgroup v1 where it is missing, except
// under CI=true: CI's machines have writable v1 controllers, so there a
// missing one is a failure, never a silent skip.
func noCgroups(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// An agent that ended its tasks leaves no cgroup behind: RemoveParent
// takes its machine's path and the cell's above it once they are empty,
// never a path that still holds a container or another machine, and never
// the first element, which other cells share.
func TestRemoveParentLeavesNothing(t *testing.T) {
	mem, cpu, cpuacct := v1Roots(t)
	top := testParent(t, mem, cpu, cpuacct)
	roots := []string{mem, cpu, cpuacct}
	t.Cleanup(func() { // what a failed run left, deepest first
		for _, p := range []string{"cell-1/m1/task", "cell-1/m1", "cell-1/m2", "cell-1"} {
			for _, r := range roots {
				_ = syscall.Rmdir(filepath.Join(r, top, p))
			}
		}
	})
	open := func(machine string) Manager {
		m, err := NewV1(mem, cpu, cpuacct, top+"/cell-1/"+machine)
		if err != nil {
			noCgroups(t, "cgroup v1 not writable: %v", err)
		}
		return m
	}
	exists := func(p string) bool {
		for _, r := range roots {
			if _, err := os.Stat(filepath.Join(r, top, p)); err != nil {
				return false
			}
		}
		return true
	}
	gone := func(p string) bool {
		for _, r := range roots {
			if _, err := os.Stat(filepath.Join(r, top, p)); err == nil {
				return false
			}
		}
		return true
	}
	m1, m2 := open("m1"), open("m2")
	c, err := m1.Create("task", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m1.RemoveParent(); err != nil || !exists("cell-1/m1/task") {
		t.Fatalf("RemoveParent with a container left: %v; want it and its parent kept, no error", err)
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := m1.RemoveParent(); err != nil || !gone("cell-1/m1") || !exists("cell-1/m2") {
		t.Fatalf("RemoveParent of m1 beside m2: %v; want m1 gone, the cell and m2 kept", err)
	}
	if err := m2.RemoveParent(); err != nil || !gone("cell-1") || !exists("") {
		t.Fatalf("RemoveParent of the last machine: %v; want the cell gone, %s kept", err, top)
	}
	if err := m2.RemoveParent(); err != nil {
		t.Errorf("RemoveParent again: %v; want nothing to do", err)
	}
}
