package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// V2 manages containers in the unified cgroup hierarchy.
type V2 struct {
	root   string // the cgroup2 mount
	parent string // root/<parent>
	rel    string // <parent>
}

// NewV2 makes the parent path and enables the memory and cpu controllers
// for the children of each cgroup on the way down to it.
func NewV2(root, parent string) (*V2, error) {
	if err := checkParent(parent); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	avail := strings.Fields(string(b))
	for _, want := range []string{"memory", "cpu"} {
		if !contains(avail, want) {
			return nil, fmt.Errorf("cgroup v2: controller %q is not available in %s (have %q)", want, root, avail)
		}
	}
	dir := root
	for _, p := range append([]string{""}, strings.Split(parent, "/")...) {
		dir = filepath.Join(dir, p)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		// A cgroup enables controllers for its children only; the root and
		// every cgroup down to parent must pass them on.
		if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory +cpu"); err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
	}
	return &V2{root: root, parent: dir, rel: parent}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (m *V2) Mode() Mode           { return ModeV2 }
func (m *V2) KernelEnforced() bool { return true }

func (m *V2) Create(name string, l Limits) (Container, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	c := &v2Container{name: name, dir: filepath.Join(m.parent, name)}
	if _, err := os.Stat(c.dir); err == nil {
		if err := c.Destroy(); err != nil {
			return nil, fmt.Errorf("cgroup v2: leftover %s: %w", name, err)
		}
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	if err := c.Update(l); err != nil {
		_ = c.Destroy()
		return nil, err
	}
	return c, nil
}

func (m *V2) Open(name string) (Container, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	c := &v2Container{name: name, dir: filepath.Join(m.parent, name)}
	if _, err := os.Stat(c.dir); err != nil {
		return nil, fmt.Errorf("cgroup v2: open %s: %w", name, err)
	}
	return c, nil
}

func (m *V2) List() ([]string, error) { return listDirs(m.parent) }

func (m *V2) RemoveParent() error { return removeUpward(m.root, m.rel) }

type v2Container struct {
	name string
	dir  string
}

func (c *v2Container) JoinFiles() []string  { return []string{filepath.Join(c.dir, "cgroup.procs")} }
func (c *v2Container) Attach(pid int) error { return nil }

func (c *v2Container) Update(l Limits) error {
	mem := "max"
	if l.MemoryBytes > 0 {
		mem = strconv.FormatInt(l.MemoryBytes, 10)
	}
	if err := writeFile(filepath.Join(c.dir, "memory.max"), mem); err != nil {
		return err
	}
	// Without this a task over its limit would be pushed into swap rather
	// than killed, where the machine has swap.
	if _, err := os.Stat(filepath.Join(c.dir, "memory.swap.max")); err == nil {
		if err := writeFile(filepath.Join(c.dir, "memory.swap.max"), "0"); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(c.dir, "cpu.weight"), strconv.FormatUint(SharesToWeight(l.CPUShares), 10)); err != nil {
		return err
	}
	quota := "max"
	if l.CPUQuotaMilli > 0 {
		quota = strconv.FormatInt(quotaUs(l.CPUQuotaMilli), 10)
	}
	return writeFile(filepath.Join(c.dir, "cpu.max"), quota+" "+strconv.Itoa(cfsPeriodUs))
}

func (c *v2Container) Stats() (Stats, error) {
	var s Stats
	cs, err := readKeyed(filepath.Join(c.dir, "cpu.stat"))
	if err != nil {
		return s, fmt.Errorf("cgroup v2: %w", err)
	}
	s.CPUNanos = uint64(max(cs["usage_usec"], 0)) * 1000
	cur, err := readInt(filepath.Join(c.dir, "memory.current"))
	if err != nil {
		return s, fmt.Errorf("cgroup v2: %w", err)
	}
	if st, err := readKeyed(filepath.Join(c.dir, "memory.stat")); err == nil {
		cur -= st["inactive_file"]
	}
	s.MemoryBytes = max(cur, 0)
	// memory.peak exists from Linux 5.19.
	if peak, err := readInt(filepath.Join(c.dir, "memory.peak")); err == nil {
		s.MemoryPeakBytes = peak
	}
	if ev, err := readKeyed(filepath.Join(c.dir, "memory.events")); err == nil {
		s.OOMKills = uint64(max(ev["oom_kill"], 0))
		s.LimitHits = uint64(max(ev["max"], 0))
	}
	return s, nil
}

func (c *v2Container) Pids() ([]int, error) {
	return readPids(filepath.Join(c.dir, "cgroup.procs"))
}

func (c *v2Container) Destroy() error {
	// cgroup.kill (Linux 5.14) kills the whole subtree at once, including
	// processes forked while the list is being read.
	if _, err := os.Stat(filepath.Join(c.dir, "cgroup.kill")); err == nil {
		_ = os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0o644)
	}
	return killAndRemove(c.Pids, []string{c.dir})
}
