package commands

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

func TestMachineCommands(t *testing.T) {
	c := newCell(t)
	capacity := projections.Resources{CPUMilli: 4000, MemoryBytes: 8 * gib, Ports: 10}
	checkEvents(t, c.do(RegisterMachine{Meta: root, Machine: "m1.rack2", Address: "10.0.0.1:7000", Capacity: capacity,
		Attributes: map[string]string{"arch": "arm64"}, PortBase: 30000}), []expect{
		{"machine/m1.rack2", &events.MachineRegistered{Machine: "m1.rack2", Address: "10.0.0.1:7000",
			Capacity: capacity.Proto(), Attributes: map[string]string{"arch": "arm64"}, PortBase: 30000}},
	})
	if m := c.s.Machines["m1.rack2"]; m.State != projections.MachineUp || m.PortBase != 30000 || m.Version != c.s.Position {
		t.Fatalf("%+v", m)
	}
	bigger := projections.Resources{CPUMilli: 8000, MemoryBytes: 16 * gib, Ports: 10}
	checkEvents(t, c.do(UpdateMachine{Meta: root, Machine: "m1.rack2", Address: "10.0.0.1:7001", Capacity: bigger}), []expect{
		{"machine/m1.rack2", &events.MachineUpdated{Machine: "m1.rack2", Address: "10.0.0.1:7001", Capacity: bigger.Proto()}},
	})
	if m := c.s.Machines["m1.rack2"]; m.Capacity != bigger || m.PortBase != projections.DefaultPortBase {
		t.Fatalf("%+v", m)
	}
	for _, tc := range []struct {
		cmd   Command
		code  Code
		field string
	}{
		{RegisterMachine{Meta: root, Machine: "m1.rack2", Address: "a:1", Capacity: capacity}, AlreadyExists, "machine"},
		{RegisterMachine{Meta: root, Machine: "M 1", Address: "a:1", Capacity: capacity}, InvalidArgument, "machine"},
		{RegisterMachine{Meta: root, Machine: "m2", Capacity: capacity}, InvalidArgument, "address"},
		{RegisterMachine{Meta: root, Machine: "m2", Address: "a:1"}, InvalidArgument, "capacity.cpu"},
		{RegisterMachine{Meta: root, Machine: "m2", Address: "a:1", Capacity: capacity, PortBase: 65530}, InvalidArgument, "capacity.ports"},
		{RegisterMachine{Meta: root, Machine: "m2", Address: "a:1", Capacity: capacity, Attributes: map[string]string{"-x": "y"}}, InvalidArgument, "attributes.-x"},
		{UpdateMachine{Meta: root, Machine: "m9", Address: "a:1", Capacity: capacity}, NotFound, "machine"},
		{DrainMachine{Meta: root, Machine: "m9", Draining: true}, NotFound, "machine"},
		{RemoveMachine{Meta: root, Machine: "m9"}, NotFound, "machine"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			if e := c.refused(tc.cmd, tc.code); e.Field != tc.field {
				t.Errorf("%+v: field %q, want %q (%v)", tc.cmd, e.Field, tc.field, e)
			}
		})
	}
	// Every error at once.
	e := c.refused(RegisterMachine{Meta: root, Machine: "", Capacity: projections.Resources{MemoryBytes: -1}}, InvalidArgument)
	if want := "machine: must be set; address: must be set: the agent's host:port; capacity.cpu: must be > 0; capacity.memory: must be > 0"; e.Error() != want {
		t.Fatalf("got %s", e)
	}
}

func TestDrainEvictsAndReschedules(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	// A batch job leaves a draining machine at once: no budget holds it.
	sp := spec("web", 0, 2)
	sp.Appclass = "batch"
	c.do(SubmitJob{Meta: alice, Spec: sp})
	c.place("alice", "web", 0, "m0")
	c.place("alice", "web", 1, "m0")
	c.start("m0")
	evs := c.do(DrainMachine{Meta: root, Machine: "m0", Draining: true, Reason: "kernel upgrade"})
	checkEvents(t, evs, []expect{
		{"machine/m0", &events.MachineDrainSet{Machine: "m0", Draining: true, Reason: "kernel upgrade"}},
		{"task/alice/web/0", &events.TaskEvicted{User: "alice", Job: "web", Index: 0, Machine: "m0", Reason: "drain", Stopping: true}},
		{"task/alice/web/0", &events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1, Reason: "rescheduled"}},
		{"task/alice/web/1", &events.TaskEvicted{User: "alice", Job: "web", Index: 1, Machine: "m0", Reason: "drain", Stopping: true}},
		{"task/alice/web/1", &events.TaskSubmitted{User: "alice", Job: "web", Index: 1, SpecVersion: 1, Reason: "rescheduled"}},
	})
	if c.s.PendingCount() != 2 || c.task("alice", "web", 0).Restarts != 0 {
		t.Fatal("evicted tasks are not pending again, or an eviction counted as a restart")
	}
	// No new placement on a draining machine.
	e := c.refused(PlaceTasks{Meta: root, Placements: []Placement{{Task: key("alice", "web", 0), Machine: "m0", MachineVersion: c.s.Machines["m0"].Version}}}, Aborted)
	if !strings.Contains(e.Error(), "machine m0 is draining") {
		t.Fatal(e)
	}
	c.refused(DrainMachine{Meta: root, Machine: "m0", Force: true}, InvalidArgument)
	checkEvents(t, c.do(DrainMachine{Meta: root, Machine: "m0"}), []expect{{"machine/m0", &events.MachineDrainSet{Machine: "m0"}}})
	if evs, err := Decide(c.s, DrainMachine{Meta: root, Machine: "m0"}, FixedClock(t0)); err != nil || len(evs) != 0 {
		t.Fatal("undraining an open machine is not a no-op")
	}

	c.place("alice", "web", 0, "m1")
	c.start("m1")
	evs = c.do(RemoveMachine{Meta: root, Machine: "m1", Reason: "decommissioned"})
	checkEvents(t, evs, []expect{
		{"task/alice/web/0", &events.TaskLost{User: "alice", Job: "web", Index: 0, Machine: "m1", Reason: "machine removed"}},
		{"task/alice/web/0", &events.TaskSubmitted{User: "alice", Job: "web", Index: 0, SpecVersion: 1, Reason: "rescheduled"}},
		{"machine/m1", &events.MachineRemoved{Machine: "m1", Reason: "decommissioned"}},
	})
	if c.s.Machines["m1"] != nil {
		t.Fatal("m1 still registered")
	}
}

func TestAllocSets(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	c.quota("alice", "production", 8000, 16*gib)
	per := projections.Resources{CPUMilli: 2000, MemoryBytes: 4 * gib, Ports: 2}
	evs := c.do(CreateAllocSet{Meta: alice, Name: "pool", Count: 2, Priority: 9, Resources: per, Labels: map[string]string{"team": "web"}})
	checkEvents(t, evs, []expect{{"alloc/alice/pool", &events.AllocSetCreated{User: "alice", Name: "pool", Count: 2, Priority: 9,
		Resources: per.Proto(), Labels: map[string]string{"team": "web"}}}})
	if got := c.s.Charged[projections.UserBand{User: "alice", Band: projections.Production}]; got != per.Scale(2) {
		t.Fatalf("charged %v", got)
	}
	c.refused(CreateAllocSet{Meta: alice, Name: "pool", Count: 1, Priority: 9, Resources: per}, AlreadyExists)
	c.refused(CreateAllocSet{Meta: alice, Name: "big", Count: 3, Priority: 9, Resources: per}, ResourceExhausted)
	c.refused(CreateAllocSet{Meta: alice, Name: "x", Count: 0, Priority: 12}, InvalidArgument)

	// Place the allocs, then a job's tasks inside them; the job is not
	// charged again.
	m0 := c.s.Machines["m0"]
	c.do(PlaceTasks{Meta: root, Allocs: []AllocPlacement{{User: "alice", Set: "pool", Index: 0, Machine: "m0", MachineVersion: m0.Version}}})
	if m0.Limits != per || c.s.AllocSets[projections.JobKey{User: "alice", Name: "pool"}].Allocs[0].Machine != "m0" {
		t.Fatalf("alloc not placed: %v", m0.Limits)
	}
	in := spec("web", 9, 2)
	in.AllocSet = "pool"
	in.Resources = res(1000, 2*gib)
	c.do(SubmitJob{Meta: alice, Spec: in})
	too := spec("fat", 9, 1)
	too.AllocSet = "pool"
	too.Resources = res(3000, gib)
	c.refused(SubmitJob{Meta: alice, Spec: too}, FailedPrecondition)
	evs = c.do(PlaceTasks{Meta: root, Placements: []Placement{
		{Task: key("alice", "web", 0), Machine: "m0", MachineVersion: m0.Version, AllocIndex: 0},
		{Task: key("alice", "web", 1), Machine: "m0", MachineVersion: m0.Version, AllocIndex: 0},
	}})
	if len(evs) != 2 || m0.Limits != per || m0.TaskCount() != 2 {
		t.Fatalf("%s limits %v", dump(evs), m0.Limits)
	}
	c.refused(RemoveAllocSet{Meta: alice, Name: "pool"}, FailedPrecondition)
	// Draining moves the tasks and the alloc.
	evs = c.do(DrainMachine{Meta: root, Machine: "m0", Draining: true})
	if got := strings.Join(types(evs), " "); got != "MachineDrainSet TaskEvicted TaskSubmitted TaskEvicted TaskSubmitted AllocEvicted" {
		t.Fatal(got)
	}
	if !m0.Limits.IsZero() || len(c.s.PendingAllocs()) != 2 {
		t.Fatalf("limits %v, pending allocs %d", m0.Limits, len(c.s.PendingAllocs()))
	}
	c.do(KillJob{Meta: alice, Name: "web"})
	checkEvents(t, c.do(RemoveAllocSet{Meta: alice, Name: "pool"}), []expect{{"alloc/alice/pool", &events.AllocSetRemoved{User: "alice", Name: "pool"}}})
	if len(c.s.Charged) != 0 || len(c.s.PendingAllocs()) != 0 {
		t.Fatalf("charged %v", c.s.Charged)
	}
	c.refused(RemoveAllocSet{Meta: alice, Name: "pool"}, NotFound)
}
