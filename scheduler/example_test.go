package scheduler_test

import (
	"fmt"

	"github.com/corralhq/corral/scheduler"
)

func Example() {
	gib := int64(1 << 30)
	cell := &scheduler.Cell{
		Machines: []*scheduler.Machine{
			{Name: "m1", Version: 7, Capacity: scheduler.Resources{scheduler.CPU: 8000, scheduler.Memory: 32 * gib},
				Attributes: map[string]string{"arch": "x86_64"},
				Tasks: []scheduler.PlacedTask{{
					Ref:      scheduler.TaskRef{User: "bob", Job: "batch", Index: 0},
					Priority: 2,
					Limit:    scheduler.Resources{scheduler.CPU: 6000, scheduler.Memory: 4 * gib},
					// Uses far less than it asked for: the room is reclaimed.
					Reservation: scheduler.Resources{scheduler.CPU: 1000, scheduler.Memory: 2 * gib},
				}}},
		},
		Pending: []scheduler.PendingTask{
			{Ref: scheduler.TaskRef{User: "alice", Job: "web", Index: 0}, Priority: 9, Seq: 1,
				Resources: scheduler.Resources{scheduler.CPU: 4000, scheduler.Memory: 8 * gib}},
			{Ref: scheduler.TaskRef{User: "carol", Job: "ml", Index: 0}, Priority: 5, Seq: 2,
				Resources:   scheduler.Resources{scheduler.CPU: 1000, scheduler.Memory: gib},
				Constraints: []scheduler.Constraint{{Attribute: "arch", Op: scheduler.OpEq, Values: []string{"arm64"}}}},
		},
	}
	plan := scheduler.Schedule(cell, scheduler.DefaultConfig(), 1)
	for _, p := range plan.Placements {
		fmt.Printf("%s -> %s (computed against version %d), preempting %v\n", p.Task, p.Machine, p.MachineVersion, p.Preempted)
	}
	for _, e := range plan.Pending {
		fmt.Println(e.String())
	}
	// Output:
	// 0.web.alice -> m1 (computed against version 7), preempting [0.batch.bob]
	// 1 task(s) like 0.ml.carol, priority 5, cpu=1 memory=1GiB, arch=arm64
	//   1 machine rejected
	//     1: constraint arch=arm64
	//   hint: the constraint arch=arm64 matches no machine
}
