package scheduler

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Helpers to build cells in tests.

func machineOf(name string, cpuCores, memGiB int64, attrs ...string) *Machine {
	m := &Machine{Name: name, Version: 1, Capacity: Resources{CPU: cpuCores * 1000, Memory: memGiB << 30, Ports: 100}, PortBase: 30000}
	if len(attrs) > 0 {
		m.Attributes = map[string]string{}
		for _, kv := range attrs {
			k, v, _ := strings.Cut(kv, "=")
			m.Attributes[k] = v
		}
	}
	return m
}

func res(cpuMilli, memGiB int64) Resources {
	return Resources{CPU: cpuMilli, Memory: memGiB << 30}
}

func ref(user, job string, index int32) TaskRef { return TaskRef{User: user, Job: job, Index: index} }

func pendingOf(user, job string, n int, prio int32, r Resources) []PendingTask {
	out := make([]PendingTask, n)
	for i := range out {
		out[i] = PendingTask{Ref: ref(user, job, int32(i)), Priority: prio, SpecVersion: 1, Resources: r}
	}
	return out
}

func placedOf(user, job string, index, prio int32, limit, reservation Resources) PlacedTask {
	return PlacedTask{Ref: ref(user, job, index), Priority: prio, Limit: limit, Reservation: reservation}
}

func numberSeq(tasks []PendingTask) []PendingTask {
	for i := range tasks {
		tasks[i].Seq = int64(i + 1)
	}
	return tasks
}

func TestConstraintOps(t *testing.T) {
	attrs := map[string]string{"arch": "x86_64", "gen": "10", "zone": "b", "name": "beta"}
	tests := []struct {
		c    Constraint
		want bool
	}{
		{Constraint{Attribute: "arch", Op: OpEq, Values: []string{"x86_64"}}, true},
		{Constraint{Attribute: "arch", Op: OpEq, Values: []string{"arm64"}}, false},
		{Constraint{Attribute: "missing", Op: OpEq, Values: []string{""}}, false},
		{Constraint{Attribute: "arch", Op: OpNe, Values: []string{"arm64"}}, true},
		{Constraint{Attribute: "arch", Op: OpNe, Values: []string{"x86_64"}}, false},
		{Constraint{Attribute: "missing", Op: OpNe, Values: []string{"x"}}, true},
		{Constraint{Attribute: "gen", Op: OpLt, Values: []string{"9"}}, false}, // numeric: 10 < 9 is false
		{Constraint{Attribute: "gen", Op: OpGt, Values: []string{"9"}}, true},  // as strings "10" < "9"
		{Constraint{Attribute: "gen", Op: OpLt, Values: []string{"10.5"}}, true},
		{Constraint{Attribute: "gen", Op: OpGt, Values: []string{"10"}}, false},
		{Constraint{Attribute: "name", Op: OpLt, Values: []string{"gamma"}}, true}, // strings
		{Constraint{Attribute: "name", Op: OpGt, Values: []string{"gamma"}}, false},
		{Constraint{Attribute: "missing", Op: OpGt, Values: []string{"0"}}, false},
		{Constraint{Attribute: "zone", Op: OpIn, Values: []string{"a", "b"}}, true},
		{Constraint{Attribute: "zone", Op: OpIn, Values: []string{"a", "c"}}, false},
		{Constraint{Attribute: "zone", Op: OpIn, Values: []string{"a", "c", "d", "e", "f", "b"}}, true}, // the map path
		{Constraint{Attribute: "missing", Op: OpIn, Values: []string{"a"}}, false},
		{Constraint{Attribute: "zone", Op: OpExists}, true},
		{Constraint{Attribute: "missing", Op: OpExists}, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.c), func(t *testing.T) {
			cc := compileConstraint(tc.c)
			if got := cc.matches(attrs); got != tc.want {
				t.Errorf("%s on %v: got %v, want %v", tc.c, attrs, got, tc.want)
			}
		})
	}
}

// Every operator of Ops takes the values its arity says and no other
// count, is named in the message that lists them, and the matcher knows it:
// a machine with the attribute is judged without falling to the default.
func TestOpsListedOnce(t *testing.T) {
	for _, op := range Ops {
		t.Run(string(op), func(t *testing.T) {
			lo, hi := op.Values()
			values := func(n int) []string { return slices.Repeat([]string{"1"}, n) }
			if err := (Constraint{Attribute: "a", Op: op, Values: values(lo)}).validate(); err != nil {
				t.Errorf("%d values: %v", lo, err)
			}
			if lo > 0 {
				if err := (Constraint{Attribute: "a", Op: op, Values: values(lo - 1)}).validate(); err == nil {
					t.Errorf("%d values accepted", lo-1)
				}
			}
			if hi >= 0 {
				if err := (Constraint{Attribute: "a", Op: op, Values: values(hi + 1)}).validate(); err == nil {
					t.Errorf("%d values accepted", hi+1)
				}
			}
			if !strings.Contains(OpNames(), string(op)) {
				t.Errorf("OpNames() = %q leaves it out", OpNames())
			}
			if !op.Valid() {
				t.Error("not valid")
			}
			c := compileConstraint(Constraint{Attribute: "a", Op: op, Values: values(lo)})
			matched := false
			for _, attrs := range []map[string]string{{"a": "0"}, {"a": "1"}, {"a": "2"}} {
				matched = matched || c.matches(attrs)
			}
			if !matched {
				t.Error("the matcher matches no machine: it does not know the operator")
			}
		})
	}
	if Op("~").Valid() {
		t.Error(`"~" is valid`)
	}
}

func TestConstraintValidate(t *testing.T) {
	tests := []struct {
		c    Constraint
		want string
	}{
		{Constraint{Attribute: "a", Op: OpEq, Values: []string{"x"}}, ""},
		{Constraint{Op: OpEq, Values: []string{"x"}}, "attribute: empty"},
		{Constraint{Attribute: "a", Op: OpEq}, "needs exactly one value"},
		{Constraint{Attribute: "a", Op: OpIn}, "one or more"},
		{Constraint{Attribute: "a", Op: OpExists, Values: []string{"x"}}, "takes no value"},
		{Constraint{Attribute: "a", Op: "~"}, "want one of"},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			err := tc.c.validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("%+v: got %v, want %q", tc.c, err, tc.want)
			}
		})
	}
}

func TestCellValidate(t *testing.T) {
	good := func() *Cell {
		return &Cell{Machines: []*Machine{machineOf("m1", 4, 8)}, Pending: pendingOf("a", "j", 1, 5, res(100, 1))}
	}
	tests := []struct {
		name   string
		change func(*Cell)
		want   string
	}{
		{"good", func(*Cell) {}, ""},
		{"duplicate machine", func(c *Cell) { c.Machines = append(c.Machines, machineOf("m1", 1, 1)) }, `"m1" appears twice`},
		{"unnamed machine", func(c *Cell) { c.Machines[0].Name = "" }, "name: empty"},
		{"negative capacity", func(c *Cell) { c.Machines[0].Capacity[Memory] = -1 }, "memory is negative"},
		{"priority", func(c *Cell) { c.Pending[0].Priority = 12 }, "priority 12 outside 0-11"},
		{"duplicate task", func(c *Cell) { c.Pending = append(c.Pending, c.Pending[0]) }, "appears twice"},
		{"bad constraint", func(c *Cell) {
			c.Pending[0].Constraints = []Constraint{{Attribute: "a", Op: "=="}}
		}, "constraints[0]: op"},
		{"alloc without set", func(c *Cell) { c.PendingAllocs = []PendingAlloc{{Index: 0}} }, "set.name: empty"},
		{"duplicate alloc", func(c *Cell) {
			a := PendingAlloc{Set: AllocSetRef{User: "u", Name: "s"}}
			c.PendingAllocs = []PendingAlloc{a, a}
		}, "alloc u/s/0 appears twice"},
		{"alloc priority", func(c *Cell) {
			c.PendingAllocs = []PendingAlloc{{Set: AllocSetRef{User: "u", Name: "s"}, Priority: -1}}
		}, "priority -1 outside"},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			c := good()
			tc.change(c)
			err := c.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
			}
		})
	}
}

// queueNames is the queue's order as user/job/index names.
func queueNames(pending []PendingTask, size []float64) []string {
	var names []string
	for _, i := range queueOrder(pending, len(pending), size) {
		r := pending[i].Ref
		names = append(names, fmt.Sprintf("%s/%s/%d", r.User, r.Job, r.Index))
	}
	return names
}

func TestQueueOrderRoundRobin(t *testing.T) {
	var pending []PendingTask
	pending = append(pending, pendingOf("alice", "big", 5, 5, res(100, 1))...)
	pending = append(pending, pendingOf("bob", "small", 2, 5, res(100, 1))...)
	pending = append(pending, pendingOf("carol", "one", 1, 5, res(100, 1))...)
	pending = append(pending, pendingOf("bob", "urgent", 1, 9, res(100, 1))...)
	pending = append(pending, pendingOf("dave", "late", 1, 0, res(100, 1))...)
	numberSeq(pending)
	got := queueNames(pending, nil)
	want := []string{
		"bob/urgent/0", // higher priority first
		// priority 5: users take turns, oldest first: alice, bob, carol
		"alice/big/0", "bob/small/0", "carol/one/0",
		"alice/big/1", "bob/small/1",
		"alice/big/2", "alice/big/3", "alice/big/4",
		"dave/late/0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("queue order:\n got %v\nwant %v", got, want)
	}
}

// Each user's tasks of one priority go largest first; users still take
// turns, in the order of their oldest task, and tasks of one size keep
// their submission order.
func TestQueueOrderLargestFirstWithinAUser(t *testing.T) {
	var pending []PendingTask
	pending = append(pending, pendingOf("alice", "small", 2, 5, res(100, 1))...)
	pending = append(pending, pendingOf("bob", "mid", 1, 5, res(500, 1))...)
	pending = append(pending, pendingOf("alice", "large", 2, 5, res(900, 1))...)
	pending = append(pending, pendingOf("alice", "urgent", 1, 9, res(10, 1))...)
	numberSeq(pending)
	size := make([]float64, len(pending))
	for i := range pending {
		size[i] = float64(pending[i].Resources[CPU])
	}
	got := queueNames(pending, size)
	want := []string{
		"alice/urgent/0", // priority first, whatever the size
		// alice's oldest task is older than bob's: she goes first, with
		// her largest
		"alice/large/0", "bob/mid/0",
		"alice/large/1", "alice/small/0", "alice/small/1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("queue order:\n got %v\nwant %v", got, want)
	}
}

// Largest first packs what submission order cannot: small tasks that came
// first would take a share of every machine, and the large ones that came
// after would find none whole.
func TestLargestFirstPacksACellSubmissionOrderCannot(t *testing.T) {
	var ms []*Machine
	for i := range 4 {
		ms = append(ms, machineOf(fmt.Sprintf("m%d", i), 8, 64))
	}
	pending := pendingOf("alice", "small", 8, 5, res(2000, 1)) // 16 cores
	pending = append(pending, pendingOf("alice", "large", 2, 5, res(8000, 1))...)
	numberSeq(pending)
	for _, policy := range Policies {
		cfg := DefaultConfig()
		cfg.Policy = policy
		// In one run: neither the rerun (reorder.go) nor relocation
		// (relocate.go) had to mend the order.
		plan := Schedule(&Cell{Machines: ms, Pending: pending}, cfg, 1)
		if plan.Stats.Placed != len(pending) || plan.Stats.Reruns != 0 || plan.Stats.Unblocked != 0 {
			t.Errorf("%s: placed %d of %d, reruns %d, unblocked %d; want all in one run", policy,
				plan.Stats.Placed, len(pending), plan.Stats.Reruns, plan.Stats.Unblocked)
		}
	}
}

// Where nearly every GPU is asked for, work that asks for none goes to
// machines without free GPUs, even when its random sample of K machines
// holds only GPU machines: taking the CPU beside a free GPU would leave
// that GPU to no one.
func TestCPUWorkLeavesGPUMachinesToGPUWork(t *testing.T) {
	var ms []*Machine
	for i := range 20 {
		m := machineOf(fmt.Sprintf("gpu%02d", i), 16, 64)
		m.Capacity[GPU] = 4000
		ms = append(ms, m)
	}
	ms = append(ms, machineOf("cpu0", 12, 64), machineOf("cpu1", 12, 64))
	pending := pendingOf("a", "svc", 4, 9, res(6000, 1)) // prod: placed first
	gpuTask := res(3000, 1)
	gpuTask[GPU] = 1000
	pending = numberSeq(append(pending, pendingOf("a", "train", 80, 5, gpuTask)...)) // every GPU
	for seed := uint64(1); seed <= 5; seed++ {
		cfg := DefaultConfig()
		cfg.FeasibleK = 4 // a GPU machine keeping GPUs free counts 1/8: the pool grows to 32
		plan := Schedule(&Cell{Machines: ms, Pending: pending}, cfg, seed)
		if plan.Stats.Placed != len(pending) || plan.Stats.Reruns != 0 || plan.Stats.Unblocked != 0 {
			t.Errorf("seed %d: placed %d of %d, reruns %d, unblocked %d; want all in one run", seed,
				plan.Stats.Placed, len(pending), plan.Stats.Reruns, plan.Stats.Unblocked)
		}
		for _, p := range plan.Placements {
			if p.Task.Job == "svc" && !strings.HasPrefix(p.Machine, "cpu") {
				t.Errorf("seed %d: %s on %s, want a machine without GPUs", seed, p.Task, p.Machine)
			}
		}
	}
}

// TestRoundRobinFairness: a user with one huge job does not starve another
// user's small job in a cell that can hold only part of the queue.
func TestRoundRobinFairness(t *testing.T) {
	var ms []*Machine
	for i := range 10 {
		ms = append(ms, machineOf(fmt.Sprintf("m%d", i), 4, 64))
	}
	pending := pendingOf("alice", "huge", 100, 5, res(1000, 1))
	pending = append(pending, pendingOf("bob", "small", 5, 5, res(1000, 1))...)
	numberSeq(pending)
	plan := Schedule(&Cell{Machines: ms, Pending: pending}, DefaultConfig(), 1)
	bob := 0
	for _, p := range plan.Placements {
		if p.Task.User == "bob" {
			bob++
		}
	}
	if plan.Stats.Placed != 40 || bob != 5 {
		t.Errorf("placed %d, bob's %d; want 40 and all 5 of bob's", plan.Stats.Placed, bob)
	}
}

func TestCanPreempt(t *testing.T) {
	tests := []struct {
		preemptor, victim int32
		want              bool
	}{
		{5, 4, true},
		{5, 5, false}, // equal priority never
		{4, 5, false},
		{9, 8, true},   // production evicts batch
		{9, 0, true},   // and best-effort
		{10, 9, false}, // prod never preempts prod
		{11, 10, false},
		{11, 9, false}, // monitoring never preempts production
		{11, 8, true},
		{2, 1, true}, // batch evicts best-effort
		{1, 0, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d over %d", tc.preemptor, tc.victim), func(t *testing.T) {
			if got := CanPreempt(tc.preemptor, tc.victim); got != tc.want {
				t.Errorf("CanPreempt(%d, %d) = %v, want %v", tc.preemptor, tc.victim, got, tc.want)
			}
		})
	}
}

// TestProdAccounting: prod tasks count the limits of the tasks on a machine,
// non-prod tasks their reservations.
func TestProdAccounting(t *testing.T) {
	newCell := func(p PendingTask) *Cell {
		m := machineOf("m1", 8, 32)
		// A prod task with a 4-core limit and a 1-core reservation, and a
		// best-effort one with a 2-core limit and a 1-core reservation.
		m.Tasks = []PlacedTask{
			placedOf("u", "prod", 0, 10, res(4000, 4), res(1000, 4)),
			placedOf("u", "be", 0, 0, res(2000, 1), res(1000, 1)),
		}
		return &Cell{Machines: []*Machine{m}, Pending: []PendingTask{p}}
	}
	tests := []struct {
		name     string
		prio     int32
		cpu      int64
		placed   bool
		preempts bool
	}{
		// Limits: 8 - 4 - 2 = 2 cores free; evicting best-effort frees 2 more.
		{"prod fits in limits", 9, 2000, true, false},
		{"prod needs the best-effort task's limit", 9, 3000, true, true},
		{"prod cannot use the prod task's unused limit", 9, 5000, false, false},
		// Reservations: 8 - 1 - 1 = 6 free; evicting best-effort frees 1.
		{"batch uses reclaimed room", 5, 6000, true, false},
		{"batch preempts best-effort", 5, 7000, true, true},
		{"batch cannot preempt prod", 5, 7500, false, false},
		{"best-effort cannot preempt best-effort", 0, 7000, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PendingTask{Ref: ref("x", "t", 0), Priority: tc.prio, Resources: res(tc.cpu, 1)}
			plan := Schedule(newCell(p), DefaultConfig(), 1)
			placed := len(plan.Placements) == 1
			preempts := placed && len(plan.Placements[0].Preempted) > 0
			if placed != tc.placed || preempts != tc.preempts {
				t.Errorf("%s: placed %v preempts %v; want %v %v", tc.name, placed, preempts, tc.placed, tc.preempts)
			}
			if placed && preempts && plan.Placements[0].Preempted[0] != ref("u", "be", 0) {
				t.Errorf("%s: preempted %v, want the best-effort task", tc.name, plan.Placements[0].Preempted)
			}
			if !placed && (len(plan.Pending) != 1 || plan.Pending[0].Rejections[0].Reason != ReasonCPU) {
				t.Errorf("%s: explanation %+v, want one rejection for cpu", tc.name, plan.Pending)
			}
		})
	}
}

// TestPreemptionOrder: lowest priority first, larger first within a
// priority, unnecessary victims spared, prod never touched.
func TestPreemptionOrder(t *testing.T) {
	tests := []struct {
		name   string
		placed []PlacedTask
		prio   int32
		cpu    int64
		want   []TaskRef
	}{
		{
			name: "lowest priority first",
			placed: []PlacedTask{
				placedOf("u", "p3", 0, 3, res(4000, 1), res(4000, 1)),
				placedOf("u", "p1", 0, 1, res(4000, 1), res(4000, 1)),
			},
			prio: 5, cpu: 4000,
			want: []TaskRef{ref("u", "p1", 0)},
		},
		{
			name: "larger first within a priority, smaller spared",
			placed: []PlacedTask{
				placedOf("u", "small", 0, 1, res(1000, 1), res(1000, 1)),
				placedOf("u", "large", 0, 1, res(3000, 1), res(3000, 1)),
				placedOf("u", "other", 0, 2, res(4000, 1), res(4000, 1)),
			},
			prio: 5, cpu: 3000,
			want: []TaskRef{ref("u", "large", 0)},
		},
		{
			name: "several, lowest first, in eviction order",
			placed: []PlacedTask{
				placedOf("u", "a", 0, 4, res(2000, 1), res(2000, 1)),
				placedOf("u", "b", 0, 0, res(2000, 1), res(2000, 1)),
				placedOf("u", "c", 0, 2, res(2000, 1), res(2000, 1)),
				placedOf("u", "d", 0, 6, res(2000, 1), res(2000, 1)),
			},
			prio: 5, cpu: 6000,
			want: []TaskRef{ref("u", "b", 0), ref("u", "c", 0), ref("u", "a", 0)},
		},
		{
			name: "prod evicts batch, never prod",
			placed: []PlacedTask{
				placedOf("u", "prod9", 0, 9, res(4000, 1), res(4000, 1)),
				placedOf("u", "batch", 0, 8, res(4000, 1), res(4000, 1)),
			},
			prio: 11, cpu: 4000,
			want: []TaskRef{ref("u", "batch", 0)},
		},
		{
			name: "monitoring cannot evict production",
			placed: []PlacedTask{
				placedOf("u", "prod9", 0, 9, res(6000, 1), res(6000, 1)),
				placedOf("u", "batch", 0, 8, res(2000, 1), res(2000, 1)),
			},
			prio: 11, cpu: 4000,
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := machineOf("m1", 8, 64)
			m.Tasks = tc.placed
			cell := &Cell{Machines: []*Machine{m}, Pending: []PendingTask{{Ref: ref("x", "new", 0), Priority: tc.prio, Resources: res(tc.cpu, 1)}}}
			plan := Schedule(cell, DefaultConfig(), 1)
			var got []TaskRef
			if len(plan.Placements) == 1 {
				got = plan.Placements[0].Preempted
				if plan.Stats.Preemptions != len(got) {
					t.Errorf("%s: stats count %d preemptions, placement %d", tc.name, plan.Stats.Preemptions, len(got))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: preempted %v, want %v", tc.name, got, tc.want)
			}
			if tc.want == nil && len(plan.Pending) != 1 {
				t.Errorf("%s: want the task pending, got %d explanations", tc.name, len(plan.Pending))
			}
		})
	}
}

// TestPreemptionAvoidedWhenRoomElsewhere: a machine with free room beats one
// that needs an eviction, whatever the policy.
func TestPreemptionAvoidedWhenRoomElsewhere(t *testing.T) {
	for _, policy := range Policies {
		busy := machineOf("busy", 8, 64)
		busy.Tasks = []PlacedTask{placedOf("u", "be", 0, 0, res(7000, 1), res(7000, 1))}
		free := machineOf("free", 8, 64)
		free.Tasks = []PlacedTask{placedOf("u", "other", 0, 9, res(5000, 60), res(5000, 60))}
		cfg := DefaultConfig()
		cfg.Policy = policy
		plan := Schedule(&Cell{Machines: []*Machine{busy, free}, Pending: []PendingTask{{Ref: ref("x", "t", 0), Priority: 9, Resources: res(2000, 1)}}}, cfg, 1)
		if len(plan.Placements) != 1 || plan.Placements[0].Machine != "free" {
			t.Errorf("%s: placements %+v, want the machine with room", policy, plan.Placements)
		}
	}
}

func TestPortsAssigned(t *testing.T) {
	m := machineOf("m1", 64, 64)
	m.Capacity[Ports] = 6
	m.Tasks = []PlacedTask{
		{Ref: ref("u", "a", 0), Priority: 9, Limit: Resources{CPU: 100, Ports: 2}, Reservation: Resources{CPU: 100}, Ports: []int32{30000, 30002}},
		{Ref: ref("u", "be", 0), Priority: 0, Limit: Resources{CPU: 100, Ports: 1}, Reservation: Resources{CPU: 100}, Ports: []int32{30001}},
	}
	pending := []PendingTask{
		{Ref: ref("x", "p", 0), Priority: 9, Seq: 1, Resources: Resources{CPU: 100, Ports: 2}},
		{Ref: ref("x", "p", 1), Priority: 9, Seq: 2, Resources: Resources{CPU: 100, Ports: 2}},
	}
	plan := Schedule(&Cell{Machines: []*Machine{m}, Pending: pending}, DefaultConfig(), 1)
	if len(plan.Placements) != 2 {
		t.Fatalf("placements %+v pending %+v", plan.Placements, plan.Pending)
	}
	// 6 ports, 3 held: the first task gets the two free ones, the second
	// needs the best-effort task's port and evicts it.
	if got := plan.Placements[0].Ports; !slices.Equal(got, []int32{30003, 30004}) {
		t.Errorf("first ports %v", got)
	}
	if got := plan.Placements[1]; !slices.Equal(got.Ports, []int32{30001, 30005}) || len(got.Preempted) != 1 {
		t.Errorf("second: ports %v preempted %v", got.Ports, got.Preempted)
	}
}

// TestEquivalenceClasses: identical requirements share a class whatever the
// job; any difference splits it.
func TestEquivalenceClasses(t *testing.T) {
	base := PendingTask{Ref: ref("a", "j", 0), Priority: 5, Resources: res(500, 1),
		Constraints: []Constraint{{Attribute: "arch", Op: OpEq, Values: []string{"x86_64"}}}}
	variant := func(change func(*PendingTask)) PendingTask {
		t := base
		t.Ref = ref("b", "other", 0)
		t.Constraints = slices.Clone(base.Constraints)
		change(&t)
		return t
	}
	tests := []struct {
		name string
		t    PendingTask
		same bool
	}{
		{"another job, same requirements", variant(func(*PendingTask) {}), true},
		{"another spec version", variant(func(t *PendingTask) { t.SpecVersion = 9 }), true},
		{"priority", variant(func(t *PendingTask) { t.Priority = 6 }), false},
		{"cpu", variant(func(t *PendingTask) { t.Resources[CPU]++ }), false},
		{"ports", variant(func(t *PendingTask) { t.Resources[Ports] = 1 }), false},
		{"constraint value", variant(func(t *PendingTask) { t.Constraints[0].Values = []string{"arm64"} }), false},
		{"soft instead of hard", variant(func(t *PendingTask) { t.Constraints[0].Soft = true }), false},
		{"package", variant(func(t *PendingTask) { t.Package = "p" }), false},
		{"alloc set", variant(func(t *PendingTask) { t.AllocSet = "s" }), false},
		{"crash history", variant(func(t *PendingTask) { t.CrashedOn = []string{"m1"} }), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := classKey(nil, &base)
			b := classKey(nil, &tc.t)
			if same := string(a) == string(b); same != tc.same {
				t.Errorf("%s: same class %v, want %v", tc.name, same, tc.same)
			}
		})
	}
	x := base
	x.CrashedOn = []string{"m2", "m1"}
	y := base
	y.CrashedOn = []string{"m1", "m2"}
	if string(classKey(nil, &x)) != string(classKey(nil, &y)) {
		t.Error("crash history order splits the class")
	}
}

// TestEquivalenceClassesCheckOnce: a job of 200 identical tasks on 50
// machines is checked against each machine once, plus once per placement
// for the machine that changed, not 200 x 50 times.
func TestEquivalenceClassesCheckOnce(t *testing.T) {
	var ms []*Machine
	for i := range 50 {
		ms = append(ms, machineOf(fmt.Sprintf("m%02d", i), 64, 256))
	}
	pending := numberSeq(pendingOf("a", "web", 100, 5, res(500, 1)))
	pending = append(pending, numberSeq(pendingOf("b", "web", 100, 5, res(500, 1)))...)
	cfg := DefaultConfig()
	cfg.FeasibleK = 0
	plan := Schedule(&Cell{Machines: ms, Pending: pending}, cfg, 1)
	if plan.Stats.Classes != 1 || plan.Stats.Placed != 200 {
		t.Fatalf("classes %d placed %d; want 1 and 200", plan.Stats.Classes, plan.Stats.Placed)
	}
	if max := 50 + 200; plan.Stats.FeasibilityChecks > max {
		t.Errorf("%d feasibility checks, want at most %d", plan.Stats.FeasibilityChecks, max)
	}
	if plan.Stats.ScoreCacheHits < 199*49 {
		t.Errorf("%d score cache hits, want at least %d", plan.Stats.ScoreCacheHits, 199*49)
	}
}

// TestScoreCacheInvalidation: a pool entry is reused while its machine is
// unchanged and re-evaluated when the machine changes, whichever class
// changed it.
func TestScoreCacheInvalidation(t *testing.T) {
	a, b := machineOf("a", 4, 64), machineOf("b", 4, 64)
	a.Tasks = []PlacedTask{placedOf("u", "x", 0, 9, res(1000, 1), res(1000, 1))} // a is the tighter fit
	// Alice's and bob's tasks alternate (round-robin), in two classes.
	pending := []PendingTask{
		{Ref: ref("alice", "j", 0), Priority: 9, Seq: 1, Resources: res(3000, 1)},
		{Ref: ref("alice", "j", 1), Priority: 9, Seq: 3, Resources: res(3000, 1)},
		{Ref: ref("bob", "k", 0), Priority: 9, Seq: 2, Resources: res(2000, 2)},
	}
	cfg := DefaultConfig()
	cfg.Policy = PolicyBestFit
	cfg.FeasibleK = 0
	plan := Schedule(&Cell{Machines: []*Machine{a, b}, Pending: pending}, cfg, 1)
	got := map[TaskRef]string{}
	for _, p := range plan.Placements {
		got[p.Task] = p.Machine
	}
	// alice/j/0 fills a (best fit). bob's class examined both before; a
	// changed, so its entry is re-evaluated (now infeasible) and bob goes
	// to b. alice's second task re-evaluates b (changed by bob) and finds
	// no room: 4 - 2 = 2 cores < 3.
	want := map[TaskRef]string{ref("alice", "j", 0): "a", ref("bob", "k", 0): "b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("placements %v, want %v", got, want)
	}
	// Checks: alice's class scans a and b (2); bob's class, built after
	// alice placed, scans a and b (2); alice's second pick finds both her
	// entries stale (a changed by her, b by bob) and re-checks them (2).
	if plan.Stats.FeasibilityChecks != 6 {
		t.Errorf("%d feasibility checks, want 6", plan.Stats.FeasibilityChecks)
	}
	if len(plan.Pending) != 1 || plan.Pending[0].Tasks[0] != ref("alice", "j", 1) {
		t.Errorf("pending %+v, want alice/j/1", plan.Pending)
	}
}

// TestRelaxedRandomization: with K feasible machines wanted, a class
// examines about K machines, not the whole cell.
func TestRelaxedRandomization(t *testing.T) {
	var ms []*Machine
	for i := range 1000 {
		ms = append(ms, machineOf(fmt.Sprintf("m%04d", i), 16, 64))
	}
	for _, k := range []int{1, 10, 100} {
		cfg := DefaultConfig()
		cfg.FeasibleK = k
		plan := Schedule(&Cell{Machines: ms, Pending: pendingOf("a", "j", 1, 5, res(100, 1))}, cfg, 1)
		if got := plan.Placements[0].MachinesExamined; got != int32(k) {
			t.Errorf("K=%d: examined %d machines", k, got)
		}
	}
	// Different seeds pick different machines for a lone task.
	seen := map[string]bool{}
	for seed := range uint64(20) {
		cfg := DefaultConfig()
		cfg.FeasibleK = 1
		plan := Schedule(&Cell{Machines: ms, Pending: pendingOf("a", "j", 1, 5, res(100, 1))}, cfg, seed)
		seen[plan.Placements[0].Machine] = true
	}
	if len(seen) < 15 {
		t.Errorf("20 seeds chose only %d distinct machines", len(seen))
	}
}

func TestSoftConstraintsAndPolicies(t *testing.T) {
	// Two empty machines and one half full; a soft constraint prefers the
	// half-full one's zone under every policy.
	mk := func() []*Machine {
		a, b, c := machineOf("a", 16, 64, "zone=x"), machineOf("b", 16, 64, "zone=y"), machineOf("c", 16, 64, "zone=z")
		c.Tasks = []PlacedTask{placedOf("u", "x", 0, 9, res(8000, 32), res(8000, 32))}
		return []*Machine{a, b, c}
	}
	for _, policy := range Policies {
		cfg := DefaultConfig()
		cfg.Policy = policy
		p := PendingTask{Ref: ref("a", "j", 0), Priority: 5, Resources: res(1000, 4),
			Constraints: []Constraint{{Attribute: "zone", Op: OpEq, Values: []string{"c"}, Soft: true}}}
		// No machine satisfies the soft constraint: it is only a preference.
		if plan := Schedule(&Cell{Machines: mk(), Pending: []PendingTask{p}}, cfg, 1); plan.Stats.Placed != 1 {
			t.Errorf("%s: a soft constraint kept the task pending", policy)
		}
		p.Constraints[0].Values = []string{"y"}
		if plan := Schedule(&Cell{Machines: mk(), Pending: []PendingTask{p}}, cfg, 1); plan.Placements[0].Machine != "b" {
			t.Errorf("%s: soft zone=y chose %s", policy, plan.Placements[0].Machine)
		}
		// Without preferences, best-fit and hybrid pick the fuller machine,
		// worst-fit an empty one.
		p.Constraints = nil
		plan := Schedule(&Cell{Machines: mk(), Pending: []PendingTask{p}}, cfg, 1)
		want := "c"
		if policy == PolicyWorstFit {
			want = "a or b"
		}
		if got := plan.Placements[0].Machine; got != want && !strings.Contains(want, got) {
			t.Errorf("%s chose %s, want %s", policy, got, want)
		}
	}
}

func TestDownAndDrainingMachinesSkipped(t *testing.T) {
	up, down, draining := machineOf("up", 4, 8), machineOf("down", 64, 256), machineOf("drain", 64, 256)
	down.State, draining.State = MachineDown, MachineDraining
	plan := Schedule(&Cell{Machines: []*Machine{down, draining, up}, Pending: numberSeq(pendingOf("a", "j", 3, 5, res(1500, 1)))}, DefaultConfig(), 1)
	for _, p := range plan.Placements {
		if p.Machine != "up" {
			t.Errorf("placed on %s", p.Machine)
		}
	}
	if plan.Stats.Placed != 2 || len(plan.Pending) != 1 {
		t.Fatalf("placed %d, explanations %d", plan.Stats.Placed, len(plan.Pending))
	}
	want := []Rejection{{Reason: ReasonCPU, Machines: 1}, {Reason: ReasonDown, Machines: 1}, {Reason: ReasonDraining, Machines: 1}}
	got := slices.Clone(plan.Pending[0].Rejections)
	slices.SortFunc(got, func(a, b Rejection) int { return int(a.Reason) - int(b.Reason) })
	slices.SortFunc(want, func(a, b Rejection) int { return int(a.Reason) - int(b.Reason) })
	if !slices.Equal(got, want) {
		t.Errorf("rejections %v, want %v", got, want)
	}
}

// TestWhyPendingHints: the hints name numbers a user can act on.
func TestWhyPendingHints(t *testing.T) {
	var ms []*Machine
	// 140 machines with 3.2 GiB free, 60 with 1 GiB free, all with cores.
	for i := range 200 {
		zone, gen := "zone=a", "gen=1"
		if i%2 == 1 {
			zone, gen = "zone=b", "gen=2"
		}
		m := machineOf(fmt.Sprintf("m%03d", i), 16, 8, "arch=x86_64", zone, gen)
		used := int64(8<<30) - int64(3.2*gibF)
		if i >= 140 {
			used = 7 << 30
		}
		m.Tasks = []PlacedTask{{Ref: ref("u", "hog", int32(i)), Priority: 10, Limit: Resources{CPU: 1000, Memory: used}, Reservation: Resources{CPU: 1000, Memory: used}}}
		ms = append(ms, m)
	}
	pending := numberSeq(pendingOf("a", "big", 300, 9, res(1000, 4)))
	pending = append(pending, PendingTask{Ref: ref("a", "arm", 0), Priority: 9, Seq: 1000, Resources: res(100, 1),
		Constraints: []Constraint{{Attribute: "arch", Op: OpEq, Values: []string{"arm64"}}}})
	pending = append(pending, PendingTask{Ref: ref("a", "both", 0), Priority: 9, Seq: 1001, Resources: res(100, 1),
		Constraints: []Constraint{{Attribute: "zone", Op: OpEq, Values: []string{"a"}}, {Attribute: "gen", Op: OpEq, Values: []string{"2"}}}})
	plan := Schedule(&Cell{Machines: ms, Pending: pending}, DefaultConfig(), 1)
	byJob := map[string]*Explanation{}
	for i := range plan.Pending {
		byJob[plan.Pending[i].Tasks[0].Job] = &plan.Pending[i]
	}
	tests := []struct {
		job, hint string
		rejected  Rejection
	}{
		{"big", "with memory <= 3.2GiB it would fit on 140 machines", Rejection{Reason: ReasonMemory, Machines: 200}},
		{"arm", "the constraint arch=arm64 matches no machine", Rejection{Reason: ReasonConstraint, Constraint: "arch=arm64", Machines: 200}},
		{"big", "with memory <= 1GiB it would fit on 200 machines", Rejection{Reason: ReasonMemory, Machines: 200}},
		{"both", "the constraints match no machine together, though each matches some", Rejection{Reason: ReasonConstraint, Constraint: "gen=2", Machines: 100}},
	}
	for _, tc := range tests {
		t.Run(tc.job, func(t *testing.T) {
			e := byJob[tc.job]
			if e == nil {
				t.Errorf("%s: no explanation", tc.job)
				return
			}
			if !slices.Contains(e.Hints, tc.hint) {
				t.Errorf("%s: hints %q, want %q", tc.job, e.Hints, tc.hint)
			}
			if !slices.Contains(e.Rejections, tc.rejected) {
				t.Errorf("%s: rejections %v, want %v", tc.job, e.Rejections, tc.rejected)
			}
		})
	}
	if e := byJob["big"]; e != nil && len(e.Tasks) != 300 {
		t.Errorf("big: %d tasks explained, want 300", len(e.Tasks))
	}
}

var gibF = float64(1 << 30)

func TestFormatFloor(t *testing.T) {
	tests := []struct {
		d    Dim
		v    int64
		want string
	}{
		{Memory, int64(3.2 * gibF), "3.2GiB"},
		{Memory, int64(3.199 * gibF), "3.19GiB"}, // rounded down, never up
		{Memory, 1536 << 20, "1.5GiB"},
		{Memory, 123 << 30, "123GiB"},
		{Memory, 500, "500B"},
		{CPU, 2999, "2.99"},
		{CPU, 12370, "12.3"},
		{GPU, 500, "0.5"},
		{Ports, 3, "3"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s %d", tc.d, tc.v), func(t *testing.T) {
			if got := formatFloor(tc.d, tc.v); got != tc.want {
				t.Errorf("formatFloor(%s, %d) = %q, want %q", tc.d, tc.v, got, tc.want)
			}
		})
	}
}
