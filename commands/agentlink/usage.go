package agentlink

import (
	"maps"
	"slices"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Usage sums one machine's usage samples, poll by poll, into the window
// the link records with a full state once it is UsageWindow long.
type Usage struct {
	// Start is when the open window began.
	Start  time.Time
	byTask map[projections.TaskKey]*usageSum
}

type usageSum struct {
	cpu, memByteSecs float64
	seconds          float64
	memMax, disk     int64
}

// NewUsage opens a window at start.
func NewUsage(start time.Time) *Usage {
	return &Usage{Start: start, byTask: map[projections.TaskKey]*usageSum{}}
}

// Add sums a poll's usage samples into the open window.
func (u *Usage) Add(st *agentpb.AgentState) {
	for _, s := range st.Usage {
		k := TaskKeyOf(s.Task)
		sum := u.byTask[k]
		if sum == nil {
			sum = &usageSum{}
			u.byTask[k] = sum
		}
		w := s.Window
		if w == nil || s.WindowEndUs <= s.WindowStartUs {
			continue
		}
		secs := float64(s.WindowEndUs-s.WindowStartUs) / 1e6
		sum.cpu += w.CpuCoreSeconds
		sum.memByteSecs += float64(w.MemoryBytes) * secs
		sum.seconds += secs
		sum.memMax = max(sum.memMax, w.MemoryMaxBytes, s.MemoryPeakBytes)
		sum.disk = s.DiskBytes
	}
}

// Window is what the open window measured, tasks in key order: CPU
// summed, memory averaged over the time sampled, its peak, the last disk
// figure. Its bounds are the log's, not the agent's: ReportAgentState
// cuts the window (commands.UsageWindow). The caller opens the next window
// (NewUsage) once this one is in the log.
func (u *Usage) Window() *commands.UsageWindow {
	w := &commands.UsageWindow{}
	for _, k := range slices.SortedFunc(maps.Keys(u.byTask), compareKeys) {
		sum := u.byTask[k]
		if sum.seconds <= 0 {
			continue
		}
		w.Tasks = append(w.Tasks, &events.TaskUsage{User: k.User, Job: k.Job, Index: k.Index,
			CpuCoreSeconds: sum.cpu, MemoryBytes: int64(sum.memByteSecs / sum.seconds), MemoryMaxBytes: sum.memMax, DiskBytes: sum.disk})
	}
	return w
}
