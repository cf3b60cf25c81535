package projections

import (
	"cmp"
	"slices"

	"github.com/corralhq/corral/events"
)

// RunSpan is when one run of a task held resources on a machine, in the
// log's clock: from the run's first start (restarts in place keep the
// run) to its end (finished, failed, killed, evicted, lost; 0 while it
// runs). A run killed or evicted with stopping ends with its event, not
// with its hold: the task may run again elsewhere meanwhile, and a task is
// never billed twice for the same moment.
type RunSpan struct {
	TaskRun
	StartUS, StopUS int64
}

// RunSpans returns the runs that held resources here since the machine's
// last usage window ended (UsageEndUS): those that ended, and the tasks
// placed here that have started; in key order, then by
// start. What a usage window bills comes from these (commands'
// ReportAgentState), so the bill and the log's events agree.
func (m *Machine) RunSpans() []RunSpan {
	out := make([]RunSpan, 0, len(m.spans)+len(m.tasks))
	for run, sp := range m.spans {
		out = append(out, RunSpan{run, sp.startUS, sp.stopUS})
	}
	for t := range m.tasks {
		if t.RunStartUS > 0 {
			out = append(out, RunSpan{TaskRun{t.Key(), t.Seq}, t.RunStartUS, 0})
		}
	}
	slices.SortFunc(out, func(a, b RunSpan) int {
		return cmp.Or(compareTaskKeys(a.TaskKey, b.TaskKey), cmp.Compare(a.StartUS, b.StartUS), cmp.Compare(a.Submission, b.Submission))
	})
	return out
}

type span struct{ startUS, stopUS int64 }

// leave records that t's run leaves m now. A run that never started held
// nothing a window bills.
func (s *State) leave(m *Machine, t *Task) {
	if t.RunStartUS == 0 {
		return
	}
	if m.spans == nil {
		m.spans = map[TaskRun]span{}
	}
	m.spans[TaskRun{t.Key(), t.Seq}] = span{t.RunStartUS, s.TimeUS}
	t.RunStartUS = 0
}

func (s *State) usageReported(p *events.UsageReported) bool {
	m := s.Machines[p.Machine]
	for _, u := range p.Tasks {
		if u == nil {
			continue
		}
		if t := s.liveTask(u.User, u.Job, u.Index, p.Machine); t != nil {
			start, end := p.WindowStartUs, p.WindowEndUs
			if u.EndUs > 0 {
				start, end = u.StartUs, u.EndUs
			}
			t.Usage = Usage{
				WindowStartUS: start, WindowEndUS: end,
				CPUCoreSeconds: u.CpuCoreSeconds, MemoryBytes: u.MemoryBytes,
				MemoryMaxBytes: u.MemoryMaxBytes, DiskBytes: u.DiskBytes,
			}
		}
	}
	if m == nil {
		return false
	}
	// The window billed every span up to its end: what stopped before it
	// is done with.
	m.UsageEndUS = max(m.UsageEndUS, p.WindowEndUs)
	for run, sp := range m.spans {
		if sp.stopUS <= m.UsageEndUS {
			delete(m.spans, run)
		}
	}
	return true
}
