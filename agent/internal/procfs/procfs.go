package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Root is the procfs mount; a variable so tests can point it at a fake.
var Root = "/proc"

// ClockTicks is USER_HZ, the unit of CPU times and start times in
// /proc/<pid>/stat. It is 100 on every Linux architecture Go supports.
const ClockTicks = 100

// PageSize is the unit of rss in /proc/<pid>/stat.
var PageSize = int64(os.Getpagesize())

// Stat is the part of /proc/<pid>/stat the agent uses.
type Stat struct {
	Pid        int
	State      byte // R, S, D, Z, T, ...
	PPid       int
	Pgrp       int
	UTime      uint64 // clock ticks
	STime      uint64
	CUTime     uint64 // of waited-for children
	CSTime     uint64
	StartTicks uint64 // since boot
	RSSBytes   int64
}

// Alive reports whether the process can still run: zombies and dead
// processes only wait to be reaped.
func (s Stat) Alive() bool { return s.State != 'Z' && s.State != 'X' && s.State != 'x' }

// CPUTicks is the process's own CPU time plus that of its reaped children.
func (s Stat) CPUTicks() uint64 { return s.UTime + s.STime + s.CUTime + s.CSTime }

// ErrNoProcess: no process has that pid.
var ErrNoProcess = errors.New("procfs: no such process")

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", Root, pid))
	if err != nil {
		// ESRCH: the process died while its file was being read.
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return Stat{}, ErrNoProcess
		}
		return Stat{}, err
	}
	return ParseStat(b)
}

// ParseStat parses the content of /proc/<pid>/stat. The command name is in
// parentheses and may itself contain spaces and parentheses, so fields are
// counted from the last ')'.
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	close := bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return Stat{}, fmt.Errorf("procfs: malformed stat %q", truncate(b))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("procfs: malformed pid in stat: %w", err)
	}
	f := strings.Fields(string(b[close+1:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 {
		return Stat{}, fmt.Errorf("procfs: stat has %d fields, want at least 24", len(f)+2)
	}
	num := func(n int) uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = strconv.ParseUint(f[n-3], 10, 64)
		return v
	}
	snum := func(n int) int64 {
		if err != nil {
			return 0
		}
		var v int64
		v, err = strconv.ParseInt(f[n-3], 10, 64)
		return v
	}
	s := Stat{Pid: pid, State: f[0][0]}
	s.PPid = int(snum(4))
	s.Pgrp = int(snum(5))
	s.UTime = num(14)
	s.STime = num(15)
	s.CUTime = uint64(max(snum(16), 0))
	s.CSTime = uint64(max(snum(17), 0))
	s.StartTicks = num(22)
	s.RSSBytes = snum(24) * PageSize
	if err != nil {
		return Stat{}, fmt.Errorf("procfs: malformed stat field: %w", err)
	}
	return s, nil
}

func truncate(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

// Pids lists the pids of every process.
func Pids() ([]int, error) {
	ents, err := os.ReadDir(Root)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Meminfo is the part of /proc/meminfo the agent uses, in bytes.
type Meminfo struct {
	Total, Available int64
}

// ReadMeminfo reads /proc/meminfo.
func ReadMeminfo() (Meminfo, error) {
	f, err := os.Open(Root + "/meminfo")
	if err != nil {
		return Meminfo{}, err
	}
	defer f.Close()
	var m Meminfo
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "MemTotal":
			dst = &m.Total
		case "MemAvailable":
			dst = &m.Available
		default:
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return Meminfo{}, fmt.Errorf("procfs: meminfo %s: %w", k, err)
		}
		*dst = n * 1024
	}
	if m.Total == 0 {
		return m, fmt.Errorf("procfs: meminfo has no MemTotal")
	}
	return m, sc.Err()
}

// BootID identifies the current boot: pids and start times from another
// boot mean nothing.
func BootID() string {
	b, err := os.ReadFile(Root + "/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
