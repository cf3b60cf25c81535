package workload

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/corralhq/corral/scheduler"
)

// Every member is deterministic, fits its cell, asks for its fills, and is
// bound by the resource it names.
func TestFamilyCells(t *testing.T) {
	for _, spec := range Family {
		w, err := spec.Cell(1)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := spec.Cell(1)
		if fmt.Sprint(w.Tasks) != fmt.Sprint(again.Tasks) || len(w.Machines) != spec.Machines {
			t.Errorf("%s: not deterministic, or %d machines", spec.Name, len(w.Machines))
		}
		var capacity, request scheduler.Resources
		for _, m := range w.Machines {
			capacity = capacity.Add(m.Capacity)
		}
		for i := range w.Tasks {
			request = request.Add(w.Tasks[i].Resources)
		}
		share := func(d scheduler.Dim) float64 { return float64(request[d]) / float64(capacity[d]) }
		lb, binding, err := LowerBound(w.Machines, w.Tasks)
		if err != nil {
			t.Fatal(err)
		}
		want := map[BindingResource]scheduler.Dim{BindCPU: scheduler.CPU, BindMemory: scheduler.Memory, BindGPU: scheduler.GPU}[spec.Binding]
		tolerance := 0.02
		if want == scheduler.GPU {
			// Whole GPUs are rounded after scaling, per job: a cell of
			// few GPU jobs lands a few points off (gpu-few-mixed-90 asks
			// for 0.83).
			tolerance = 0.08
		}
		if got := share(want); math.Abs(got-spec.Fill) > tolerance {
			t.Errorf("%s: %s asked for %.3f of the cell, want %.2f", spec.Name, want, got, spec.Fill)
		}
		if spec.Binding != BindBalanced && spec.Mix == MixOne && binding != want {
			t.Errorf("%s: bound by %s, want %s", spec.Name, binding, want)
		}
		t.Logf("%-18s %4d machines %6d tasks, cpu %.2f mem %.2f gpu %.2f, bound %d (%s)", spec.Name, len(w.Machines), len(w.Tasks),
			share(scheduler.CPU), share(scheduler.Memory), share(scheduler.GPU), lb, binding)
	}
}

func TestCellSpecRefusesBadFields(t *testing.T) {
	good := Family[0]
	for _, c := range []struct {
		change func(*CellSpec)
		want   string
	}{
		{func(s *CellSpec) { s.Machines = 0 }, "machines: 0"},
		{func(s *CellSpec) { s.Fill = 1.5 }, "fill: 1.5"},
		{func(s *CellSpec) { s.Mix = "some" }, `mix: "some"`},
		{func(s *CellSpec) { s.Binding = "disk" }, `binding: "disk"`},
		{func(s *CellSpec) { s.Sizes = "huge" }, `sizes: "huge"`},
		{func(s *CellSpec) { s.Bands = "prod" }, `bands: "prod"`},
		{func(s *CellSpec) { s.OtherFill = -1 }, "other fill: -1"},
		{func(s *CellSpec) { s.Users = -1 }, "users: -1"},
	} {
		s := good
		c.change(&s)
		if _, err := s.Cell(1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %q", s, err, c.want)
		}
	}
	if _, _, err := FamilyWorkload("family:nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown member: %v", err)
	}
	if _, ok, _ := FamilyWorkload("openb"); ok {
		t.Error("a folder name taken for a family member")
	}
}

// bal-many-small-98: ten kinds of machine, CPU and memory both 98% asked
// for by small tasks. Worst-fit packs it onto the bound of the machines a
// seed keeps (158 of 160 for seed 1); the hybrid policy before it counted
// room out of proportion with the small work as stranded needed 175 and
// could not place every task on the whole cell without cloning it: best
// fit piles each shape onto the fullest machines, and a machine whose
// memory fills before its CPU (or the other way) strands the rest. The
// default must stay within 2% of that bound.
func TestDefaultPacksABalancedCellOfSmallTasks(t *testing.T) {
	spec, err := FamilyMember("bal-many-small-98")
	if err != nil {
		t.Fatal(err)
	}
	w, err := spec.Cell(1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultCompaction(scheduler.DefaultConfig().Policy)
	cfg.Seeds, cfg.MaxPending, cfg.Stable, cfg.Workers = 1, 0, 25, 1
	r, err := Compact(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d machines, the bound of those kept %d: %.3f (clones %d, packings %d)", r.Machines[0], r.OrderBounds[0], r.OrderRatio, r.Clones, r.Packs)
	if r.Unfit > 0 || r.Clones > 1 || r.OrderRatio > 1.02 {
		t.Errorf("%d machines (unfit %d, clones %d), %.3f of the bound of the machines kept; want the whole cell to fit and within 2%%",
			r.Machines[0], r.Unfit, r.Clones, r.OrderRatio)
	}
}

// cpu-one-large-80: one kind of machine, tasks of a quarter of one, CPU
// 80% asked for. Best fit fills machines whole and needs 164 machines on
// seed 1; the hybrid fit alone needed 168 (its runs left 16 of 624 tasks
// pending a few machines above best-fit's answer, relocation placed most
// of them, not all). On such a close miss the default tries the other
// rules (scheduler/portfolio.go), so it must need no more machines than
// best-fit.
func TestDefaultPacksLargeTasksOnOneKindAsBestFit(t *testing.T) {
	spec, err := FamilyMember("cpu-one-large-80")
	if err != nil {
		t.Fatal(err)
	}
	w, err := spec.Cell(1)
	if err != nil {
		t.Fatal(err)
	}
	answer := map[scheduler.Policy]int{}
	for _, policy := range []scheduler.Policy{scheduler.DefaultConfig().Policy, scheduler.PolicyBestFit} {
		cfg := DefaultCompaction(policy)
		cfg.Seeds, cfg.MaxPending, cfg.Stable, cfg.Workers = 1, 0, 25, 1
		r, err := Compact(w, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Unfit > 0 || r.Clones > 1 {
			t.Fatalf("%s: unfit %d, clones %d: want the whole cell to fit", policy, r.Unfit, r.Clones)
		}
		answer[policy] = r.Machines[0]
	}
	t.Logf("default %d machines, best-fit %d", answer[scheduler.DefaultConfig().Policy], answer[scheduler.PolicyBestFit])
	if answer[scheduler.DefaultConfig().Policy] > answer[scheduler.PolicyBestFit] {
		t.Errorf("the default needs %d machines, best-fit %d: want no more", answer[scheduler.DefaultConfig().Policy], answer[scheduler.PolicyBestFit])
	}
}
