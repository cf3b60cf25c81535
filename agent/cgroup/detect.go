package cgroup

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Mount is one cgroup filesystem from /proc/self/mountinfo.
type Mount struct {
	Path        string
	V2          bool
	Controllers []string // v1 only: the controllers of this hierarchy
}

// Mounts lists the cgroup filesystems of the calling process.
func Mounts() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ms []Mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := parseMountinfo(sc.Text()); ok {
			ms = append(ms, m)
		}
	}
	return ms, sc.Err()
}

// parseMountinfo reads one line: "id parent maj:min root mountpoint options
// [optional...] - fstype source superoptions".
func parseMountinfo(line string) (Mount, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return Mount{}, false
	}
	pf, qf := strings.Fields(pre), strings.Fields(post)
	if len(pf) < 5 || len(qf) < 3 {
		return Mount{}, false
	}
	switch qf[0] {
	case "cgroup2":
		return Mount{Path: pf[4], V2: true}, true
	case "cgroup":
		m := Mount{Path: pf[4]}
		for _, o := range strings.Split(qf[2], ",") {
			switch o {
			case "rw", "ro":
			default:
				if !strings.Contains(o, "=") {
					m.Controllers = append(m.Controllers, o)
				}
			}
		}
		return m, true
	}
	return Mount{}, false
}

// Detect returns the best manager that works on this machine: v2 when the
// unified hierarchy offers memory and cpu, v1 when memory, cpu and cpuacct
// are mounted and writable, and /proc sampling otherwise. want forces a mode
// ("" or "auto" for the best); a forced mode that does not work is an
// error. note says why better modes were not used, for the agent to log at
// start.
func Detect(want, parent string) (m Manager, note string, err error) {
	mounts, merr := Mounts()
	var why []string
	try := func(mode Mode) Manager {
		if merr != nil {
			why = append(why, fmt.Sprintf("%s: %v", mode, merr))
			return nil
		}
		var mgr Manager
		var err error
		switch mode {
		case ModeV2:
			mgr, err = detectV2(mounts, parent)
		case ModeV1:
			mgr, err = detectV1(mounts, parent)
		}
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", mode, err))
			return nil
		}
		return mgr
	}
	switch want {
	case "", "auto":
		for _, mode := range []Mode{ModeV2, ModeV1} {
			if mgr := try(mode); mgr != nil {
				return mgr, strings.Join(why, "; "), nil
			}
		}
		why = append(why, "memory limits are enforced by sampling /proc and killing")
		return NewSampling(), strings.Join(why, "; "), nil
	case string(ModeV1), string(ModeV2):
		if mgr := try(Mode(want)); mgr != nil {
			return mgr, "", nil
		}
		return nil, "", fmt.Errorf("cgroup mode %q cannot be used: %s", want, strings.Join(why, "; "))
	case string(ModeSampling), "none":
		return NewSampling(), "cgroups not used by configuration: memory limits are enforced by sampling /proc and killing", nil
	}
	return nil, "", fmt.Errorf("cgroup mode %q: want auto, v1, v2 or sampling", want)
}

func detectV2(mounts []Mount, parent string) (Manager, error) {
	for _, m := range mounts {
		if m.V2 {
			return NewV2(m.Path, parent)
		}
	}
	return nil, fmt.Errorf("no cgroup2 filesystem mounted")
}

func detectV1(mounts []Mount, parent string) (Manager, error) {
	roots := map[string]string{}
	for _, m := range mounts {
		for _, c := range m.Controllers {
			if _, ok := roots[c]; !ok {
				roots[c] = m.Path
			}
		}
	}
	for _, c := range []string{"memory", "cpu", "cpuacct"} {
		if roots[c] == "" {
			return nil, fmt.Errorf("controller %q is not mounted", c)
		}
	}
	return NewV1(roots["memory"], roots["cpu"], roots["cpuacct"], parent)
}
