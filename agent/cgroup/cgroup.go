package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Mode names an implementation.
type Mode string

const (
	ModeV1       Mode = "v1"
	ModeV2       Mode = "v2"
	ModeSampling Mode = "sampling"
)

// Limits are a container's settings. Zero means "no limit" for memory and
// quota and the kernel's default for shares.
type Limits struct {
	MemoryBytes   int64
	CPUShares     uint64 // cgroup v1 scale, 2-262144; converted to cpu.weight on v2
	CPUQuotaMilli int64  // thousandths of a core the container may use per period
}

// Stats is what a container's processes use.
type Stats struct {
	CPUNanos        uint64 // cumulative since the container was created
	MemoryBytes     int64  // resident, without reclaimable file cache
	MemoryPeakBytes int64  // kernel high-water mark; 0 where unknown
	OOMKills        uint64 // processes the kernel killed for the memory limit
	LimitHits       uint64 // times usage reached the limit (v1 failcnt, v2 "max" events)
}

// Manager creates and finds containers under one parent path.
type Manager interface {
	Mode() Mode
	// KernelEnforced reports whether the kernel enforces memory limits. When
	// false the caller kills a task whose Stats exceed its limit.
	KernelEnforced() bool
	// Create makes a container. A leftover container of the same name is
	// destroyed first.
	Create(name string, l Limits) (Container, error)
	// Open finds an existing container, e.g. after an agent restart.
	Open(name string) (Container, error)
	// List names the containers under the parent path.
	List() ([]string, error)
	// RemoveParent removes the parent path once no container is left
	// under it, and each cgroup above it that is then empty, up to but not
	// including the path's first element (corral's, which other cells
	// share): an agent that ended its tasks leaves nothing behind. A path
	// that still holds a container (a task kept running for the next agent
	// to adopt) stays, and that is not an error.
	RemoveParent() error
}

// Container is one task process's resource container.
type Container interface {
	// JoinFiles are the files a new process writes its pid into to join.
	JoinFiles() []string
	// Attach tells the container its process's pid once started (the
	// sampling implementation follows the process group).
	Attach(pid int) error
	Update(l Limits) error
	Stats() (Stats, error)
	Pids() ([]int, error)
	// Destroy kills any process left and removes the container.
	Destroy() error
}

const cfsPeriodUs = 100000

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func checkName(name string) error {
	if !nameRE.MatchString(name) || len(name) > 200 {
		return fmt.Errorf("cgroup: name %q: want letters, digits, '.', '_' or '-', at most 200", name)
	}
	return nil
}

func checkParent(parent string) error {
	if parent == "" || filepath.IsAbs(parent) {
		return fmt.Errorf("cgroup: parent %q: want a relative path", parent)
	}
	for _, p := range strings.Split(parent, "/") {
		if err := checkName(p); err != nil {
			return fmt.Errorf("cgroup: parent %q: %w", parent, err)
		}
	}
	return nil
}

// quotaUs turns thousandths of a core into a CFS quota per period; the
// kernel refuses quotas below 1 ms.
func quotaUs(milli int64) int64 {
	return max(milli*cfsPeriodUs/1000, 1000)
}

// SharesToWeight maps v1 cpu.shares (2-262144) onto v2 cpu.weight
// (1-10000), as runc does.
func SharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 100
	}
	shares = min(max(shares, 2), 262144)
	return 1 + ((shares-2)*9999)/262142
}

func writeFile(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("cgroup: write %q to %s: %w", value, path, err)
	}
	return nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup: %s: %w", path, err)
	}
	return v, nil
}

// readKeyed reads "key value" lines (memory.stat, cpu.stat, memory.events,
// memory.oom_control).
func readKeyed(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			m[k] = n
		}
	}
	return m, sc.Err()
}

func readPids(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// killAndRemove SIGKILLs the processes of a container until its directories
// can be removed: rmdir fails with EBUSY while a process is still exiting.
func killAndRemove(pids func() ([]int, error), dirs []string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ps, _ := pids()
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		var busy error
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				busy = fmt.Errorf("cgroup: remove %s: %w", d, err)
			}
		}
		if busy == nil || time.Now().After(deadline) {
			return busy
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// removeUpward removes root/parent and then each of its ancestors below
// root/<parent's first element> while they are empty. A cgroup that still
// has children (EBUSY on cgroupfs) or a directory with files (ENOTEMPTY)
// ends the walk without an error; one already gone is skipped.
func removeUpward(root, parent string) error {
	parts := strings.Split(parent, "/")
	for i := len(parts); i > 1; i-- {
		dir := filepath.Join(root, filepath.Join(parts[:i]...))
		err := syscall.Rmdir(dir)
		switch {
		case err == nil, errors.Is(err, syscall.ENOENT):
		case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
			return nil
		default:
			return fmt.Errorf("cgroup: remove %s: %w", dir, err)
		}
	}
	return nil
}

func listDirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}
