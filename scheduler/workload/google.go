package workload

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/scheduler"
)

// The public Google trace (clusterdata-2011-2) as a cell. The trace gives
// the tasks' requests but not the machines' capacities; Reiss et al.
// (SoCC 2012) published the cell's machine mix, normalized to the largest
// machine, which GoogleMachines rebuilds.

// GoogleMix is the published mix: normalized CPU and memory, share of the
// cell's machines.
var GoogleMix = []struct{ CPU, Memory, Share float64 }{
	{0.5, 0.5, 53.47}, {0.5, 0.25, 30.74}, {0.5, 0.75, 7.95}, {1, 1, 6.32}, {0.25, 0.25, 0.99},
	{0.5, 0.12, 0.43}, {0.5, 0.03, 0.04}, {0.5, 0.97, 0.03}, {1, 0.5, 0.02}, {0.5, 0.06, 0.01},
}

// GoogleCellMachines is the cell's size in the trace.
const GoogleCellMachines = 12_583

// The trace normalizes every capacity and request to the largest machine,
// whose real size it does not say. These are assumed: a 2011 server of 32
// cores and 128 GiB, so that the common machine (0.5, 0.5) has 16 cores
// and 64 GiB. Packing depends only on the ratios; the bucketing experiment
// (requests rounded up to powers of two from 0.5 core and 1 GiB, Borg
// §5.4) is the one figure the assumption moves.
const (
	GoogleCPU    = 32_000    // milli-CPU per normalized 1.0
	GoogleMemory = 128 << 30 // bytes per normalized 1.0
)

// GoogleMachines builds n machines in the published mix (each kind's share
// rounded, the largest kind taking the remainder), named g00000...,
// shuffled by seed.
func GoogleMachines(n int, seed uint64) []*scheduler.Machine {
	counts := make([]int, len(GoogleMix))
	total := 0
	for i, k := range GoogleMix {
		counts[i] = int(math.Round(float64(n) * k.Share / 100))
		total += counts[i]
	}
	counts[0] += n - total
	var shapes []scheduler.Resources
	for i, k := range GoogleMix {
		for range max(counts[i], 0) {
			shapes = append(shapes, scheduler.Resources{scheduler.CPU: int64(k.CPU * GoogleCPU), scheduler.Memory: int64(k.Memory * GoogleMemory),
				scheduler.Disk: 1 << 40, scheduler.Ports: 1000})
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x676f6f67))
	rng.Shuffle(len(shapes), func(i, j int) { shapes[i], shapes[j] = shapes[j], shapes[i] })
	out := make([]*scheduler.Machine, len(shapes))
	for i, c := range shapes {
		out[i] = &scheduler.Machine{Name: fmt.Sprintf("g%05d", i), Version: 1, Capacity: c}
	}
	return out
}

// Event types of the trace's task_events.
const (
	googleSubmit = iota
	googleSchedule
	googleEvict
	googleFail
	googleFinish
	googleKill
	googleLost
)

// LoadGoogleTrace reads the task_events parts under dir (the trace's
// folder, or its task_events) and returns what the cell ran at the end of
// the last part: every task scheduled and not ended since, with its last
// request, pending again (the order of their submissions kept), on
// GoogleCellMachines machines of the published mix. Tasks waiting to be
// placed then are left out, as are tasks without a request. Like
// LoadWorkload, it touches the file system.
func LoadGoogleTrace(dir string) (*Workload, error) {
	parts, err := filepath.Glob(filepath.Join(dir, "task_events", "part-*.csv.gz"))
	if err == nil && len(parts) == 0 {
		parts, err = filepath.Glob(filepath.Join(dir, "part-*.csv.gz"))
	}
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("scheduler: no task_events parts under %s", dir)
	}
	slices.Sort(parts)
	type task struct {
		prio      int32
		cpu, mem  float64
		running   bool
		submitted int64
	}
	tasks := map[[2]int64]*task{}
	seq := int64(0)
	for _, p := range parts {
		if err := readGoogleTaskEvents(p, func(jobID, index int64, kind int, prio int32, cpu, mem float64, ok bool) {
			k := [2]int64{jobID, index}
			t := tasks[k]
			if t == nil {
				t = &task{}
				tasks[k] = t
			}
			if ok {
				t.cpu, t.mem = cpu, mem
			}
			t.prio = prio
			switch kind {
			case googleSubmit:
				seq++
				t.submitted = seq
			case googleSchedule:
				t.running = true
			case googleFinish, googleKill, googleLost, googleEvict, googleFail:
				t.running = false
			}
		}); err != nil {
			return nil, err
		}
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
			Resources: scheduler.Resources{scheduler.CPU: max(int64(t.cpu*GoogleCPU), 1), scheduler.Memory: max(int64(t.mem*GoogleMemory), 1)},
		})
	}
	slices.SortFunc(w.Tasks, func(a, b scheduler.PendingTask) int { return int(a.Seq - b.Seq) })
	return w, nil
}

// readGoogleTaskEvents calls fn for each row of one gzipped part: time,
// missing info, job ID, task index, machine ID, event type, user,
// scheduling class, priority, CPU request, memory request, disk request,
// different-machines restriction.
func readGoogleTaskEvents(path string, fn func(jobID, index int64, kind int, prio int32, cpu, mem float64, ok bool)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	r := bufio.NewReaderSize(gz, 1<<20)
	line := 0
	for {
		s, err := r.ReadString('\n')
		if len(s) > 0 {
			line++
			f := strings.Split(strings.TrimRight(s, "\r\n"), ",")
			if len(f) < 11 {
				return fmt.Errorf("%s:%d: %d fields, want 13", path, line, len(f))
			}
			jobID, err1 := strconv.ParseInt(f[2], 10, 64)
			index, err2 := strconv.ParseInt(f[3], 10, 64)
			kind, err3 := strconv.Atoi(f[5])
			prio, err4 := strconv.Atoi(f[8])
			if err := firstErr(err1, err2, err3, err4); err != nil {
				return fmt.Errorf("%s:%d: %w", path, line, err)
			}
			cpu, errc := strconv.ParseFloat(f[9], 64)
			mem, errm := strconv.ParseFloat(f[10], 64)
			fn(jobID, index, kind, int32(prio), cpu, mem, errc == nil && errm == nil)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
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
