package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// V1 manages containers in the cgroup v1 memory, cpu and cpuacct
// hierarchies. cpu and cpuacct may be mounted together; the roots are then
// the same directory.
type V1 struct {
	memory, cpu, cpuacct string // <mount>/<parent>
	parent               string // relative to each mount
	mounts               []string
}

// NewV1 makes the parent path in each hierarchy and checks it is writable.
func NewV1(memoryRoot, cpuRoot, cpuacctRoot, parent string) (*V1, error) {
	if err := checkParent(parent); err != nil {
		return nil, err
	}
	m := &V1{
		memory:  filepath.Join(memoryRoot, parent),
		cpu:     filepath.Join(cpuRoot, parent),
		cpuacct: filepath.Join(cpuacctRoot, parent),
		parent:  parent,
		mounts:  []string{memoryRoot, cpuRoot},
	}
	if cpuacctRoot != cpuRoot {
		m.mounts = append(m.mounts, cpuacctRoot)
	}
	for _, d := range m.roots() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v1: %w", err)
		}
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err != nil {
			return nil, fmt.Errorf("cgroup v1: %s is not a cgroup: %w", d, err)
		}
	}
	return m, nil
}

func (m *V1) roots() []string {
	if m.cpu == m.cpuacct {
		return []string{m.memory, m.cpu}
	}
	return []string{m.memory, m.cpu, m.cpuacct}
}

func (m *V1) Mode() Mode           { return ModeV1 }
func (m *V1) KernelEnforced() bool { return true }

func (m *V1) container(name string) *v1Container {
	c := &v1Container{name: name}
	for _, r := range m.roots() {
		c.dirs = append(c.dirs, filepath.Join(r, name))
	}
	c.memory = c.dirs[0]
	c.cpu = filepath.Join(m.cpu, name)
	c.cpuacct = filepath.Join(m.cpuacct, name)
	return c
}

func (m *V1) Create(name string, l Limits) (Container, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	c := m.container(name)
	if _, err := os.Stat(c.memory); err == nil {
		if err := c.Destroy(); err != nil {
			return nil, fmt.Errorf("cgroup v1: leftover %s: %w", name, err)
		}
	}
	for _, d := range c.dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			_ = c.Destroy()
			return nil, fmt.Errorf("cgroup v1: %w", err)
		}
	}
	if err := c.Update(l); err != nil {
		_ = c.Destroy()
		return nil, err
	}
	return c, nil
}

func (m *V1) Open(name string) (Container, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	c := m.container(name)
	for _, d := range c.dirs {
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("cgroup v1: open %s: %w", name, err)
		}
	}
	return c, nil
}

func (m *V1) List() ([]string, error) { return listDirs(m.memory) }

func (m *V1) RemoveParent() error {
	var errs []error
	for _, root := range m.mounts {
		errs = append(errs, removeUpward(root, m.parent))
	}
	return errors.Join(errs...)
}

type v1Container struct {
	name                 string
	dirs                 []string // one per hierarchy, memory first
	memory, cpu, cpuacct string
}

func (c *v1Container) JoinFiles() []string {
	files := make([]string, len(c.dirs))
	for i, d := range c.dirs {
		files[i] = filepath.Join(d, "cgroup.procs")
	}
	return files
}

func (c *v1Container) Attach(pid int) error { return nil }

func (c *v1Container) Update(l Limits) error {
	mem := "-1"
	if l.MemoryBytes > 0 {
		mem = strconv.FormatInt(l.MemoryBytes, 10)
	}
	if err := writeFile(filepath.Join(c.memory, "memory.limit_in_bytes"), mem); err != nil {
		return err
	}
	shares := l.CPUShares
	if shares == 0 {
		shares = 1024
	}
	if err := writeFile(filepath.Join(c.cpu, "cpu.shares"), strconv.FormatUint(shares, 10)); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(c.cpu, "cpu.cfs_period_us"), strconv.Itoa(cfsPeriodUs)); err != nil {
		return err
	}
	quota := "-1"
	if l.CPUQuotaMilli > 0 {
		quota = strconv.FormatInt(quotaUs(l.CPUQuotaMilli), 10)
	}
	return writeFile(filepath.Join(c.cpu, "cpu.cfs_quota_us"), quota)
}

func (c *v1Container) Stats() (Stats, error) {
	var s Stats
	cpu, err := readInt(filepath.Join(c.cpuacct, "cpuacct.usage"))
	if err != nil {
		return s, fmt.Errorf("cgroup v1: %w", err)
	}
	s.CPUNanos = uint64(max(cpu, 0))
	usage, err := readInt(filepath.Join(c.memory, "memory.usage_in_bytes"))
	if err != nil {
		return s, fmt.Errorf("cgroup v1: %w", err)
	}
	// Page cache the kernel can drop is not the task's to answer for.
	if st, err := readKeyed(filepath.Join(c.memory, "memory.stat")); err == nil {
		usage -= st["total_inactive_file"]
	}
	s.MemoryBytes = max(usage, 0)
	if peak, err := readInt(filepath.Join(c.memory, "memory.max_usage_in_bytes")); err == nil {
		s.MemoryPeakBytes = peak
	}
	if oc, err := readKeyed(filepath.Join(c.memory, "memory.oom_control")); err == nil {
		s.OOMKills = uint64(max(oc["oom_kill"], 0))
	}
	if f, err := readInt(filepath.Join(c.memory, "memory.failcnt")); err == nil {
		s.LimitHits = uint64(max(f, 0))
	}
	return s, nil
}

func (c *v1Container) Pids() ([]int, error) {
	seen := map[int]bool{}
	var pids []int
	var firstErr error
	for _, d := range c.dirs {
		ps, err := readPids(filepath.Join(d, "cgroup.procs"))
		if err != nil && !errors.Is(err, os.ErrNotExist) && firstErr == nil {
			firstErr = err
		}
		for _, p := range ps {
			if !seen[p] {
				seen[p] = true
				pids = append(pids, p)
			}
		}
	}
	return pids, firstErr
}

func (c *v1Container) Destroy() error { return killAndRemove(c.Pids, c.dirs) }
