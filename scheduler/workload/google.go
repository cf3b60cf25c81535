package workload

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/corralhq/corral/scheduler"
	"github.com/corralhq/corral/scheduler/googletrace"
)

// The public Google trace (clusterdata-2011-2) as a cell: its tasks'
// requests on the published machine mix (scheduler/googletrace).

// GoogleCellMachines is the cell's size in the trace.
const GoogleCellMachines = googletrace.CellMachines

// GoogleMachines builds n machines in the published mix, named g00000...,
// shuffled by seed.
func GoogleMachines(n int, seed uint64) []*scheduler.Machine {
	shapes := googletrace.Shapes(n, seed)
	out := make([]*scheduler.Machine, len(shapes))
	for i, c := range shapes {
		out[i] = &scheduler.Machine{Name: fmt.Sprintf("g%05d", i), Version: 1,
			Capacity: scheduler.Resources{scheduler.CPU: c[0], scheduler.Memory: c[1], scheduler.Disk: 1 << 40, scheduler.Ports: 1000}}
	}
	return out
}

// LoadGoogleTrace reads the task_events parts under dir (the trace's
// folder, or its task_events) and returns what the cell ran at the end of
// the last part: every task scheduled and not ended since, with its last
// request, pending again (the order of their submissions kept), on
// GoogleCellMachines machines of the published mix. Tasks waiting to be
// placed then are left out, as are tasks without a request. Like
// LoadWorkload, it touches the file system.
func LoadGoogleTrace(dir string) (*Workload, error) {
	type task struct {
		prio      int32
		cpu, mem  float64
		running   bool
		submitted int64
	}
	tasks := map[[2]int64]*task{}
	seq := int64(0)
	err := googletrace.ReadTaskEvents(dir, func(e googletrace.TaskEvent) error {
		k := [2]int64{e.JobID, int64(e.Index)}
		t := tasks[k]
		if t == nil {
			t = &task{}
			tasks[k] = t
		}
		if e.HasRequest {
			t.cpu, t.mem = e.CPU, e.Memory
		}
		t.prio = e.Priority
		switch e.Kind {
		case googletrace.Submit:
			seq++
			t.submitted = seq
		case googletrace.Schedule:
			t.running = true
		case googletrace.Finish, googletrace.Kill, googletrace.Lost, googletrace.Evict, googletrace.Fail:
			t.running = false
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	w := &Workload{Name: "google-2011", Machines: GoogleMachines(GoogleCellMachines, 1)}
	for k, t := range tasks {
		if !t.running || t.cpu <= 0 && t.mem <= 0 {
			continue
		}
		w.Tasks = append(w.Tasks, scheduler.PendingTask{
			Ref:       scheduler.TaskRef{User: "google", Job: strconv.FormatInt(k[0], 10), Index: int32(k[1])},
			Priority:  t.prio,
			Seq:       t.submitted,
			Resources: scheduler.Resources{scheduler.CPU: max(int64(t.cpu*googletrace.CPU), 1), scheduler.Memory: max(int64(t.mem*googletrace.Memory), 1)},
		})
	}
	slices.SortFunc(w.Tasks, func(a, b scheduler.PendingTask) int { return int(a.Seq - b.Seq) })
	return w, nil
}

// Sample keeps a seeded share of the workload's machines and tasks: a
// smaller cell of the same shape.
func (w *Workload) Sample(share float64, seed uint64) *Workload {
	rng := rand.New(rand.NewPCG(seed, 0x73616d70))
	out := &Workload{Name: fmt.Sprintf("%s (%.3g%%)", w.Name, 100*share)}
	for _, m := range w.Machines {
		if rng.Float64() < share {
			out.Machines = append(out.Machines, m)
		}
	}
	for _, t := range w.Tasks {
		if rng.Float64() < share {
			out.Tasks = append(out.Tasks, t)
		}
	}
	return out
}

// Split returns the workload's prod tasks and its other tasks, each on
// all the machines: Borg §5.2 packs them apart to see what segregating
// them would cost.
func (w *Workload) Split() (prod, nonProd *Workload) {
	prod = &Workload{Name: w.Name + " prod", Machines: w.Machines}
	nonProd = &Workload{Name: w.Name + " non-prod", Machines: w.Machines}
	for _, t := range w.Tasks {
		if scheduler.IsProd(t.Priority) {
			prod.Tasks = append(prod.Tasks, t)
		} else {
			nonProd.Tasks = append(nonProd.Tasks, t)
		}
	}
	return prod, nonProd
}

// Bucketed returns the workload with every CPU and memory request rounded
// up to a power of two, from 0.5 core and 1 GiB (Borg §5.4: fixed-size
// containers or virtual machines instead of requests sized to the task).
func (w *Workload) Bucketed() *Workload {
	out := &Workload{Name: w.Name + " bucketed", Machines: w.Machines, Tasks: slices.Clone(w.Tasks)}
	up := func(v, from int64) int64 {
		b := from
		for b < v {
			b *= 2
		}
		return b
	}
	for i := range out.Tasks {
		r := &out.Tasks[i].Resources
		r[scheduler.CPU] = up(r[scheduler.CPU], 500)
		r[scheduler.Memory] = up(r[scheduler.Memory], 1<<30)
	}
	return out
}
