package webui

import (
	"fmt"
	"html/template"
	"net/http"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/projections"
)

type machineData struct {
	M      *apipb.MachineView
	Rows   []resourceRow
	Chart  template.HTML
	Tasks  []*apipb.TaskView
	Pager  pager
	Allocs []allocRow
}

// resourceRow compares one resource's capacity with what is placed.
type resourceRow struct {
	Name                                   string
	Capacity, Limits, Reserved, Used, Free string
}

type allocRow struct {
	User, Set string
	Index     int32
	Resources string
	Used      string
}

func (h *Handler) machine(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	offset, err := intParam(r, "offset", 0)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	d := machineData{}
	var capacity, limits, reserved projections.Resources
	h.cfg.Cell.View(func(st *projections.State) {
		m := st.Machines[name]
		if m == nil {
			return
		}
		d.M = api.MachineView(m)
		d.M.DrainHolds = api.DrainHoldLines(st, m, h.cfg.Clock())
		capacity, limits, reserved = m.Capacity, m.Limits, m.Reserved
		for _, a := range m.Allocs() {
			d.Allocs = append(d.Allocs, allocRow{User: a.Set.User, Set: a.Set.Name, Index: a.Index,
				Resources: resources(a.Set.Resources.Proto()), Used: resources(a.Used.Proto())})
		}
	})
	if d.M == nil {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("machine %q is not registered", name))
		return
	}
	tasks, err := h.cfg.API.ListTasks(h.ctx(r), &apipb.ListTasksRequest{Machine: name, Offset: int32(offset), Limit: int32(h.cfg.PageSize)})
	if err != nil {
		h.failAPI(w, r, err)
		return
	}
	d.Tasks = tasks.Tasks
	d.Pager = newPager(r, "offset", offset, h.cfg.PageSize, int(tasks.Total))

	// Usage is known for CPU and memory only.
	d.Rows = []resourceRow{
		{"CPU (cores)", milli(capacity.CPUMilli), milli(limits.CPUMilli), milli(reserved.CPUMilli), cores(d.M.CpuCoresUsed), milli(capacity.CPUMilli - limits.CPUMilli)},
		{"memory", humanBytes(capacity.MemoryBytes), humanBytes(limits.MemoryBytes), humanBytes(reserved.MemoryBytes), humanBytes(d.M.MemoryBytesUsed), humanBytes(capacity.MemoryBytes - limits.MemoryBytes)},
		{"disk", humanBytes(capacity.DiskBytes), humanBytes(limits.DiskBytes), humanBytes(reserved.DiskBytes), "–", humanBytes(capacity.DiskBytes - limits.DiskBytes)},
		{"ports", num(capacity.Ports), num(limits.Ports), num(reserved.Ports), "–", num(capacity.Ports - limits.Ports)},
	}
	if capacity.GPUMilli != 0 {
		d.Rows = append(d.Rows, resourceRow{"GPU", milli(capacity.GPUMilli), milli(limits.GPUMilli), milli(reserved.GPUMilli), "–", milli(capacity.GPUMilli - limits.GPUMilli)})
	}
	share := func(v, c float64) float64 {
		if c <= 0 {
			return 0
		}
		return 100 * v / c
	}
	group := func(label string, l, res, used, c float64) barGroup {
		return barGroup{Label: label, Bars: []bar{
			{"limits", "limit", share(l, c)}, {"reservations", "reservation", share(res, c)}, {"usage", "usage", share(used, c)},
		}}
	}
	d.Chart = barChart{ID: "alloc", RowName: "resource", Title: "Share of capacity held by limits and reservations, and used",
		Unit: func(v float64) string { return fmt.Sprintf("%.0f%%", v) }, Capacity: 100,
		Groups: []barGroup{
			group("CPU", float64(limits.CPUMilli), float64(reserved.CPUMilli), d.M.CpuCoresUsed*1000, float64(capacity.CPUMilli)),
			group("memory", float64(limits.MemoryBytes), float64(reserved.MemoryBytes), float64(d.M.MemoryBytesUsed), float64(capacity.MemoryBytes)),
			group("disk", float64(limits.DiskBytes), float64(reserved.DiskBytes), 0, float64(capacity.DiskBytes)),
			group("ports", float64(limits.Ports), float64(reserved.Ports), 0, float64(capacity.Ports)),
		}}.HTML()
	h.render(w, r, "machine", page{Title: "Machine " + name, Nav: "cell", Data: d})
}
