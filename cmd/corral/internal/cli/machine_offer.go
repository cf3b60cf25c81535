package cli

import (
	"bufio"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
)

// machineOverride is what --machine-cpu and --machine-memory set; zero
// fields keep the machine's share of this host.
type machineOverride struct{ cpuMilli, memoryBytes int64 }

// machineOffer reads --machine-cpu and --machine-memory: each, when given,
// must be a positive quantity.
func machineOffer(cpu, memory string) (machineOverride, error) {
	var o machineOverride
	if cpu != "" {
		v, err := commands.ParseMilli(cpu)
		if err != nil {
			return o, usageErr("--machine-cpu: %v", err)
		}
		if v <= 0 {
			return o, usageErr("--machine-cpu %q: want more than 0", cpu)
		}
		o.cpuMilli = v
	}
	if memory != "" {
		v, err := commands.ParseBytes(memory)
		if err != nil {
			return o, usageErr("--machine-memory: %v", err)
		}
		if v <= 0 {
			return o, usageErr("--machine-memory %q: want more than 0", memory)
		}
		o.memoryBytes = v
	}
	return o, nil
}

// fill sets in share what the operator chose, and returns it.
func (o machineOverride) fill(share *events.Resources) *events.Resources {
	if o.cpuMilli > 0 {
		share.CpuMilli = o.cpuMilli
	}
	if o.memoryBytes > 0 {
		share.MemoryBytes = o.memoryBytes
	}
	return share
}

// machineShare is what each of n machines offers: its share of this
// machine's cores, memory and the data directory's free disk.
func machineShare(dir string, n int) *events.Resources {
	r := &events.Resources{CpuMilli: int64(runtime.NumCPU()) * 1000 / int64(n)}
	if mem := memTotal(); mem > 0 {
		r.MemoryBytes = mem / int64(n)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil {
		r.DiskBytes = int64(st.Bavail) * st.Bsize / int64(n)
	}
	return r
}

// memTotal reads MemTotal from /proc/meminfo, 0 when it cannot.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseMemTotal(f)
}

func parseMemTotal(r io.Reader) int64 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
