package commands

import (
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// Sched is r as the scheduler's resource vector.
func Sched(r projections.Resources) scheduler.Resources {
	return scheduler.Resources{scheduler.CPU: r.CPUMilli, scheduler.Memory: r.MemoryBytes, scheduler.Disk: r.DiskBytes,
		scheduler.GPU: r.GPUMilli, scheduler.Ports: r.Ports}
}

// FromSched is the scheduler's resource vector as the projection's.
func FromSched(r scheduler.Resources) projections.Resources {
	return projections.Resources{CPUMilli: r[scheduler.CPU], MemoryBytes: r[scheduler.Memory], DiskBytes: r[scheduler.Disk],
		GPUMilli: r[scheduler.GPU], Ports: r[scheduler.Ports]}
}
