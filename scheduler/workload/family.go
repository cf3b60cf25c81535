package workload

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/scheduler"
)

// CellSpec describes one member of the family of generated cells: the
// corners a packing policy must hold on without having been tuned for
// them (machine mix, the binding resource, task sizes, fill, priorities).
// Cell generates it, deterministic in its seed; no data files.
type CellSpec struct {
	Name     string
	Machines int
	Mix      MachineMix
	Binding  BindingResource
	Sizes    TaskSizes
	// Fill is the share of the binding resource the tasks ask for; the
	// other resources are asked for at OtherFill of it (0: 0.65).
	Fill      float64
	OtherFill float64
	Bands     PriorityMix
	Users     int // 0: one, as a workload read from CSV has
	// JobTasks is the median of tasks per job (0: 8). Large jobs mean few
	// shapes, each asked for many times, as in a batch trace.
	JobTasks int
}

// MachineMix is how many kinds of machine a cell has.
type MachineMix string

const (
	MixOne  MachineMix = "one"  // every machine alike
	MixFew  MachineMix = "few"  // three kinds
	MixMany MachineMix = "many" // ten kinds, of varied shapes
)

// BindingResource is the resource the tasks ask most of, relative to the
// cell.
type BindingResource string

const (
	BindCPU      BindingResource = "cpu"
	BindMemory   BindingResource = "memory"
	BindGPU      BindingResource = "gpu"      // GPUs on some machines, fractional and whole GPU tasks
	BindBalanced BindingResource = "balanced" // CPU and memory asked for alike
)

// TaskSizes is the distribution of task sizes, as a share of a mean machine.
type TaskSizes string

const (
	SizesSmall     TaskSizes = "small"      // median 1/64 of a machine: mostly at or under a core
	SizesMixed     TaskSizes = "mixed"      // median 1/16, wide
	SizesLarge     TaskSizes = "large"      // median 1/4: few tasks per machine
	SizesHeavyTail TaskSizes = "heavy-tail" // Pareto: many tiny, a few of most of a machine
)

// PriorityMix is which bands the jobs are in.
type PriorityMix string

const (
	BandsOne        PriorityMix = "batch"           // every job in the batch band
	BandsProdBatch  PriorityMix = "prod+batch"      // a third of the jobs production
	BandsBestEffort PriorityMix = "prod+batch+free" // production, batch and best-effort
)

// Family is the table of generated cells the packing policies are held to
// (the README's compaction table has a row per member). Sizes are scaled
// down so that a compaction of a member runs in seconds; a member is one
// line.
var Family = []CellSpec{
	// The cell the default once lost 9% to worst-fit on: one machine type,
	// memory binding at 90%, CPU at about 60%, small batch tasks, no GPUs.
	{Name: "mem-one-small-90", Machines: 160, Mix: MixOne, Binding: BindMemory, Sizes: SizesSmall, Fill: 0.90, OtherFill: 0.66, Bands: BandsOne, JobTasks: 200},
	{Name: "cpu-one-small-90", Machines: 160, Mix: MixOne, Binding: BindCPU, Sizes: SizesSmall, Fill: 0.90, Bands: BandsOne, Users: 8},
	{Name: "bal-one-mixed-85", Machines: 160, Mix: MixOne, Binding: BindBalanced, Sizes: SizesMixed, Fill: 0.85, Bands: BandsProdBatch, Users: 8},
	{Name: "cpu-one-large-80", Machines: 200, Mix: MixOne, Binding: BindCPU, Sizes: SizesLarge, Fill: 0.80, Bands: BandsOne},
	{Name: "mem-one-heavy-75", Machines: 160, Mix: MixOne, Binding: BindMemory, Sizes: SizesHeavyTail, Fill: 0.75, Bands: BandsBestEffort, Users: 8},
	{Name: "mem-few-mixed-90", Machines: 160, Mix: MixFew, Binding: BindMemory, Sizes: SizesMixed, Fill: 0.90, Bands: BandsProdBatch, Users: 8},
	{Name: "cpu-few-heavy-80", Machines: 160, Mix: MixFew, Binding: BindCPU, Sizes: SizesHeavyTail, Fill: 0.80, Bands: BandsBestEffort},
	{Name: "cpu-few-small-70", Machines: 160, Mix: MixFew, Binding: BindCPU, Sizes: SizesSmall, Fill: 0.70, Bands: BandsProdBatch, Users: 8},
	{Name: "bal-few-large-70", Machines: 200, Mix: MixFew, Binding: BindBalanced, Sizes: SizesLarge, Fill: 0.70, Bands: BandsBestEffort, Users: 8},
	{Name: "cpu-many-mixed-95", Machines: 160, Mix: MixMany, Binding: BindCPU, Sizes: SizesMixed, Fill: 0.95, Bands: BandsProdBatch, Users: 8},
	{Name: "mem-many-small-98", Machines: 160, Mix: MixMany, Binding: BindMemory, Sizes: SizesSmall, Fill: 0.98, Bands: BandsOne},
	{Name: "bal-many-small-98", Machines: 160, Mix: MixMany, Binding: BindBalanced, Sizes: SizesSmall, Fill: 0.98, Bands: BandsBestEffort, Users: 8},
	{Name: "gpu-few-mixed-90", Machines: 160, Mix: MixFew, Binding: BindGPU, Sizes: SizesMixed, Fill: 0.90, Bands: BandsBestEffort, Users: 8},
	{Name: "gpu-many-heavy-95", Machines: 160, Mix: MixMany, Binding: BindGPU, Sizes: SizesHeavyTail, Fill: 0.95, Bands: BandsProdBatch},
}

// FamilyMember returns the member of that name.
func FamilyMember(name string) (CellSpec, error) {
	for _, s := range Family {
		if s.Name == name {
			return s, nil
		}
	}
	names := make([]string, len(Family))
	for i, s := range Family {
		names[i] = s.Name
	}
	return CellSpec{}, fmt.Errorf("workload: family member %q: want one of %s", name, strings.Join(names, ", "))
}

type machineKind struct {
	cores, memGiB, gpus int64
}

// The machine kinds of each mix. GPU cells add GPU machines to them.
var (
	kindsOne  = []machineKind{{32, 128, 0}}
	kindsFew  = []machineKind{{16, 64, 0}, {32, 128, 0}, {48, 384, 0}}
	kindsMany = []machineKind{
		{8, 32, 0}, {16, 64, 0}, {16, 128, 0}, {24, 96, 0}, {32, 128, 0},
		{32, 256, 0}, {48, 192, 0}, {64, 256, 0}, {64, 512, 0}, {96, 384, 0},
	}
	gpuKinds = []machineKind{{32, 256, 8}, {64, 512, 8}, {16, 128, 4}, {96, 768, 8}}
)

// Validate names the field a spec gets wrong.
func (s CellSpec) Validate() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("workload: cell spec: name: empty")
	case s.Machines < 1:
		return fmt.Errorf("workload: cell spec %s: machines: %d, want at least 1", s.Name, s.Machines)
	case !slices.Contains([]MachineMix{MixOne, MixFew, MixMany}, s.Mix):
		return fmt.Errorf("workload: cell spec %s: mix: %q, want one, few or many", s.Name, s.Mix)
	case !slices.Contains([]BindingResource{BindCPU, BindMemory, BindGPU, BindBalanced}, s.Binding):
		return fmt.Errorf("workload: cell spec %s: binding: %q, want cpu, memory, gpu or balanced", s.Name, s.Binding)
	case !slices.Contains([]TaskSizes{SizesSmall, SizesMixed, SizesLarge, SizesHeavyTail}, s.Sizes):
		return fmt.Errorf("workload: cell spec %s: sizes: %q, want small, mixed, large or heavy-tail", s.Name, s.Sizes)
	case !(s.Fill > 0 && s.Fill <= 1):
		return fmt.Errorf("workload: cell spec %s: fill: %v, want within (0, 1]", s.Name, s.Fill)
	case !(s.OtherFill >= 0 && s.OtherFill <= 1):
		return fmt.Errorf("workload: cell spec %s: other fill: %v, want within [0, 1]", s.Name, s.OtherFill)
	case !slices.Contains([]PriorityMix{BandsOne, BandsProdBatch, BandsBestEffort}, s.Bands):
		return fmt.Errorf("workload: cell spec %s: bands: %q, want batch, prod+batch or prod+batch+free", s.Name, s.Bands)
	case s.JobTasks < 0:
		return fmt.Errorf("workload: cell spec %s: job tasks: %d, want 0 or more", s.Name, s.JobTasks)
	case s.Users < 0:
		return fmt.Errorf("workload: cell spec %s: users: %d, want 0 or more", s.Name, s.Users)
	}
	return nil
}

// Cell generates the member: the same spec and seed give the same
// workload. Machines are named m0000...; every task of a job has the same
// shape, jobs are sized lognormally, and the tasks' CPU and memory (and
// GPUs) are scaled so that the cell's totals are the spec's fills.
func (s CellSpec) Cell(seed uint64) (*Workload, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	// The name is in the seed, so members of one seed differ.
	h := fnv.New64a()
	h.Write([]byte(s.Name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	w := &Workload{Name: s.Name}
	var capacity scheduler.Resources
	w.Machines, capacity = s.machines(rng)
	most, mostGPU := largestTasks(w.Machines)
	jobs := s.drawJobs(rng)
	scaleFamilyJobs(jobs, s.fills(), capacity, most, mostGPU)
	w.Tasks = familyTasks(jobs, mostGPU)
	if s.Users == 0 {
		for i := range w.Tasks {
			w.Tasks[i].Ref.User = s.Name
		}
	}
	if err := w.Cell().Validate(); err != nil {
		return nil, fmt.Errorf("workload: cell spec %s: %w", s.Name, err)
	}
	return w, nil
}

// machines draws the member's machines from its mix, and their capacity.
func (s CellSpec) machines(rng *rand.Rand) ([]*scheduler.Machine, scheduler.Resources) {
	kinds := map[MachineMix][]machineKind{MixOne: kindsOne, MixFew: kindsFew, MixMany: kindsMany}[s.Mix]
	var capacity scheduler.Resources
	var machines []*scheduler.Machine
	for i := range s.Machines {
		k := kinds[rng.IntN(len(kinds))]
		if s.Binding == BindGPU && i%2 == 0 {
			// Half the machines hold GPUs, as on OpenB's cell.
			k = gpuKinds[rng.IntN(len(gpuKinds))]
			if s.Mix == MixOne {
				k = gpuKinds[0]
			}
		}
		m := &scheduler.Machine{
			Name: fmt.Sprintf("m%04d", i), Version: 1,
			Capacity: scheduler.Resources{
				scheduler.CPU: k.cores * 1000, scheduler.Memory: k.memGiB << 30, scheduler.GPU: k.gpus * 1000,
			},
			Attributes: map[string]string{"rack": fmt.Sprintf("r%03d", i/20)},
		}
		capacity = capacity.Add(m.Capacity)
		machines = append(machines, m)
	}
	return machines, capacity
}

// largestTasks is the largest task a dimension may hold: three quarters of
// the smallest machine that could take it, so that every task fits the
// cell whatever the removal keeps. GPU tasks are held to the smallest GPU
// machine (mostGPU).
func largestTasks(machines []*scheduler.Machine) (most, mostGPU scheduler.Resources) {
	for d := range most {
		most[d], mostGPU[d] = math.MaxInt64, math.MaxInt64
	}
	for _, m := range machines {
		for _, d := range []scheduler.Dim{scheduler.CPU, scheduler.Memory, scheduler.GPU} {
			if m.Capacity[d] > 0 {
				most[d] = min(most[d], m.Capacity[d]*3/4)
				if m.Capacity[scheduler.GPU] > 0 {
					mostGPU[d] = min(mostGPU[d], m.Capacity[d]*3/4)
				}
			}
		}
	}
	return most, mostGPU
}

// fills is the share of each resource the member's tasks ask for: the
// binding resource's Fill, the others OtherFill of it.
func (s CellSpec) fills() [scheduler.ScoredDims]float64 {
	other := s.OtherFill
	if other == 0 {
		other = 0.65
	}
	var fill [scheduler.ScoredDims]float64
	switch s.Binding {
	case BindCPU:
		fill[scheduler.CPU], fill[scheduler.Memory] = s.Fill, s.Fill*other
	case BindMemory:
		fill[scheduler.Memory], fill[scheduler.CPU] = s.Fill, s.Fill*other
	case BindBalanced:
		fill[scheduler.CPU], fill[scheduler.Memory] = s.Fill, s.Fill
	case BindGPU:
		fill[scheduler.GPU], fill[scheduler.CPU], fill[scheduler.Memory] = s.Fill, s.Fill*other, s.Fill*other*0.8
	}
	return fill
}

// familyJob is a member's job before its requests are scaled to the fill.
type familyJob struct {
	size  float64
	req   [scheduler.ScoredDims]float64 // per task, before scaling
	tasks int
	prio  int32
	user  int
}

// drawJobs draws jobs until they ask for the binding resource's fill: a
// size from the spec's distribution (a share of a mean machine), a task
// count, and CPU and memory around the size with their own noise, so that
// tasks differ in shape as well as size.
func (s CellSpec) drawJobs(rng *rand.Rand) []familyJob {
	n := float64(s.Machines)
	jobTasks := s.JobTasks
	if jobTasks == 0 {
		jobTasks = 8
	}
	var jobs []familyJob
	var asked float64 // in mean machines, of the binding resource's share
	for asked < s.Fill*n {
		sz := drawSize(rng, s.Sizes)
		j := familyJob{size: sz, tasks: 1 + int(math.Exp(rng.NormFloat64()*1.2)*float64(jobTasks))}
		j.req[scheduler.CPU] = sz * math.Exp(rng.NormFloat64()*0.8)
		j.req[scheduler.Memory] = sz * math.Exp(rng.NormFloat64()*0.8)
		if s.Binding == BindGPU && rng.Float64() < 0.6 {
			// A GPU job: fractional GPUs for small tasks, whole ones for
			// larger; the GPU is its size.
			j.req[scheduler.GPU] = sz
		}
		j.prio = drawPriority(rng, s.Bands)
		j.user = int(math.Floor(math.Pow(rng.Float64(), 2) * float64(max(s.Users, 1))))
		jobs = append(jobs, j)
		asked += sz * float64(j.tasks)
	}
	return jobs
}

// scaleFamilyJobs scales each resource to its fill, capping tasks at the
// largest a machine takes and scaling the uncapped ones again (as
// Synthetic).
func scaleFamilyJobs(jobs []familyJob, fill [scheduler.ScoredDims]float64, capacity, most, mostGPU scheduler.Resources) {
	for _, d := range []scheduler.Dim{scheduler.CPU, scheduler.Memory, scheduler.GPU} {
		target := fill[d] * float64(capacity[d])
		if target == 0 {
			for i := range jobs {
				jobs[i].req[d] = 0
			}
			continue
		}
		cap := func(j *familyJob) float64 {
			if j.req[scheduler.GPU] > 0 {
				return float64(mostGPU[d])
			}
			return float64(most[d])
		}
		scale := fillScale(len(jobs), 60, target, func(i int) (v, most, n float64, fixed bool) {
			j := &jobs[i]
			return j.req[d], cap(j), float64(j.tasks), false
		})
		for i := range jobs {
			j := &jobs[i]
			j.req[d] = math.Min(j.req[d]*scale, cap(j))
		}
	}
}

// familyTasks are the scaled jobs' tasks in submission order.
func familyTasks(jobs []familyJob, mostGPU scheduler.Resources) []scheduler.PendingTask {
	var tasks []scheduler.PendingTask
	seq := int64(0)
	var gpuCarry float64
	for i, j := range jobs {
		req := scheduler.Resources{
			scheduler.CPU:    max(int64(j.req[scheduler.CPU]), 1),
			scheduler.Memory: max(int64(j.req[scheduler.Memory]), 1<<20),
		}
		if j.req[scheduler.GPU] > 0 {
			g := int64(j.req[scheduler.GPU])
			if g >= 1000 {
				// Whole GPUs from one up, never above the cap; the
				// rounding error is carried to the next job, so that
				// the fill holds.
				t := float64(j.tasks)
				whole := math.Round((j.req[scheduler.GPU]*t + gpuCarry) / (1000 * t))
				whole = math.Min(math.Max(whole, 1), float64(mostGPU[scheduler.GPU]/1000))
				gpuCarry += j.req[scheduler.GPU]*t - whole*1000*t
				g = int64(whole) * 1000
			}
			req[scheduler.GPU] = max(g, 1)
		}
		name := fmt.Sprintf("%s-%04d", events.BandOf(j.prio), i)
		for t := range j.tasks {
			seq++
			tasks = append(tasks, scheduler.PendingTask{
				Ref:       scheduler.TaskRef{User: fmt.Sprintf("u%02d", j.user), Job: name, Index: int32(t)},
				Priority:  j.prio,
				Seq:       seq,
				Resources: req, SpecVersion: 1,
			})
		}
	}
	return tasks
}

// drawSize draws a task size as a share of a mean machine.
func drawSize(rng *rand.Rand, sizes TaskSizes) float64 {
	switch sizes {
	case SizesSmall:
		return math.Min(math.Exp(rng.NormFloat64()*0.6)/64, 0.25)
	case SizesMixed:
		return math.Min(math.Exp(rng.NormFloat64()*1.0)/16, 0.75)
	case SizesLarge:
		return math.Min(math.Exp(rng.NormFloat64()*0.4)/4, 0.75)
	}
	// Pareto with alpha 1.3 from 1/128 of a machine.
	return math.Min(1.0/128/math.Pow(1-rng.Float64(), 1/1.3), 0.75)
}

// drawPriority draws a job's priority from the spec's bands.
func drawPriority(rng *rand.Rand, bands PriorityMix) int32 {
	r := rng.Float64()
	switch {
	case bands == BandsOne:
	case r < 0.3:
		return 9 + int32(rng.IntN(2))
	case bands == BandsBestEffort && r > 0.75:
		return int32(rng.IntN(2))
	}
	return 2 + int32(rng.IntN(7))
}

// FamilyPrefix names a family member where a workload folder is expected
// (the compaction report's -compaction, kubepack's -workload):
// "family:mem-one-small-90" is that member's cell of seed 1.
const FamilyPrefix = "family:"

// FamilyWorkload generates the member a name with FamilyPrefix names; ok
// is false for any other name.
func FamilyWorkload(name string) (w *Workload, ok bool, err error) {
	member, ok := strings.CutPrefix(name, FamilyPrefix)
	if !ok {
		return nil, false, nil
	}
	spec, err := FamilyMember(member)
	if err != nil {
		return nil, true, err
	}
	w, err = spec.Cell(1)
	return w, true, err
}
