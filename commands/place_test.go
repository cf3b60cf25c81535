package commands

import (
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Stale placements are refused one by one; the rest are accepted.
func TestPlaceTasksRefusesStaleOnesOneByOne(t *testing.T) {
	c := newCell(t)
	c.machines(3)
	c.do(SubmitJob{Meta: alice, Spec: spec("web", 0, 4)})
	v0, v1, v2 := c.s.Machines["m0"].Version, c.s.Machines["m1"].Version, c.s.Machines["m2"].Version
	// m1 changes after the scheduler looked at it.
	c.do(UpdateMachine{Meta: root, Machine: "m1", Address: "x:1", Capacity: c.s.Machines["m1"].Capacity})
	cmd := PlaceTasks{Meta: root, Placements: []Placement{
		{Task: key("alice", "web", 0), Machine: "m0", MachineVersion: v0, Score: 0.5, MachinesExamined: 3},
		{Task: key("alice", "web", 1), Machine: "m1", MachineVersion: v1},
		{Task: key("alice", "web", 2), Machine: "m2", MachineVersion: v2},
		{Task: key("alice", "web", 3), Machine: "m0", MachineVersion: v0}, // same pass, same machine: fine
		{Task: key("alice", "web", 0), Machine: "m2", MachineVersion: v2}, // twice in one command
		{Task: key("alice", "nope", 0), Machine: "m2", MachineVersion: v2},
		{Task: key("alice", "web", 1), Machine: "m2", MachineVersion: v2, SpecVersion: 7},
	}}
	refused := cmd.Check(c.s)
	want := []string{
		"placements[1]: stale: computed against version " + itoa(v1) + " of machine m1, which is at version " + itoa(c.s.Machines["m1"].Version),
		"placements[4]: task alice/web/0 was already changed by this command",
		"placements[5]: task alice/nope/0 does not exist",
		"placements[6]: stale: computed for spec version 7 of task alice/web/1, which is at version 1",
	}
	if len(refused) != len(want) {
		t.Fatalf("refused %v", refused)
	}
	for i := range want {
		if refused[i].String() != want[i] {
			t.Errorf("got  %s\nwant %s", refused[i], want[i])
		}
	}
	evs := c.do(cmd)
	checkEvents(t, evs, []expect{
		{"task/alice/web/0", &events.TaskScheduled{User: "alice", Job: "web", Index: 0, Machine: "m0", SpecVersion: 1, Score: 0.5, MachinesExamined: 3, MachineVersion: v0}},
		{"task/alice/web/2", &events.TaskScheduled{User: "alice", Job: "web", Index: 2, Machine: "m2", SpecVersion: 1, MachineVersion: v2}},
		{"task/alice/web/3", &events.TaskScheduled{User: "alice", Job: "web", Index: 3, Machine: "m0", SpecVersion: 1, MachineVersion: v0}},
	})
	if c.s.Machines["m0"].Version == v0 || c.s.PendingCount() != 1 {
		t.Fatal("placing did not bump the machine's version, or the refused task is not pending")
	}
	// When every proposal is refused, the command is.
	e := c.refused(PlaceTasks{Meta: root, Placements: []Placement{{Task: key("alice", "web", 1), Machine: "m1", MachineVersion: v1}}}, Aborted)
	if !strings.Contains(e.Error(), "every proposal was refused: placements[0]: stale") {
		t.Fatal(e)
	}
	c.refused(PlaceTasks{Meta: root}, InvalidArgument)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestPlaceTasksFitConstraintsAndPorts(t *testing.T) {
	c := newCell(t)
	c.machines(2) // 8 cores, 32GiB, 100 ports from 20000 each
	c.quota("alice", "production", 16000, 32*gib)
	big := spec("big", 9, 2)
	big.Resources = &events.Resources{CpuMilli: 5000, MemoryBytes: gib, Ports: 2}
	big.PortNames = []string{"http", "admin"}
	c.do(SubmitJob{Meta: alice, Spec: big})
	arm := spec("arm", 0, 1)
	arm.Constraints = []*events.Constraint{{Attribute: "arch", Op: "=", Values: []string{"arm64"}}, {Attribute: "ssd", Op: "exists", Soft: true}}
	c.do(SubmitJob{Meta: alice, Spec: arm})
	v := c.s.Machines["m0"].Version
	evs := c.do(PlaceTasks{Meta: root, Placements: []Placement{
		{Task: key("alice", "big", 0), Machine: "m0", MachineVersion: v},
		{Task: key("alice", "big", 1), Machine: "m0", MachineVersion: v},
		{Task: key("alice", "arm", 0), Machine: "m0", MachineVersion: v},
	}})
	if len(evs) != 1 {
		t.Fatalf("%s", dump(evs))
	}
	if p := evs[0].Data.(*events.TaskScheduled).Ports; len(p) != 2 || p[0] != 20000 || p[1] != 20001 {
		t.Fatalf("ports %v", p)
	}
	v = c.s.Machines["m0"].Version
	for _, tc := range []struct {
		p    Placement
		want string
	}{
		{Placement{Task: key("alice", "big", 1), Machine: "m0", MachineVersion: v}, "does not fit: asks for [cpu 5000m, memory 1GiB, disk 0, ports 2], machine m0 has [cpu 3000m, memory 31GiB, disk 100GiB, ports 98] free for a prod task"},
		{Placement{Task: key("alice", "arm", 0), Machine: "m0", MachineVersion: v}, "machine m0 does not meet constraint arch=arm64"},
		{Placement{Task: key("alice", "big", 0), Machine: "m0", MachineVersion: v}, "task alice/big/0 is scheduled, not pending"},
		{Placement{Task: key("alice", "big", 1), Machine: "m9", MachineVersion: v}, `machine "m9" is not registered`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			got := PlaceTasks{Meta: root, Placements: []Placement{tc.p}}.Check(c.s)
			if len(got) != 1 || got[0].Reason != tc.want {
				t.Errorf("got %v\nwant %s", got, tc.want)
			}
		})
	}
	// Proposed ports must be free and in the machine's range.
	c.do(KillJob{Meta: alice, Name: "arm"})
	small := spec("small", 9, 3)
	small.Resources = &events.Resources{CpuMilli: 100, MemoryBytes: gib, Ports: 1}
	c.do(SubmitJob{Meta: alice, Spec: small})
	v = c.s.Machines["m0"].Version
	got := PlaceTasks{Meta: root, Placements: []Placement{
		{Task: key("alice", "small", 0), Machine: "m0", MachineVersion: v, Ports: []int32{20001}},
		{Task: key("alice", "small", 1), Machine: "m0", MachineVersion: v, Ports: []int32{30000}},
		{Task: key("alice", "small", 2), Machine: "m0", MachineVersion: v, Ports: []int32{20005, 20006}},
	}}.Check(c.s)
	if len(got) != 3 || got[0].Reason != "port 20001 on machine m0 is taken" || got[1].Reason != "port 30000 is outside machine m0's range 20000-20099" ||
		got[2].Reason != "task alice/small/2 asks for 1 ports, 2 proposed" {
		t.Fatalf("%v", got)
	}
}

func TestPlaceTasksPreempts(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.quota("alice", "production", 8000, 32*gib)
	c.quota("bob", "batch", 8000, 32*gib)
	low := spec("low", 0, 1)
	low.Resources = res(6000, gib)
	c.do(SubmitJob{Meta: bob, Spec: low})
	batch := spec("batch", 4, 1)
	batch.Resources = res(2000, gib)
	c.do(SubmitJob{Meta: bob, Spec: batch})
	c.place("bob", "low", 0, "m0")
	c.place("bob", "batch", 0, "m0")
	c.start("m0")
	prod := spec("prod", 9, 1)
	prod.Resources = res(6000, gib)
	c.do(SubmitJob{Meta: alice, Spec: prod})
	v := c.s.Machines["m0"].Version
	// Without preemption it does not fit; a victim of higher priority is refused.
	got := PlaceTasks{Meta: root, Placements: []Placement{{Task: key("alice", "prod", 0), Machine: "m0", MachineVersion: v}}}.Check(c.s)
	if len(got) != 1 || !strings.HasPrefix(got[0].Reason, "does not fit") {
		t.Fatal(got)
	}
	evs := c.do(PlaceTasks{Meta: root, Placements: []Placement{{Task: key("alice", "prod", 0), Machine: "m0", MachineVersion: v,
		Preempt: []projections.TaskKey{key("bob", "low", 0)}}}})
	checkEvents(t, evs, []expect{
		{"task/bob/low/0", &events.TaskEvicted{User: "bob", Job: "low", Index: 0, Machine: "m0", Reason: "preempted",
			Preemptor: &events.TaskRef{User: "alice", Job: "prod", Index: 0}, Message: "preempted by alice/prod/0 at priority 9"}},
		{"task/bob/low/0", &events.TaskSubmitted{User: "bob", Job: "low", Index: 0, SpecVersion: 1, Reason: "rescheduled"}},
		{"task/alice/prod/0", &events.TaskScheduled{User: "alice", Job: "prod", Index: 0, Machine: "m0", SpecVersion: 1, MachineVersion: v,
			Preempted: []*events.TaskRef{{User: "bob", Job: "low", Index: 0}}}},
	})
	// Prod does not preempt prod; nothing preempts an equal priority.
	c.do(SubmitJob{Meta: alice, Spec: spec("prod2", 10, 1)})
	v = c.s.Machines["m0"].Version
	got = PlaceTasks{Meta: root, Placements: []Placement{
		{Task: key("alice", "prod2", 0), Machine: "m0", MachineVersion: v, Preempt: []projections.TaskKey{key("alice", "prod", 0)}},
	}}.Check(c.s)
	if len(got) != 1 || got[0].Reason != "victim alice/prod/0 at priority 9, the task at 10: prod tasks do not preempt each other" {
		t.Fatal(got)
	}
	got = PlaceTasks{Meta: root, Placements: []Placement{
		{Task: key("bob", "low", 0), Machine: "m0", MachineVersion: v, Preempt: []projections.TaskKey{key("bob", "batch", 0)}},
	}}.Check(c.s)
	if len(got) != 1 || got[0].Reason != "victim bob/batch/0 at priority 4, the task at 0: only a lower priority is preempted" {
		t.Fatal(got)
	}
}
