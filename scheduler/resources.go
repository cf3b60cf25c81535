package scheduler

import (
	"fmt"
	"strings"

	"github.com/corralhq/corral/events"
)

// Dim names one resource dimension of a Resources vector.
type Dim int

const (
	CPU    Dim = iota // thousandths of a core
	Memory            // bytes
	Disk              // bytes
	GPU               // thousandths of a GPU, one scalar per machine
	Ports             // number of TCP ports
	NumDims
)

// ScoredDims are the dimensions packing policies look at (those below it). Ports are a count
// checked for feasibility only: they are plentiful and not worth packing.
const ScoredDims = Ports

var dimNames = [NumDims]string{"cpu", "memory", "disk", "gpu", "ports"}

func (d Dim) String() string {
	if d >= 0 && d < NumDims {
		return dimNames[d]
	}
	return fmt.Sprintf("dim(%d)", int(d))
}

// Resources is a fixed-size resource vector indexed by Dim:
// Resources{CPU: 500, Memory: 1 << 30}. It is a value; copying it is cheap.
type Resources [NumDims]int64

// ResourcesFromEvents converts the catalogue's message; nil is zero.
func ResourcesFromEvents(r *events.Resources) Resources {
	if r == nil {
		return Resources{}
	}
	return Resources{
		CPU:    r.GetCpuMilli(),
		Memory: r.GetMemoryBytes(),
		Disk:   r.GetDiskBytes(),
		GPU:    r.GetGpuMilli(),
		Ports:  int64(r.GetPorts()),
	}
}

// Events converts to the catalogue's message.
func (r Resources) Events() *events.Resources {
	return &events.Resources{
		CpuMilli:    r[CPU],
		MemoryBytes: r[Memory],
		DiskBytes:   r[Disk],
		GpuMilli:    r[GPU],
		Ports:       int32(r[Ports]),
	}
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	for d := range r {
		r[d] += o[d]
	}
	return r
}

// Sub returns r - o.
func (r Resources) Sub(o Resources) Resources {
	for d := range r {
		r[d] -= o[d]
	}
	return r
}

// Available is what new work may use on a machine, the one fit rule of
// the pass (the proposer) and of PlaceTasks (the applier): prod work
// counts the limits of what is there, so it never relies on reclaimed
// resources; other work counts reservations (Borg §5.5).
func Available(capacity, usedLimits, usedReserved Resources, prod bool) Resources {
	if prod {
		return capacity.Sub(usedLimits)
	}
	return capacity.Sub(usedReserved)
}

// Fits reports whether r fits within avail in every dimension.
func (r Resources) Fits(avail Resources) bool {
	return r[CPU] <= avail[CPU] && r[Memory] <= avail[Memory] && r[Disk] <= avail[Disk] &&
		r[GPU] <= avail[GPU] && r[Ports] <= avail[Ports]
}

// shortDim returns the first dimension in which r exceeds avail, or NumDims.
func (r Resources) shortDim(avail Resources) Dim {
	for d := Dim(0); d < NumDims; d++ {
		if r[d] > avail[d] {
			return d
		}
	}
	return NumDims
}

// IsZero reports whether every dimension is zero.
func (r Resources) IsZero() bool { return r == Resources{} }

// String prints the non-zero dimensions in human units:
// "cpu=1.5 memory=2GiB gpu=0.5".
func (r Resources) String() string {
	var b strings.Builder
	for d := Dim(0); d < NumDims; d++ {
		if r[d] == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(d.String())
		b.WriteByte('=')
		b.WriteString(FormatQuantity(d, r[d]))
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// FormatQuantity prints one quantity of dimension d in the unit people use:
// cores and GPUs as decimals, bytes in binary units, ports as a count.
func FormatQuantity(d Dim, v int64) string {
	switch d {
	case CPU, GPU:
		return trimFloat(float64(v) / 1000)
	case Memory, Disk:
		return formatBytes(v)
	}
	return fmt.Sprint(v)
}

func formatBytes(v int64) string {
	const (
		kib = 1 << 10
		mib = 1 << 20
		gib = 1 << 30
		tib = 1 << 40
	)
	switch {
	case v >= tib:
		return trimFloat(float64(v)/tib) + "TiB"
	case v >= gib:
		return trimFloat(float64(v)/gib) + "GiB"
	case v >= mib:
		return trimFloat(float64(v)/mib) + "MiB"
	case v >= kib:
		return trimFloat(float64(v)/kib) + "KiB"
	}
	return fmt.Sprintf("%dB", v)
}

// trimFloat prints at most one decimal for values of ten and more, two below:
// enough to read a hint, short enough to fit in a line.
func trimFloat(f float64) string {
	s := fmt.Sprintf("%.2f", f)
	if f >= 10 {
		s = fmt.Sprintf("%.1f", f)
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// The priority bands are defined once, in events (events/bands.go): the
// pass asks only whether a priority is prod and who may preempt whom.
const (
	// MinProdPriority is the lowest production priority: prod tasks count
	// the limits of the tasks already on a machine, non-prod tasks their
	// reservations.
	MinProdPriority = events.MinProdPriority
	// MaxPriority is the highest priority (monitoring).
	MaxPriority = events.MaxPriority
)

var (
	IsProd     = events.IsProd
	CanPreempt = events.CanPreempt
)
