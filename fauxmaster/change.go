package fauxmaster

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// Change is what a replay does differently from the recorded cell.
type Change struct {
	// RemovePercent of the window's machines (drawn by the seed) are
	// removed at its start and never registered during it.
	RemovePercent float64
	// Add registers machines at the window's start.
	Add []MachineGroup
	// Policy and PoolSize replace the scheduling pass's (empty, 0: the
	// defaults the cell runs with; PoolSize -1: every feasible machine).
	Policy   scheduler.Policy
	PoolSize int
}

// MachineGroup is Count machines of one shape.
type MachineGroup struct {
	Count      int
	Capacity   projections.Resources
	Attributes map[string]string
}

// IsZero says the change changes nothing.
func (c Change) IsZero() bool {
	return c.RemovePercent == 0 && len(c.Add) == 0 && c.Policy == "" && c.PoolSize == 0
}

// String is the change as the command line writes it.
func (c Change) String() string {
	var parts []string
	if c.RemovePercent > 0 {
		parts = append(parts, "--remove "+strconv.FormatFloat(c.RemovePercent, 'f', -1, 64)+"%")
	}
	for _, g := range c.Add {
		parts = append(parts, fmt.Sprintf("--add %dx%dc%dg", g.Count, g.Capacity.CPUMilli/1000, g.Capacity.MemoryBytes>>30))
	}
	if c.Policy != "" {
		parts = append(parts, "--policy "+string(c.Policy))
	}
	if c.PoolSize != 0 {
		parts = append(parts, "--pool "+strconv.Itoa(c.PoolSize))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func (c Change) removals(machines int) int {
	return int(math.Round(float64(machines) * c.RemovePercent / 100))
}

// ParseRemove reads "10%" (or "10").
func ParseRemove(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
		return 0, fmt.Errorf("remove: %q is not a percentage from 0 to 100", s)
	}
	return v, nil
}

var machineShape = regexp.MustCompile(`^(\d+)x(\d+(?:\.\d+)?)c(\d+(?:\.\d+)?)g(?:(\d+)gpu)?$`)

// maxAdded bounds what one --add may register: a replay holds every
// machine in memory.
const maxAdded = 100_000

// ParseMachines reads "200x32c128g": 200 machines of 32 cores and 128 GiB
// each, optionally "...g2gpu" for GPUs.
func ParseMachines(s string) (MachineGroup, error) {
	m := machineShape.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return MachineGroup{}, fmt.Errorf("add: %q is not COUNTxCORESc<GiB>g, e.g. 200x32c128g", s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 || n > maxAdded {
		return MachineGroup{}, fmt.Errorf("add: the count in %q must be 1 to %d", s, maxAdded)
	}
	cores, _ := strconv.ParseFloat(m[2], 64)
	gib, _ := strconv.ParseFloat(m[3], 64)
	if cores <= 0 || cores > 1e5 || gib <= 0 || gib > 1e6 {
		return MachineGroup{}, fmt.Errorf("add: %q: cores must be in (0, 100000] and GiB in (0, 1000000]", s)
	}
	g := MachineGroup{Count: n, Capacity: projections.Resources{CPUMilli: int64(cores * 1000), MemoryBytes: int64(gib * (1 << 30)),
		DiskBytes: 1 << 40, Ports: 1000}}
	if m[4] != "" {
		gpus, err := strconv.Atoi(m[4])
		if err != nil || gpus > 64 {
			return MachineGroup{}, fmt.Errorf("add: %q: at most 64 GPUs", s)
		}
		g.Capacity.GPUMilli = int64(gpus) * 1000
	}
	return g, nil
}
