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
	rng := rand.New(rand.NewPCG(seed, 7))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := projections.New()
	admin := commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}
	do := func(cmd commands.Command) error {
		evs, err := commandtest.Try(s, cmd, now)
		for _, e := range evs {
			seen[e.Type]++
		}
		return err
	}
	must := func(cmd commands.Command) {
		if err := do(cmd); err != nil {
			t.Fatalf("seed %d: %T: %v", seed, cmd, err)
		}
	}
	machines := 3 + rng.IntN(10)
	for i := range machines {
		name := fmt.Sprintf("m%d", i)
		must(commands.RegisterMachine{Meta: admin, Machine: name, Address: name + ":1", PortBase: 20000,
			Capacity:   projections.Resources{CPUMilli: int64(4000 + 4000*rng.IntN(4)), MemoryBytes: int64(8+8*rng.IntN(4)) << 30, DiskBytes: 200 << 30, Ports: int64(2 + rng.IntN(6))},
			Attributes: map[string]string{"rack": fmt.Sprintf("r%d", rng.IntN(3)), "gen": fmt.Sprint(1 + rng.IntN(5))}})
		if rng.IntN(8) == 0 {
			must(commands.DrainMachine{Meta: admin, Machine: name, Draining: true, Reason: "maintenance"})
		}
	}
	cap := s.CellCapacity()
	users := []string{"alice", "bob"}
	for _, u := range users {
		for _, band := range []string{"production", "monitoring"} {
			must(commands.SetQuota{Meta: admin, User: u, Band: band, Resources: projections.Resources{CPUMilli: cap.CPUMilli / 5, MemoryBytes: cap.MemoryBytes / 5, DiskBytes: cap.DiskBytes / 5, Ports: cap.Ports / 5}})
		}
		must(commands.SetQuota{Meta: admin, User: u, Band: "batch", Resources: cap.Add(cap).Add(cap)})
	}
	constraint := func() *events.Constraint {
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
	sets := 0
	submit := func(round int) {
		u := users[rng.IntN(len(users))]
		meta := commands.Meta{Actor: commands.Actor{User: u}}
		if rng.IntN(5) == 0 {
			sets++
			_ = do(commands.CreateAllocSet{Meta: meta, Name: fmt.Sprintf("pool%d", sets), Count: int32(1 + rng.IntN(3)), Priority: []int32{0, 4, 9}[rng.IntN(3)],
				Resources: projections.Resources{CPUMilli: int64(1000 + 1000*rng.IntN(3)), MemoryBytes: int64(1+rng.IntN(4)) << 30}})
			return
		}
		sp := &events.JobSpec{Name: fmt.Sprintf("j%d-%d", round, rng.IntN(1000)), Priority: []int32{0, 1, 2, 4, 6, 8, 9, 10, 11}[rng.IntN(9)],
			TaskCount: int32(1 + rng.IntN(8)), Command: "/bin/app",
			Resources: &events.Resources{CpuMilli: int64(100 + rng.IntN(3000)), MemoryBytes: int64(1+rng.IntN(16)) << 28, Ports: int32(rng.IntN(3))}}
		if rng.IntN(3) == 0 {
			sp.Constraints = append(sp.Constraints, constraint())
		}
		switch rng.IntN(6) {
		case 0:
			sp.DistinctHosts = true
		case 1:
			sp.Spread = []string{"rack"}
		}
		if sets > 0 && rng.IntN(4) == 0 {
			sp.AllocSet = fmt.Sprintf("pool%d", 1+rng.IntN(sets))
			sp.Resources = &events.Resources{CpuMilli: int64(100 + rng.IntN(500)), MemoryBytes: 1 << 28}
		}
		_ = do(commands.SubmitJob{Meta: meta, Spec: sp}) // a refusal (quota, a set of another user) submits nothing
	}
	core := NewSchedulingCore(SchedulerConfig{})
	for round := range 4 {
		for range 3 + rng.IntN(8) {
			submit(round)
		}
		cell, position, _ := core.Input(s, now)
		if cell == nil {
			continue
		}
		_, cmd := core.Plan(cell, position)
		if cmd == nil {
			continue
		}
		proposals += len(cmd.Allocs) + len(cmd.Placements)
		if refused := cmd.Check(s); len(refused) > 0 {
			t.Errorf("seed %d round %d: %d of %d proposals refused against the state they were computed from: %v",
				seed, round, len(refused), len(cmd.Allocs)+len(cmd.Placements), refused)
			return proposals
		}
		must(*cmd)
		// The agents start what was placed and report low usage six
		// minutes later: reservations fall below limits (Borg §5.5), so
		// the next passes fit non-prod work by reservations and preempt
		// running tasks.
		now = now.Add(6 * time.Minute)
		for _, m := range s.SortedMachines() {
			var rep commands.ReportAgentState
			rep.Meta, rep.Machine = admin, m.Name
			w := commands.UsageWindow{}
			for _, task := range m.Tasks() {
				k := task.Key()
				rep.Tasks = append(rep.Tasks, commands.AgentTask{Task: k, SpecVersion: task.SpecVersion, State: commands.AgentRunning, Pid: int64(100 + task.Index)})
				w.Tasks = append(w.Tasks, &events.TaskUsage{User: k.User, Job: k.Job, Index: k.Index,
					CpuCoreSeconds: 360 * float64(task.Limit.CPUMilli) / 1000 * rng.Float64() / 2, MemoryBytes: task.Limit.MemoryBytes / int64(2+rng.IntN(4))})
			}
			if len(rep.Tasks) == 0 {
				continue
			}
			must(rep)
			rep.Usage = &w
			must(rep)
		}
		if rng.IntN(6) == 0 {
			m := s.SortedMachines()[rng.IntN(len(s.Machines))]
			must(commands.ReportAgentState{Meta: admin, Machine: m.Name, Unreachable: true, MissedPolls: 3})
		}
	}
	return proposals
}
