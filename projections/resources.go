package projections

import (
	"fmt"
	"strings"

	"github.com/corralhq/corral/events"
)

// Resources is a vector of resource quantities held by value, so sums over
// thousands of tasks cost no allocation. It mirrors events.Resources.
type Resources struct {
	CPUMilli    int64 // thousandths of a core
	MemoryBytes int64
	DiskBytes   int64
	GPUMilli    int64 // thousandths of a GPU
	Ports       int64 // number of TCP ports
}

// ResourcesOf converts the catalogue's message; nil is the zero vector.
func ResourcesOf(r *events.Resources) Resources {
	if r == nil {
		return Resources{}
	}
	return Resources{CPUMilli: r.CpuMilli, MemoryBytes: r.MemoryBytes, DiskBytes: r.DiskBytes, GPUMilli: r.GpuMilli, Ports: int64(r.Ports)}
}

// Proto converts back to the catalogue's message.
func (r Resources) Proto() *events.Resources {
	return &events.Resources{CpuMilli: r.CPUMilli, MemoryBytes: r.MemoryBytes, DiskBytes: r.DiskBytes, GpuMilli: r.GPUMilli, Ports: int32(r.Ports)}
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{r.CPUMilli + o.CPUMilli, r.MemoryBytes + o.MemoryBytes, r.DiskBytes + o.DiskBytes, r.GPUMilli + o.GPUMilli, r.Ports + o.Ports}
}

// Sub returns r - o.
func (r Resources) Sub(o Resources) Resources {
	return Resources{r.CPUMilli - o.CPUMilli, r.MemoryBytes - o.MemoryBytes, r.DiskBytes - o.DiskBytes, r.GPUMilli - o.GPUMilli, r.Ports - o.Ports}
}

// Scale returns r * n.
func (r Resources) Scale(n int64) Resources {
	return Resources{r.CPUMilli * n, r.MemoryBytes * n, r.DiskBytes * n, r.GPUMilli * n, r.Ports * n}
}

// AddChecked returns r + o, and false when a dimension would pass
// events.MaxTotal or wrap: admission refuses such a sum rather than let a
// charge wrap negative.
func (r Resources) AddChecked(o Resources) (Resources, bool) {
	var ok [5]bool
	var out Resources
	out.CPUMilli, ok[0] = events.AddChecked(r.CPUMilli, o.CPUMilli)
	out.MemoryBytes, ok[1] = events.AddChecked(r.MemoryBytes, o.MemoryBytes)
	out.DiskBytes, ok[2] = events.AddChecked(r.DiskBytes, o.DiskBytes)
	out.GPUMilli, ok[3] = events.AddChecked(r.GPUMilli, o.GPUMilli)
	out.Ports, ok[4] = events.AddChecked(r.Ports, o.Ports)
	return out, ok == [5]bool{true, true, true, true, true}
}

// ScaleChecked returns r * n for r, n >= 0, and false when a dimension
// would pass events.MaxTotal.
func (r Resources) ScaleChecked(n int64) (Resources, bool) {
	var ok [5]bool
	var out Resources
	out.CPUMilli, ok[0] = events.MulChecked(r.CPUMilli, n)
	out.MemoryBytes, ok[1] = events.MulChecked(r.MemoryBytes, n)
	out.DiskBytes, ok[2] = events.MulChecked(r.DiskBytes, n)
	out.GPUMilli, ok[3] = events.MulChecked(r.GPUMilli, n)
	out.Ports, ok[4] = events.MulChecked(r.Ports, n)
	return out, ok == [5]bool{true, true, true, true, true}
}

// Saturate returns r with every dimension above events.MaxTotal cut to it:
// for totals that are reports (a cell's capacity), never admission.
func (r Resources) Saturate() Resources {
	c := func(v int64) int64 { return min(v, events.MaxTotal) }
	return Resources{c(r.CPUMilli), c(r.MemoryBytes), c(r.DiskBytes), c(r.GPUMilli), c(r.Ports)}
}

// satAdd adds non-negative quantities, cutting the sum at events.MaxTotal.
func satAdd(a, b int64) int64 {
	if s, ok := events.AddChecked(a, b); ok {
		return s
	}
	return events.MaxTotal
}

// LessEq reports whether r <= o in every dimension: r fits in o.
func (r Resources) LessEq(o Resources) bool {
	return r.CPUMilli <= o.CPUMilli && r.MemoryBytes <= o.MemoryBytes && r.DiskBytes <= o.DiskBytes &&
		r.GPUMilli <= o.GPUMilli && r.Ports <= o.Ports
}

// IsZero reports whether every quantity is zero.
func (r Resources) IsZero() bool { return r == Resources{} }

// Negative reports whether any quantity is below zero.
func (r Resources) Negative() bool {
	return r.CPUMilli < 0 || r.MemoryBytes < 0 || r.DiskBytes < 0 || r.GPUMilli < 0 || r.Ports < 0
}

// Exceeding names the dimensions in which r exceeds o, e.g. ["cpu", "memory"].
func (r Resources) Exceeding(o Resources) []string {
	var out []string
	if r.CPUMilli > o.CPUMilli {
		out = append(out, "cpu")
	}
	if r.MemoryBytes > o.MemoryBytes {
		out = append(out, "memory")
	}
	if r.DiskBytes > o.DiskBytes {
		out = append(out, "disk")
	}
	if r.GPUMilli > o.GPUMilli {
		out = append(out, "gpu")
	}
	if r.Ports > o.Ports {
		out = append(out, "ports")
	}
	return out
}

// String formats r for people: "cpu 1500m, memory 2GiB, disk 0, gpu 0, ports 2".
func (r Resources) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cpu %dm, memory %s, disk %s", r.CPUMilli, FormatBytes(r.MemoryBytes), FormatBytes(r.DiskBytes))
	if r.GPUMilli != 0 {
		fmt.Fprintf(&b, ", gpu %dm", r.GPUMilli)
	}
	fmt.Fprintf(&b, ", ports %d", r.Ports)
	return b.String()
}

// FormatBytes prints n in the largest binary unit that divides it exactly
// (2GiB, 1536MiB), so the numbers in messages can be pasted back into a spec.
func FormatBytes(n int64) string {
	if n == 0 {
		return "0"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for i < len(units)-1 && n%1024 == 0 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%d%s", n, units[i])
}
