package master

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/commandtest"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// TestFreshPlansAreAcceptedInFull is the property that the scheduler (the
// proposer) and PlaceTasks (the applier) judge fit, constraints, ports,
// allocs and preemption by the same rules: a plan computed from a state
// is accepted in full against that unchanged state. Random cells: machines
// of several shapes and attributes, some draining; jobs of every band with
// constraints, ports and alloc sets; passes repeated as higher-priority
// work arrives, so that later passes preempt.
func TestFreshPlansAreAcceptedInFull(t *testing.T) {
	cells, proposals := 400, 0
	if testing.Short() {
		cells = 60
	}
	seen := map[string]int{}
	for seed := range uint64(cells) {
		proposals += checkCellPlans(t, seed, seen)
		if t.Failed() {
			return
		}
	}
	t.Logf("%d cells, %d proposals, all accepted; events: %v", cells, proposals, seen)
	// The property is only as strong as the cells: they must have made the
	// passes preempt, place allocs and tasks in them, and fit by estimated
	// reservations.
	for _, typ := range []string{"TaskEvicted", "AllocScheduled", "ReservationEstimated", "MachineDown", "MachineDrainSet"} {
		if seen[typ] == 0 {
			t.Errorf("no cell wrote %s", typ)
		}
	}
}

func checkCellPlans(t *testing.T, seed uint64, seen map[string]int) (proposals int) {
	w := &planWorld{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 7)), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		s: projections.New(), seen: seen, users: []string{"alice", "bob"}}
	w.registerMachines()
	w.setQuotas()
	core := NewSchedulingCore(SchedulerConfig{})
	for round := range 4 {
		for range 3 + w.rng.IntN(8) {
			w.submit(round)
		}
		cell, position, _ := core.Input(w.s, w.now)
		if cell == nil {
			continue
		}
		_, cmd := core.Plan(cell, position)
		if cmd == nil {
			continue
		}
		proposals += len(cmd.Allocs) + len(cmd.Placements)
		if refused := cmd.Check(w.s); len(refused) > 0 {
			t.Errorf("seed %d round %d: %d of %d proposals refused against the state they were computed from: %v",
				seed, round, len(refused), len(cmd.Allocs)+len(cmd.Placements), refused)
			return proposals
		}
		w.must(*cmd)
		w.reportLowUsage()
		if w.rng.IntN(6) == 0 {
			m := w.s.SortedMachines()[w.rng.IntN(len(w.s.Machines))]
			w.must(commands.ReportAgentState{Meta: planAdmin, Machine: m.Name, Unreachable: true, MissedPolls: 3})
		}
	}
	return proposals
}

var planAdmin = commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}

// planWorld is a random cell, grown from a seed, that the scheduling core
// plans on; seen counts the events of each type it recorded.
type planWorld struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	now   time.Time
	s     *projections.State
	seen  map[string]int
	users []string
	sets  int // alloc sets created
}

func (w *planWorld) do(cmd commands.Command) error {
	evs, err := commandtest.Try(w.s, cmd, w.now)
	for _, e := range evs {
		w.seen[e.Type]++
	}
	return err
}

func (w *planWorld) must(cmd commands.Command) {
	if err := w.do(cmd); err != nil {
		w.t.Fatalf("seed %d: %T: %v", w.seed, cmd, err)
	}
}

// registerMachines registers 3 to 12 machines of random sizes, racks and
// generations; one in eight drains.
func (w *planWorld) registerMachines() {
	rng := w.rng
	machines := 3 + rng.IntN(10)
	for i := range machines {
		name := fmt.Sprintf("m%d", i)
		w.must(commands.RegisterMachine{Meta: planAdmin, Machine: name, Address: name + ":1", PortBase: 20000,
			Capacity:   projections.Resources{CPUMilli: int64(4000 + 4000*rng.IntN(4)), MemoryBytes: int64(8+8*rng.IntN(4)) << 30, DiskBytes: 200 << 30, Ports: int64(2 + rng.IntN(6))},
			Attributes: map[string]string{"rack": fmt.Sprintf("r%d", rng.IntN(3)), "gen": fmt.Sprint(1 + rng.IntN(5))}})
		if rng.IntN(8) == 0 {
			w.must(commands.DrainMachine{Meta: planAdmin, Machine: name, Draining: true, Reason: "maintenance"})
		}
	}
}

// setQuotas gives each user a fifth of the cell in the prod bands and
// three cells of batch.
func (w *planWorld) setQuotas() {
	cap := w.s.CellCapacity()
	for _, u := range w.users {
		for _, band := range []string{"production", "monitoring"} {
			w.must(commands.SetQuota{Meta: planAdmin, User: u, Band: band, Resources: projections.Resources{CPUMilli: cap.CPUMilli / 5, MemoryBytes: cap.MemoryBytes / 5, DiskBytes: cap.DiskBytes / 5, Ports: cap.Ports / 5}})
		}
		w.must(commands.SetQuota{Meta: planAdmin, User: u, Band: "batch", Resources: cap.Add(cap).Add(cap)})
	}
}

func (w *planWorld) constraint() *events.Constraint {
	rng := w.rng
	switch rng.IntN(4) {
	case 0:
		return &events.Constraint{Attribute: "rack", Op: "=", Values: []string{fmt.Sprintf("r%d", rng.IntN(3))}, Soft: rng.IntN(3) == 0}
	case 1:
		return &events.Constraint{Attribute: "gen", Op: ">", Values: []string{fmt.Sprint(rng.IntN(4))}}
	case 2:
		return &events.Constraint{Attribute: "rack", Op: "in", Values: []string{"r0", "r2"}}
	}
	return &events.Constraint{Attribute: "gpu", Op: "!="}
}

// submit creates an alloc set (one time in five) or submits a random job.
func (w *planWorld) submit(round int) {
	rng := w.rng
	u := w.users[rng.IntN(len(w.users))]
	meta := commands.Meta{Actor: commands.Actor{User: u}}
	if rng.IntN(5) == 0 {
		w.sets++
		_ = w.do(commands.CreateAllocSet{Meta: meta, Name: fmt.Sprintf("pool%d", w.sets), Count: int32(1 + rng.IntN(3)), Priority: []int32{0, 4, 9}[rng.IntN(3)],
			Resources: projections.Resources{CPUMilli: int64(1000 + 1000*rng.IntN(3)), MemoryBytes: int64(1+rng.IntN(4)) << 30}})
		return
	}
	sp := &events.JobSpec{Name: fmt.Sprintf("j%d-%d", round, rng.IntN(1000)), Priority: []int32{0, 1, 2, 4, 6, 8, 9, 10, 11}[rng.IntN(9)],
		TaskCount: int32(1 + rng.IntN(8)), Command: "/bin/app",
		Resources: &events.Resources{CpuMilli: int64(100 + rng.IntN(3000)), MemoryBytes: int64(1+rng.IntN(16)) << 28, Ports: int32(rng.IntN(3))}}
	if rng.IntN(3) == 0 {
		sp.Constraints = append(sp.Constraints, w.constraint())
	}
	switch rng.IntN(6) {
	case 0:
		sp.DistinctHosts = true
	case 1:
		sp.Spread = []string{"rack"}
	}
	if w.sets > 0 && rng.IntN(4) == 0 {
		sp.AllocSet = fmt.Sprintf("pool%d", 1+rng.IntN(w.sets))
		sp.Resources = &events.Resources{CpuMilli: int64(100 + rng.IntN(500)), MemoryBytes: 1 << 28}
	}
	_ = w.do(commands.SubmitJob{Meta: meta, Spec: sp}) // a refusal (quota, a set of another user) submits nothing
}

// reportLowUsage has the agents start what was placed and report low usage
// six minutes later: reservations fall below limits (Borg §5.5), so the
// next passes fit non-prod work by reservations and preempt running tasks.
func (w *planWorld) reportLowUsage() {
	rng := w.rng
	w.now = w.now.Add(6 * time.Minute)
	for _, m := range w.s.SortedMachines() {
		var rep commands.ReportAgentState
		rep.Meta, rep.Machine = planAdmin, m.Name
		uw := commands.UsageWindow{}
		for _, task := range m.Tasks() {
			k := task.Key()
			rep.Tasks = append(rep.Tasks, commands.AgentTask{Task: k, SpecVersion: task.SpecVersion, State: commands.AgentRunning, Pid: int64(100 + task.Index)})
			uw.Tasks = append(uw.Tasks, &events.TaskUsage{User: k.User, Job: k.Job, Index: k.Index,
				CpuCoreSeconds: 360 * float64(task.Limit.CPUMilli) / 1000 * rng.Float64() / 2, MemoryBytes: task.Limit.MemoryBytes / int64(2+rng.IntN(4))})
		}
		if len(rep.Tasks) == 0 {
			continue
		}
		w.must(rep)
		rep.Usage = &uw
		w.must(rep)
	}
}
