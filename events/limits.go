package events

import (
	"math/bits"
	"strings"
)

// What one task may ask for, read alike by the master's validation (package
// commands) and by the agent that runs it (package agent), so that the
// master never admits a task its agents refuse to start.
//
// The ceilings keep every sum the cell keeps exact: a job's total (the
// per-task ceiling times MaxTasksPerJob) and every user's charge per band
// (admitted only while it stays at most MaxTotal) fit an int64 with room to
// spare, and every sum is checked besides (AddChecked, MulChecked).
const (
	// MinTaskMemoryBytes: below this not even the shell that joins the
	// task's container can run.
	MinTaskMemoryBytes = 4 << 20
	// MaxTaskCPUMilli: 100,000 cores.
	MaxTaskCPUMilli = 100_000 * 1000
	// MaxTaskMemoryBytes: 64 TiB.
	MaxTaskMemoryBytes = 64 << 40
	// MaxTaskDiskBytes: 1 PiB.
	MaxTaskDiskBytes = 1 << 50
	// MaxTaskGPUMilli: 100,000 GPUs.
	MaxTaskGPUMilli = 100_000 * 1000
	// MaxTaskPorts: ports one task may be given.
	MaxTaskPorts = 64
	// MaxTasksPerJob: tasks (and alloc instances) one job (alloc set) may
	// have.
	MaxTasksPerJob = 100_000
	// MaxTotal bounds any total the cell keeps in one dimension: a job's
	// or an alloc set's demand, a quota, a user's charge in a band, a
	// machine's capacity.
	MaxTotal = 1 << 62
	// MaxPortNameLen: a port name becomes the suffix of a PORT_<name>
	// variable.
	MaxPortNameLen = 32
)

// ReservedEnv reports whether the agent sets the variable name for every
// task itself (CORRAL_*, PORT, PORT_*, PWD), so a spec may not.
func ReservedEnv(name string) bool {
	return strings.HasPrefix(name, "CORRAL_") || name == "PORT" || strings.HasPrefix(name, "PORT_") || name == "PWD"
}

// AddChecked returns a+b, and false when the sum would leave [0, MaxTotal]
// for non-negative operands or overflow an int64 at all.
func AddChecked(a, b int64) (int64, bool) {
	s, carry := bits.Add64(uint64(a), uint64(b), 0)
	if a >= 0 && b >= 0 {
		return int64(s), carry == 0 && s <= MaxTotal
	}
	sum := a + b
	// Signed overflow: operands of one sign, a result of the other.
	if (a >= 0) == (b >= 0) && (sum >= 0) != (a >= 0) {
		return 0, false
	}
	return sum, true
}

// MulChecked returns a*n for a, n >= 0, and false when the product exceeds
// MaxTotal.
func MulChecked(a, n int64) (int64, bool) {
	if a < 0 || n < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(n))
	return int64(lo), hi == 0 && lo <= MaxTotal
}
