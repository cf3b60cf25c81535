package googletrace

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Mix is the published machine mix: normalized CPU and memory, share of
// the cell's machines (percent).
var Mix = []struct{ CPU, Memory, Share float64 }{
	{0.5, 0.5, 53.47}, {0.5, 0.25, 30.74}, {0.5, 0.75, 7.95}, {1, 1, 6.32}, {0.25, 0.25, 0.99},
	{0.5, 0.12, 0.43}, {0.5, 0.03, 0.04}, {0.5, 0.97, 0.03}, {1, 0.5, 0.02}, {0.5, 0.06, 0.01},
}

// CellMachines is the cell's size in the trace.
const CellMachines = 12_583

// The trace normalizes every capacity and request to the largest machine,
// whose real size it does not say. Assumed: a 2011 server of 32 cores and
// 128 GiB, so that the common machine (0.5, 0.5) has 16 cores and 64 GiB.
// Packing depends only on ratios; bucketing requests (Borg §5.4) is the
// one figure the assumption moves.
const (
	CPU    = 32_000    // milli-CPU per normalized 1.0
	Memory = 128 << 30 // bytes per normalized 1.0
)

// Shapes returns n machine shapes (milli-CPU, bytes) in the published mix,
// each kind's share rounded and the largest kind taking the remainder,
// shuffled by seed.
func Shapes(n int, seed uint64) [][2]int64 {
	counts := make([]int, len(Mix))
	total := 0
	for i, k := range Mix {
		counts[i] = int(math.Round(float64(n) * k.Share / 100))
		total += counts[i]
	}
	counts[0] += n - total
	var out [][2]int64
	for i, k := range Mix {
		for range max(counts[i], 0) {
			out = append(out, [2]int64{int64(k.CPU * CPU), int64(k.Memory * Memory)})
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x676f6f67))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Event types of task_events.
const (
	Submit = iota
	Schedule
	Evict
	Fail
	Finish
	Kill
	Lost
	UpdatePending
	UpdateRunning
)

// TaskEvent is one row of task_events.
type TaskEvent struct {
	TimeUS      int64 // since the trace's start
	JobID       int64
	Index       int32
	Machine     int64 // 0: none
	Kind        int
	User        string // a hash
	Priority    int32
	CPU, Memory float64 // normalized requests; HasRequest says they were given
	HasRequest  bool
}

// Parts lists the task_events parts under dir (the trace's folder or its
// task_events), in order.
func Parts(dir string) ([]string, error) {
	parts, err := filepath.Glob(filepath.Join(dir, "task_events", "part-*.csv.gz"))
	if err == nil && len(parts) == 0 {
		parts, err = filepath.Glob(filepath.Join(dir, "part-*.csv.gz"))
	}
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("googletrace: no task_events parts under %s", dir)
	}
	slices.Sort(parts)
	return parts, nil
}

// ReadTaskEvents calls fn for each row of the parts under dir, in order.
// Columns: time, missing info, job ID, task index, machine ID, event type,
// user, scheduling class, priority, CPU request, memory request, disk
// request, different-machines restriction.
func ReadTaskEvents(dir string, fn func(TaskEvent) error) error {
	parts, err := Parts(dir)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err := readPart(p, fn); err != nil {
			return err
		}
	}
	return nil
}

func readPart(path string, fn func(TaskEvent) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	r := bufio.NewReaderSize(gz, 1<<20)
	for line := 1; ; line++ {
		s, err := r.ReadString('\n')
		if len(s) > 0 {
			f := strings.Split(strings.TrimRight(s, "\r\n"), ",")
			if len(f) < 11 {
				return fmt.Errorf("%s:%d: %d fields, want 13", path, line, len(f))
			}
			var e TaskEvent
			var errs [5]error
			e.TimeUS, errs[0] = strconv.ParseInt(f[0], 10, 64)
			e.JobID, errs[1] = strconv.ParseInt(f[2], 10, 64)
			index, err2 := strconv.ParseInt(f[3], 10, 32)
			e.Index, errs[2] = int32(index), err2
			e.Kind, errs[3] = strconv.Atoi(f[5])
			prio, err4 := strconv.Atoi(f[8])
			e.Priority, errs[4] = int32(prio), err4
			for _, err := range errs {
				if err != nil {
					return fmt.Errorf("%s:%d: %w", path, line, err)
				}
			}
			if f[4] != "" {
				if e.Machine, err = strconv.ParseInt(f[4], 10, 64); err != nil {
					return fmt.Errorf("%s:%d: machine: %w", path, line, err)
				}
			}
			e.User = f[6]
			cpu, errc := strconv.ParseFloat(f[9], 64)
			mem, errm := strconv.ParseFloat(f[10], 64)
			e.CPU, e.Memory, e.HasRequest = cpu, mem, errc == nil && errm == nil
			if err := fn(e); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}
