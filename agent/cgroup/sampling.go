package cgroup

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/corralhq/corral/agent/internal/procfs"
)

// Sampling follows each task's process group in /proc. The kernel enforces
// nothing: the caller compares Stats with the limit and kills.
//
// A process that leaves its process group (setsid) escapes it; cgroups exist
// because of that.
type Sampling struct {
	mu       sync.Mutex
	scanned  time.Time
	byGroup  map[int][]procfs.Stat
	maxStale time.Duration
}

// NewSampling returns the /proc sampling implementation.
func NewSampling() *Sampling { return &Sampling{maxStale: 100 * time.Millisecond} }

func (m *Sampling) Mode() Mode           { return ModeSampling }
func (m *Sampling) KernelEnforced() bool { return false }

func (m *Sampling) Create(name string, l Limits) (Container, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return &samplingContainer{m: m, name: name}, nil
}

func (m *Sampling) Open(name string) (Container, error) { return m.Create(name, Limits{}) }

// List finds nothing: sampling containers exist only in the agent's memory.
func (m *Sampling) List() ([]string, error) { return nil, nil }

// RemoveParent has nothing to remove: sampling makes no cgroups.
func (m *Sampling) RemoveParent() error { return nil }

// group returns the live processes of process group pgid. One scan of /proc
// serves every container sampled within maxStale, so sampling N tasks costs
// one scan, not N.
func (m *Sampling) group(pgid int) ([]procfs.Stat, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byGroup == nil || time.Since(m.scanned) > m.maxStale {
		pids, err := procfs.Pids()
		if err != nil {
			return nil, fmt.Errorf("cgroup sampling: %w", err)
		}
		by := map[int][]procfs.Stat{}
		for _, p := range pids {
			st, err := procfs.ReadStat(p)
			if err != nil || !st.Alive() {
				continue
			}
			by[st.Pgrp] = append(by[st.Pgrp], st)
		}
		m.byGroup, m.scanned = by, time.Now()
	}
	return m.byGroup[pgid], nil
}

// invalidate forces the next sample to rescan, e.g. after a kill.
func (m *Sampling) invalidate() {
	m.mu.Lock()
	m.byGroup = nil
	m.mu.Unlock()
}

type samplingContainer struct {
	m    *Sampling
	name string

	mu   sync.Mutex
	pgid int
	cpu  uint64 // ticks; kept monotonic as processes come and go
	peak int64
}

func (c *samplingContainer) JoinFiles() []string   { return nil }
func (c *samplingContainer) Update(l Limits) error { return nil }

// Attach follows pid's process group: the launcher makes every task process
// the leader of its own group.
func (c *samplingContainer) Attach(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("cgroup sampling: pid %d: want > 0", pid)
	}
	c.mu.Lock()
	c.pgid = pid
	c.mu.Unlock()
	c.m.invalidate()
	return nil
}

func (c *samplingContainer) Stats() (Stats, error) {
	c.mu.Lock()
	pgid := c.pgid
	c.mu.Unlock()
	if pgid == 0 {
		return Stats{}, errors.New("cgroup sampling: no process attached")
	}
	procs, err := c.m.group(pgid)
	if err != nil {
		return Stats{}, err
	}
	var cpu uint64
	var rss int64
	for _, p := range procs {
		cpu += p.CPUTicks()
		rss += p.RSSBytes
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cpu = max(c.cpu, cpu)
	c.peak = max(c.peak, rss)
	return Stats{
		CPUNanos:        c.cpu * uint64(time.Second/procfs.ClockTicks),
		MemoryBytes:     rss,
		MemoryPeakBytes: c.peak,
	}, nil
}

func (c *samplingContainer) Pids() ([]int, error) {
	c.mu.Lock()
	pgid := c.pgid
	c.mu.Unlock()
	if pgid == 0 {
		return nil, nil
	}
	c.m.invalidate()
	procs, err := c.m.group(pgid)
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.Pid
	}
	return pids, err
}

func (c *samplingContainer) Destroy() error {
	c.mu.Lock()
	pgid := c.pgid
	c.mu.Unlock()
	if pgid > 0 {
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("cgroup sampling: kill group %d: %w", pgid, err)
		}
		c.m.invalidate()
	}
	return nil
}
