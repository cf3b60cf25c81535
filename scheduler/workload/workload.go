package workload

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/scheduler"
)

// Workload is a set of machines and the tasks to place on them: what the
// benchmarks and the compaction harness pack. Every task starts pending and
// every machine empty and up.
type Workload struct {
	Name     string
	Machines []*scheduler.Machine
	Tasks    []scheduler.PendingTask
}

// Cell returns the workload as a pass input: every machine empty, every
// task pending. The machines are shared with the workload, not copied.
func (w *Workload) Cell() *scheduler.Cell {
	return &scheduler.Cell{Machines: w.Machines, Pending: w.Tasks}
}

// LoadWorkload reads a workload folder in the neutral CSV format
// (machines.csv and tasks.csv; see the workloads README). It is the only
// function of the package that touches the file system.
func LoadWorkload(dir string) (*Workload, error) {
	mf, err := os.Open(filepath.Join(dir, "machines.csv"))
	if err != nil {
		return nil, fmt.Errorf("scheduler: workload %s: %w", dir, err)
	}
	defer mf.Close()
	tf, err := os.Open(filepath.Join(dir, "tasks.csv"))
	if err != nil {
		return nil, fmt.Errorf("scheduler: workload %s: %w", dir, err)
	}
	defer tf.Close()
	return ReadWorkload(filepath.Base(filepath.Clean(dir)), mf, tf)
}

// ReadWorkload parses the two CSV files of a workload. The format has no
// users: every task belongs to one user named after the workload. Row order
// is submission order. Memory is in MiB (only ratios matter for packing).
func ReadWorkload(name string, machines, tasks io.Reader) (*Workload, error) {
	w := &Workload{Name: name}
	err := readCSV(machines, "machines.csv",
		[]string{"name", "cpu_milli", "memory_mib", "gpu_milli", "rack"},
		func(line int, f []string, num func(int) (int64, error)) error {
			var capacity scheduler.Resources
			for i, d := range []scheduler.Dim{scheduler.CPU, scheduler.Memory, scheduler.GPU} {
				v, err := num(i + 1)
				if err != nil {
					return err
				}
				capacity[d] = v
			}
			capacity[scheduler.Memory] <<= 20
			m := &scheduler.Machine{Name: f[0], Version: 1, Capacity: capacity}
			if m.Name == "" {
				return fmt.Errorf("name: empty")
			}
			if f[4] != "" {
				m.Attributes = map[string]string{"rack": f[4]}
			}
			w.Machines = append(w.Machines, m)
			return nil
		})
	if err != nil {
		return nil, err
	}
	err = readCSV(tasks, "tasks.csv",
		[]string{"job", "index", "priority", "cpu_milli", "memory_mib", "gpu_milli"},
		func(line int, f []string, num func(int) (int64, error)) error {
			var v [5]int64
			for i := range v {
				var err error
				if v[i], err = num(i + 1); err != nil {
					return err
				}
			}
			if f[0] == "" {
				return fmt.Errorf("job: empty")
			}
			if v[1] > scheduler.MaxPriority {
				return fmt.Errorf("priority: %d is above %d", v[1], scheduler.MaxPriority)
			}
			if v[0] > 1<<31-1 {
				return fmt.Errorf("index: %d is too large", v[0])
			}
			w.Tasks = append(w.Tasks, scheduler.PendingTask{
				Ref:         scheduler.TaskRef{User: name, Job: f[0], Index: int32(v[0])},
				Priority:    int32(v[1]),
				Seq:         int64(line),
				SpecVersion: 1,
				Resources:   scheduler.Resources{scheduler.CPU: v[2], scheduler.Memory: v[3] << 20, scheduler.GPU: v[4]},
			})
			return nil
		})
	if err != nil {
		return nil, err
	}
	if err := w.Cell().Validate(); err != nil {
		return nil, fmt.Errorf("scheduler: workload %s: %w", name, err)
	}
	return w, nil
}

// readCSV reads a simple CSV file (no quoting: the format has none) whose
// header must name exactly the given columns, calling row for each line.
func readCSV(r io.Reader, file string, columns []string,
	row func(line int, fields []string, num func(int) (int64, error)) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return fmt.Errorf("scheduler: %s: %w", file, err)
		}
		return fmt.Errorf("scheduler: %s: empty, want a header %q", file, strings.Join(columns, ","))
	}
	if h := strings.TrimSpace(sc.Text()); h != strings.Join(columns, ",") {
		return fmt.Errorf("scheduler: %s: header %q, want %q", file, h, strings.Join(columns, ","))
	}
	line := 1
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if text == "" {
			continue
		}
		f := strings.Split(text, ",")
		if len(f) != len(columns) {
			return fmt.Errorf("scheduler: %s line %d: %d fields, want %d", file, line, len(f), len(columns))
		}
		num := func(i int) (int64, error) {
			v, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("%s: %q is not a non-negative integer", columns[i], f[i])
			}
			return v, nil
		}
		if err := row(line, f, num); err != nil {
			return fmt.Errorf("scheduler: %s line %d: %w", file, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("scheduler: %s: %w", file, err)
	}
	return nil
}

// LowerBound is the smallest number of machines that could hold the tasks:
// for each resource, sort the machines by that capacity, largest first, and
// take the smallest k whose summed capacity reaches the total request; the
// bound is the largest k over the resources (ports excluded), and binding
// the resource that sets it. No packing beats it. It returns an error when
// even all machines do not reach the total request.
func LowerBound(machines []*scheduler.Machine, tasks []scheduler.PendingTask) (bound int, binding scheduler.Dim, err error) {
	var total scheduler.Resources
	for i := range tasks {
		total = total.Add(tasks[i].Resources)
	}
	caps := make([]int64, len(machines))
	binding = scheduler.CPU
	for d := scheduler.Dim(0); d < scheduler.ScoredDims; d++ {
		if total[d] == 0 {
			continue
		}
		for i, m := range machines {
			caps[i] = m.Capacity[d]
		}
		slices.SortFunc(caps, func(a, b int64) int { return cmp.Compare(b, a) })
		var sum int64
		k := 0
		for k < len(caps) && sum < total[d] {
			sum += caps[k]
			k++
		}
		if sum < total[d] {
			return 0, d, fmt.Errorf("scheduler: the tasks ask for %s %s, the machines offer %s",
				scheduler.FormatQuantity(d, total[d]), d, scheduler.FormatQuantity(d, sum))
		}
		if k > bound {
			bound, binding = k, d
		}
	}
	return bound, binding, nil
}

// PrefixBound is the lower bound for keeping a prefix of order: the
// fewest leading machines whose summed capacity reaches what the tasks ask
// for in every resource (len(order)+1 when the whole order does not).
// Compaction removes machines from the end of its order, so no packing of
// the kept machines beats it; LowerBound is the same bound for the order
// that takes the largest machines first.
func PrefixBound(order []*scheduler.Machine, tasks []scheduler.PendingTask) int {
	var total, sum scheduler.Resources
	for i := range tasks {
		total = total.Add(tasks[i].Resources)
	}
	covered := func() bool {
		for d := scheduler.Dim(0); d < scheduler.ScoredDims; d++ {
			if sum[d] < total[d] {
				return false
			}
		}
		return true
	}
	for n, m := range order {
		if covered() {
			return n
		}
		sum = sum.Add(m.Capacity)
	}
	if covered() {
		return len(order)
	}
	return len(order) + 1
}
