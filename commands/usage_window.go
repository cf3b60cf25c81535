package commands

import (
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// UsageWindow is what a machine's agent measured of its tasks since the
// link's last window: CPU, memory and disk per task. Its bounds are not
// the agent's to say: usageReported cuts the window in the log's clock.
type UsageWindow struct {
	Tasks []*events.TaskUsage
}

// usageReported is the machine's usage window that ends at nowUS, or nil
// when it would bill nothing. It is the one rule of windows:
//   - A window starts where the machine's last one ended (UsageEndUS; for
//     its first, at the earliest start of a run on it) and ends now, so a
//     machine's windows tile its time whatever happens in between: lost
//     polls, agent restarts, a new leader, a clock stepped back (a window
//     that would end before it starts is dropped, and the next one starts
//     where the last ended).
//   - Each task's entry carries its own interval: the part of the window in
//     which its run held resources here (projections.RunSpan), so it is
//     billed from its first start to its stop, never before it ran and
//     never twice for the same moment.
//   - What the agent measured of a task goes to its latest run here (a task
//     submitted again and started on the same machine within one window
//     has its earlier run's interval with no figures); what it measured of
//     a task with no run here in the log bills nothing.
//
// measured holds the figures the entries carry, by task; fresh says which
// entries have figures of the agent's.
func usageReported(m *projections.Machine, w *UsageWindow, nowUS int64) (ev *events.UsageReported, fresh map[*events.TaskUsage]bool) {
	spans := m.RunSpans()
	if len(spans) == 0 {
		return nil, nil
	}
	start := usageWindowStart(m, spans)
	if nowUS <= start {
		return nil, nil
	}
	measured := make(map[projections.TaskKey]*events.TaskUsage, len(w.Tasks))
	for _, u := range w.Tasks {
		if k := (projections.TaskKey{User: u.GetUser(), Job: u.GetJob(), Index: u.GetIndex()}); u != nil && measured[k] == nil {
			measured[k] = u
		}
	}
	ev = &events.UsageReported{Machine: m.Name, WindowStartUs: start, WindowEndUs: nowUS}
	fresh = map[*events.TaskUsage]bool{}
	for i, sp := range spans {
		from, to := max(sp.StartUS, start), nowUS
		if sp.StopUS != 0 {
			to = min(sp.StopUS, nowUS)
		}
		if to <= from {
			continue
		}
		u := &events.TaskUsage{User: sp.User, Job: sp.Job, Index: sp.Index, StartUs: from, EndUs: to}
		// Spans come in key order, then by start: the last of a key is its
		// latest run.
		if last := i == len(spans)-1 || spans[i+1].TaskKey != sp.TaskKey; last {
			if got := measured[sp.TaskKey]; got != nil {
				u.CpuCoreSeconds, u.MemoryBytes, u.MemoryMaxBytes, u.DiskBytes = got.CpuCoreSeconds, got.MemoryBytes, got.MemoryMaxBytes, got.DiskBytes
				fresh[u] = true
			}
		}
		ev.Tasks = append(ev.Tasks, u)
	}
	if len(ev.Tasks) == 0 {
		return nil, nil
	}
	return ev, fresh
}

// usageWindowStart is where the machine's next usage window starts: where
// its last ended, or for its first at the earliest start of a run on it.
func usageWindowStart(m *projections.Machine, spans []projections.RunSpan) int64 {
	start := m.UsageEndUS
	if start == 0 && len(spans) > 0 {
		start = spans[0].StartUS
		for _, sp := range spans {
			start = min(start, sp.StartUS)
		}
	}
	return start
}

// UsageSeconds is how long the task k's latest run on machine m would be
// billed, and its usage rated over, by a window of m recorded at nowUS
// (what usageReported gives its entry); 0 when the window would bill it
// nothing. A replay of recorded usage asks it to keep a recorded rate.
func UsageSeconds(m *projections.Machine, k projections.TaskKey, nowUS int64) float64 {
	spans := m.RunSpans()
	start := usageWindowStart(m, spans)
	var got float64
	for _, sp := range spans {
		if sp.TaskKey != k {
			continue
		}
		from, to := max(sp.StartUS, start), nowUS
		if sp.StopUS != 0 {
			to = min(sp.StopUS, nowUS)
		}
		got = 0
		if to > from {
			got = float64(to-from) / 1e6
		}
	}
	return got
}
