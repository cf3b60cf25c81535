package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/scheduler"
)

// SyntheticConfig describes a generated cell.
type SyntheticConfig struct {
	Seed     uint64
	Machines int
	Tasks    int
	Jobs     int
	Users    int
	// CPUFill is the total CPU request over the total CPU capacity (memory
	// follows at seven eighths of it).
	CPUFill float64
	// RackSize machines share a rack; RacksPerPower racks share a power
	// domain.
	RackSize      int
	RacksPerPower int
	// ConstrainedJobs is the share of jobs with constraints.
	ConstrainedJobs float64
}

// DefaultSynthetic is a Borg-like cell of 10,000 machines and 100,000 tasks in
// 5,000 jobs, 80% of its CPU requested.
func DefaultSynthetic(seed uint64) SyntheticConfig {
	return SyntheticConfig{
		Seed: seed, Machines: 10000, Tasks: 100000, Jobs: 5000, Users: 200,
		CPUFill: 0.8, RackSize: 40, RacksPerPower: 5, ConstrainedJobs: 0.1,
	}
}

type machineShape struct {
	cores, memGiB, diskTiB, gpus int64
	weight                       float64
}

// The shapes and their shares: a few generations of two-socket servers, a
// memory-heavy kind and a few GPU machines.
var syntheticShapes = []machineShape{
	{16, 64, 1, 0, 0.15},
	{32, 128, 2, 0, 0.30},
	{48, 192, 2, 0, 0.20},
	{64, 256, 4, 0, 0.20},
	{32, 256, 2, 0, 0.10},
	{48, 384, 4, 4, 0.05},
}

// Synthetic generates a seeded cell: heterogeneous machines in racks and
// power domains, with attributes arch (mostly x86_64, some arm64),
// generation (1-4), ssd (on some); and jobs in every band, sized
// lognormally, with about 20% of non-prod tasks asking for under 0.1 core,
// constraints on a minority of jobs, ports on prod jobs and packages shared
// within a user. The same config gives the same workload.
func Synthetic(cfg SyntheticConfig) *Workload {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	w := &Workload{Name: fmt.Sprintf("synthetic-%d", cfg.Seed)}
	var capacity scheduler.Resources
	w.Machines, capacity = syntheticMachines(cfg, rng)
	jobs := syntheticJobSizes(cfg, rng)
	nonProdTasks := drawSyntheticJobs(jobs, cfg, rng)
	markTinyJobs(jobs, nonProdTasks, rng)
	w.Tasks = syntheticTasks(jobs, cfg, capacity, rng)
	return w
}

// syntheticMachines draws the cell's machines rack by rack (racks are
// homogeneous, as they are bought), and their capacity.
func syntheticMachines(cfg SyntheticConfig, rng *rand.Rand) ([]*scheduler.Machine, scheduler.Resources) {
	var capacity scheduler.Resources
	var machines []*scheduler.Machine
	rackSize := max(cfg.RackSize, 1)
	racksPerPower := max(cfg.RacksPerPower, 1)
	var shape machineShape
	for i := range cfg.Machines {
		rack := i / rackSize
		if i%rackSize == 0 {
			shape = pickShape(rng)
		}
		m := &scheduler.Machine{
			Name:    fmt.Sprintf("m%05d", i),
			Version: 1,
			Capacity: scheduler.Resources{
				scheduler.CPU:    shape.cores * 1000,
				scheduler.Memory: shape.memGiB << 30,
				scheduler.Disk:   shape.diskTiB << 40,
				scheduler.GPU:    shape.gpus * 1000,
				scheduler.Ports:  1000,
			},
			PortBase: 31000,
			Attributes: map[string]string{
				"rack":       fmt.Sprintf("r%04d", rack),
				"power":      fmt.Sprintf("p%03d", rack/racksPerPower),
				"arch":       "x86_64",
				"generation": fmt.Sprint(1 + (rack*7)%4),
			},
		}
		if rack%10 == 3 {
			m.Attributes["arch"] = "arm64"
		}
		if rack%3 == 0 {
			m.Attributes["ssd"] = "true"
		}
		capacity = capacity.Add(m.Capacity)
		machines = append(machines, m)
	}
	return machines, capacity
}

// syntheticJob is a synthetic job before its requests are scaled to the
// fill.
type syntheticJob struct {
	name     string
	user     int
	prio     int32
	size     int
	cpu, mem float64 // per task, before scaling
	disk     int64
	gpu      int64
	ports    int64
	tiny     bool
	cons     []scheduler.Constraint
	pkg      string
}

// syntheticJobSizes deals cfg.Tasks among cfg.Jobs jobs, each at least one
// task, in log-normal shares.
func syntheticJobSizes(cfg SyntheticConfig, rng *rand.Rand) []syntheticJob {
	jobs := make([]syntheticJob, cfg.Jobs)
	sizes := make([]float64, cfg.Jobs)
	var sizeSum float64
	for i := range sizes {
		sizes[i] = math.Exp(rng.NormFloat64() * 1.5)
		sizeSum += sizes[i]
	}
	left := cfg.Tasks
	for i := range jobs {
		j := &jobs[i]
		j.size = 1
		if extra := cfg.Tasks - cfg.Jobs; extra > 0 {
			j.size += int(sizes[i] / sizeSum * float64(extra))
		}
		left -= j.size
	}
	for i := 0; left > 0; i = (i + 1) % len(jobs) {
		jobs[i].size++
		left--
	}
	return jobs
}

// drawSyntheticJobs draws each job's owner, priority, shape, ports, GPUs,
// package and constraints, and returns how many tasks are not prod.
func drawSyntheticJobs(jobs []syntheticJob, cfg SyntheticConfig, rng *rand.Rand) (nonProdTasks int) {
	users := max(cfg.Users, 1)
	for i := range jobs {
		j := &jobs[i]
		// A few users own most jobs.
		j.user = int(math.Floor(math.Pow(rng.Float64(), 2) * float64(users)))
		switch r := rng.Float64(); {
		case r < 0.05:
			j.prio = 11
		case r < 0.25:
			j.prio = 9 + int32(rng.IntN(2))
		case r < 0.75:
			j.prio = 2 + int32(rng.IntN(7))
		default:
			j.prio = int32(rng.IntN(2))
		}
		j.name = fmt.Sprintf("%s-%04d", events.BandOf(j.prio), i)
		j.cpu = math.Exp(rng.NormFloat64()*0.8) * 1000
		j.mem = j.cpu * (1 << 20) * math.Exp(rng.NormFloat64()*0.5) * 3.5
		j.disk = int64(1+rng.IntN(20)) << 30
		if scheduler.IsProd(j.prio) {
			j.ports = int64(rng.IntN(3))
		} else {
			nonProdTasks += j.size
		}
		if j.size <= 20 && rng.Float64() < 0.01 {
			j.gpu = int64(1+rng.IntN(4)) * 1000
		}
		j.pkg = fmt.Sprintf("pkg-u%03d-%d", j.user, rng.IntN(5))
		if rng.Float64() < cfg.ConstrainedJobs {
			j.cons = syntheticConstraints(rng)
		}
	}
	return nonProdTasks
}

// markTinyJobs marks non-prod jobs tiny (under 0.1 core) in a random order
// until a fifth of the non-prod tasks are.
func markTinyJobs(jobs []syntheticJob, nonProdTasks int, rng *rand.Rand) {
	var tinyTasks int
	for _, i := range rng.Perm(len(jobs)) {
		j := &jobs[i]
		if scheduler.IsProd(j.prio) || j.gpu > 0 || float64(tinyTasks+j.size) > 0.2*float64(nonProdTasks) {
			continue
		}
		j.tiny = true
		tinyTasks += j.size
		j.cpu = float64(10 + rng.IntN(90))
		j.mem = float64(int64(32+rng.IntN(480)) << 20)
	}
}

// syntheticTasks scales CPU and memory to the fill asked for, no task
// larger than a quarter of the smallest machine (scale, cap, and scale the
// uncapped jobs again until the total is reached), and lists the jobs'
// tasks in a random submission order.
func syntheticTasks(jobs []syntheticJob, cfg SyntheticConfig, capacity scheduler.Resources, rng *rand.Rand) []scheduler.PendingTask {
	maxCPU := float64(syntheticShapes[0].cores*1000) / 4
	maxMem := float64(syntheticShapes[0].memGiB<<30) / 4
	scale := func(get func(j *syntheticJob) float64, target, most float64) float64 {
		return fillScale(len(jobs), 50, target, func(i int) (v, cap, n float64, fixed bool) {
			j := &jobs[i]
			return get(j), most, float64(j.size), j.tiny
		})
	}
	cpuScale := scale(func(j *syntheticJob) float64 { return j.cpu }, cfg.CPUFill*float64(capacity[scheduler.CPU]), maxCPU)
	memScale := scale(func(j *syntheticJob) float64 { return j.mem }, cfg.CPUFill*7/8*float64(capacity[scheduler.Memory]), maxMem)

	var tasks []scheduler.PendingTask
	order := rng.Perm(len(jobs)) // submission order
	seq := int64(0)
	for _, i := range order {
		j := &jobs[i]
		cpu, mem := j.cpu, j.mem
		if !j.tiny {
			cpu = math.Min(cpu*cpuScale, maxCPU)
			mem = math.Min(mem*memScale, maxMem)
		}
		req := scheduler.Resources{scheduler.CPU: max(int64(cpu), 1), scheduler.Memory: max(int64(mem), 1<<20), scheduler.Disk: j.disk, scheduler.GPU: j.gpu, scheduler.Ports: j.ports}
		for t := range j.size {
			seq++
			tasks = append(tasks, scheduler.PendingTask{
				Ref:         scheduler.TaskRef{User: fmt.Sprintf("u%03d", j.user), Job: j.name, Index: int32(t)},
				Priority:    j.prio,
				Seq:         seq,
				SpecVersion: 1,
				Resources:   req,
				Constraints: j.cons,
				Package:     j.pkg,
			})
		}
	}
	return tasks
}

// fillScale finds the factor s that brings the sum over items of
// min(v*s, cap)*n to target, scaling again the items not capped, in at
// most rounds rounds; fixed items count v*n and never scale. Synthetic
// and CellSpec.Cell size their tasks with it.
func fillScale(items, rounds int, target float64, item func(i int) (v, cap, n float64, fixed bool)) float64 {
	s := 1.0
	for range rounds {
		var sum, free float64 // the total, and the part that still scales
		for i := range items {
			v, most, n, fixed := item(i)
			switch {
			case fixed:
				sum += v * n
			case v*s >= most:
				sum += most * n
			default:
				sum += v * s * n
				free += v * s * n
			}
		}
		if free == 0 || math.Abs(sum-target) < target*1e-4 {
			break
		}
		s *= 1 + (target-sum)/free
	}
	return s
}

func pickShape(rng *rand.Rand) machineShape {
	r := rng.Float64()
	for _, s := range syntheticShapes {
		if r < s.weight {
			return s
		}
		r -= s.weight
	}
	return syntheticShapes[len(syntheticShapes)-1]
}

func syntheticConstraints(rng *rand.Rand) []scheduler.Constraint {
	pool := [][]scheduler.Constraint{
		{{Attribute: "arch", Op: scheduler.OpEq, Values: []string{"arm64"}}},
		{{Attribute: "ssd", Op: scheduler.OpExists}},
		{{Attribute: "generation", Op: scheduler.OpGt, Values: []string{"2"}}},
		{{Attribute: "generation", Op: scheduler.OpLt, Values: []string{"4"}}, {Attribute: "arch", Op: scheduler.OpNe, Values: []string{"arm64"}}},
		{{Attribute: "power", Op: scheduler.OpIn, Values: []string{"p000", "p001", "p002", "p003", "p004", "p005", "p006", "p007"}}},
		{{Attribute: "generation", Op: scheduler.OpGt, Values: []string{"3"}, Soft: true}},
		{{Attribute: "ssd", Op: scheduler.OpExists, Soft: true}, {Attribute: "arch", Op: scheduler.OpEq, Values: []string{"x86_64"}}},
	}
	return slices.Clone(pool[rng.IntN(len(pool))])
}
