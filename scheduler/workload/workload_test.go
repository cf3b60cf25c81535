package workload

import (
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/shareddata"
	"github.com/corralhq/corral/scheduler"
)

var workloadsFlag = flag.String("workloads", "", "folder holding the shared workloads (default: workloads in $CORRAL_SHARED, else shared/workloads in an ancestor)")

// workloadsDir returns the shared workloads folder: -workloads, else the
// one shareddata finds.
func workloadsDir(tb testing.TB) string {
	tb.Helper()
	if *workloadsFlag != "" {
		return *workloadsFlag
	}
	return shareddata.Dir(tb, shareddata.Workloads)
}

func TestReadWorkload(t *testing.T) {
	machines := "name,cpu_milli,memory_mib,gpu_milli,rack\nm1,8000,16384,0,r1\nm2,4000,8192,1000,\n"
	tasks := "job,index,priority,cpu_milli,memory_mib,gpu_milli\nweb,0,9,500,1024,0\nweb,1,9,500,1024,0\nml,0,0,100,512,250\n"
	w, err := ReadWorkload("tiny", strings.NewReader(machines), strings.NewReader(tasks))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Machines) != 2 || len(w.Tasks) != 3 {
		t.Fatalf("read %d machines, %d tasks", len(w.Machines), len(w.Tasks))
	}
	m := w.Machines[0]
	if m.Name != "m1" || m.Capacity != (scheduler.Resources{scheduler.CPU: 8000, scheduler.Memory: 16 << 30}) || m.Attributes["rack"] != "r1" {
		t.Errorf("machine %+v", m)
	}
	if w.Machines[1].Attributes != nil {
		t.Errorf("empty rack became attribute %v", w.Machines[1].Attributes)
	}
	task := w.Tasks[2]
	if task.Ref != (scheduler.TaskRef{User: "tiny", Job: "ml", Index: 0}) || task.Priority != 0 || task.Seq != 4 ||
		task.Resources != (scheduler.Resources{scheduler.CPU: 100, scheduler.Memory: 512 << 20, scheduler.GPU: 250}) {
		t.Errorf("task %+v", task)
	}

	bad := []struct {
		name, machines, tasks, want string
	}{
		{"header", "name,cpu,memory_mib,gpu_milli,rack\n", tasks, `header "name,cpu,memory_mib,gpu_milli,rack"`},
		{"empty", "", tasks, "machines.csv: empty"},
		{"fields", "name,cpu_milli,memory_mib,gpu_milli,rack\nm1,1,2\n", tasks, "line 2: 3 fields, want 5"},
		{"negative", "name,cpu_milli,memory_mib,gpu_milli,rack\nm1,-1,2,0,\n", tasks, `cpu_milli: "-1" is not a non-negative integer`},
		{"number", machines, "job,index,priority,cpu_milli,memory_mib,gpu_milli\nweb,0,9,lots,1,0\n", `line 2: cpu_milli: "lots"`},
		{"priority", machines, "job,index,priority,cpu_milli,memory_mib,gpu_milli\nweb,0,12,1,1,0\n", "priority: 12 is above 11"},
		{"duplicate task", machines, "job,index,priority,cpu_milli,memory_mib,gpu_milli\nweb,0,9,1,1,0\nweb,0,9,1,1,0\n", "appears twice"},
		{"duplicate machine", "name,cpu_milli,memory_mib,gpu_milli,rack\nm1,1,1,0,\nm1,1,1,0,\n", tasks, `"m1" appears twice`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadWorkload("bad", strings.NewReader(tc.machines), strings.NewReader(tc.tasks))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
			}
		})
	}
}

func TestLowerBound(t *testing.T) {
	mk := func(cpu, gpu int64) *scheduler.Machine {
		return &scheduler.Machine{Name: "m", Capacity: scheduler.Resources{scheduler.CPU: cpu, scheduler.GPU: gpu}}
	}
	machines := []*scheduler.Machine{mk(8, 0), mk(4, 4), mk(4, 2), mk(2, 2), mk(2, 0)}
	tests := []struct {
		cpu, gpu int64
		bound    int
		binding  scheduler.Dim
	}{
		{10, 0, 2, scheduler.CPU},  // 8 + 4 >= 10
		{12, 0, 2, scheduler.CPU},  // exactly
		{13, 5, 3, scheduler.CPU},  // cpu needs 3, gpu 2 (4 + 2)
		{4, 7, 3, scheduler.GPU},   // gpu needs 4 + 2 + 2
		{0, 0, 0, scheduler.CPU},   // nothing asked
		{20, 0, 5, scheduler.CPU},  // every machine
		{21, 0, 0, scheduler.CPU},  // does not fit: error
		{1, 100, 0, scheduler.GPU}, // does not fit: error
	}
	for i, tc := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			tasks := []scheduler.PendingTask{{Resources: scheduler.Resources{scheduler.CPU: tc.cpu, scheduler.GPU: tc.gpu}}}
			bound, binding, err := LowerBound(machines, tasks)
			if tc.bound == 0 && (tc.cpu > 0 || tc.gpu > 0) {
				if err == nil {
					t.Errorf("cpu %d gpu %d: want an error, got bound %d", tc.cpu, tc.gpu, bound)
				}
				return
			}
			if err != nil || bound != tc.bound || binding != tc.binding {
				t.Errorf("cpu %d gpu %d: got %d %s %v, want %d %s", tc.cpu, tc.gpu, bound, binding, err, tc.bound, tc.binding)
			}
		})
	}
}

// TestSharedWorkloads reads the shared workloads when they are present and
// checks them against their summaries.
func TestSharedWorkloads(t *testing.T) {
	dir := workloadsDir(t)
	tests := []struct {
		name            string
		machines, tasks int
		bound           int
		binding         scheduler.Dim
	}{
		{"openb", 1523, 8152, 1139, scheduler.GPU},
		{"synthetic-10k", 10000, 100000, 6761, scheduler.CPU},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := LoadWorkload(filepath.Join(dir, tc.name))
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				return
			}
			bound, binding, err := LowerBound(w.Machines, w.Tasks)
			if len(w.Machines) != tc.machines || len(w.Tasks) != tc.tasks || bound != tc.bound || binding != tc.binding || err != nil {
				t.Errorf("%s: %d machines, %d tasks, bound %d (%s) %v; want %d, %d, %d (%s)",
					tc.name, len(w.Machines), len(w.Tasks), bound, binding, err, tc.machines, tc.tasks, tc.bound, tc.binding)
			}
		})
	}
}

func TestSyntheticCell(t *testing.T) {
	cfg := SyntheticConfig{Seed: 11, Machines: 2000, Tasks: 20000, Jobs: 1000, Users: 50, CPUFill: 0.8,
		RackSize: 40, RacksPerPower: 5, ConstrainedJobs: 0.1}
	w := Synthetic(cfg)
	if err := w.Cell().Validate(); err != nil {
		t.Fatal(err)
	}
	if len(w.Machines) != 2000 || len(w.Tasks) != 20000 {
		t.Fatalf("%d machines, %d tasks", len(w.Machines), len(w.Tasks))
	}
	var capacity, request scheduler.Resources
	shapes, racks, powers := map[scheduler.Resources]bool{}, map[string]bool{}, map[string]bool{}
	for _, m := range w.Machines {
		capacity = capacity.Add(m.Capacity)
		shapes[m.Capacity] = true
		racks[m.Attributes["rack"]] = true
		powers[m.Attributes["power"]] = true
	}
	jobs, constrained, users := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var nonProd, tiny, prod int
	for _, task := range w.Tasks {
		request = request.Add(task.Resources)
		jobs[task.Ref.Job] = true
		users[task.Ref.User] = true
		if len(task.Constraints) > 0 {
			constrained[task.Ref.Job] = true
		}
		if scheduler.IsProd(task.Priority) {
			prod++
		} else {
			nonProd++
			if task.Resources[scheduler.CPU] < 100 {
				tiny++
			}
		}
	}
	if len(shapes) < 4 || len(racks) != 50 || len(powers) != 10 {
		t.Errorf("%d shapes, %d racks, %d power domains", len(shapes), len(racks), len(powers))
	}
	if len(jobs) != 1000 || len(users) < 20 {
		t.Errorf("%d jobs, %d users", len(jobs), len(users))
	}
	if share := float64(tiny) / float64(nonProd); math.Abs(share-0.2) > 0.02 {
		t.Errorf("%.1f%% of non-prod tasks under 0.1 core, want about 20%%", 100*share)
	}
	if share := float64(len(constrained)) / 1000; share < 0.05 || share > 0.15 {
		t.Errorf("%.0f%% of jobs constrained, want a minority near 10%%", 100*share)
	}
	if share := float64(prod) / float64(len(w.Tasks)); share < 0.1 || share > 0.5 {
		t.Errorf("prod tasks are %.0f%%", 100*share)
	}
	if fill := float64(request[scheduler.CPU]) / float64(capacity[scheduler.CPU]); math.Abs(fill-0.8) > 0.02 {
		t.Errorf("CPU fill %.3f, want 0.8", fill)
	}
	again := Synthetic(cfg)
	if len(again.Tasks) != len(w.Tasks) || again.Tasks[777].Resources != w.Tasks[777].Resources || again.Machines[5].Capacity != w.Machines[5].Capacity {
		t.Error("the same seed generated another cell")
	}
	// The whole cell schedules.
	if plan := scheduler.Schedule(w.Cell(), scheduler.DefaultConfig(), 1); plan.Stats.Placed < 19900 {
		t.Errorf("placed %d of 20000", plan.Stats.Placed)
	}
}
