package cli

import (
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/spf13/cobra"
)

// resourceFlags are --cpu, --memory, --disk and --ports.
type resourceFlags struct{ cpu, memory, disk string }

func (r *resourceFlags) add(c *cobra.Command, what string) {
	c.Flags().StringVar(&r.cpu, "cpu", "", what+" CPU: cores (2, 0.5) or millicores (500m)")
	c.Flags().StringVar(&r.memory, "memory", "", what+" memory: 8GiB, 512MiB, ...")
	c.Flags().StringVar(&r.disk, "disk", "", what+" disk: 100GiB, ...")
}

func (r *resourceFlags) resources(ports int32) (*events.Resources, error) {
	out := &events.Resources{Ports: ports}
	var err error
	if r.cpu != "" {
		if out.CpuMilli, err = commands.ParseMilli(r.cpu); err != nil {
			return nil, usageErr("--cpu: %v", err)
		}
	}
	if r.memory != "" {
		if out.MemoryBytes, err = commands.ParseBytes(r.memory); err != nil {
			return nil, usageErr("--memory: %v", err)
		}
	}
	if r.disk != "" {
		if out.DiskBytes, err = commands.ParseBytes(r.disk); err != nil {
			return nil, usageErr("--disk: %v", err)
		}
	}
	return out, nil
}
