package usagecheck

import (
	"fmt"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Checker follows a log event by event (Apply) and says at the first
// event that breaks an invariant (see the package doc).
type Checker struct {
	s    *projections.State
	open map[projections.TaskKey]*Run
	// Runs holds every run seen, by task.
	Runs map[projections.TaskKey][]*Run
	// Billed holds every interval billed, by task, in log order.
	Billed map[projections.TaskKey][]Interval
	// LastEnd is where each machine's last window ended.
	LastEnd map[string]int64
	// Windows counts the usage windows checked.
	Windows int
}

// Run is one run of a task on a machine, in the log's clock; EndUS is 0
// while it runs.
type Run struct {
	Machine string
	Seq     int64
	StartUS int64
	EndUS   int64
	billed  int64 // microseconds
	removed bool  // its machine was removed since
}

// Interval is one window's part billed to a task.
type Interval struct {
	Machine        string
	StartUS, EndUS int64
}

// New returns a checker of a log from its first event.
func New() *Checker {
	return &Checker{s: projections.New(), open: map[projections.TaskKey]*Run{}, Runs: map[projections.TaskKey][]*Run{},
		Billed: map[projections.TaskKey][]Interval{}, LastEnd: map[string]int64{}}
}

// Apply checks e against the log before it, then follows it.
func (c *Checker) Apply(e events.Event) error {
	switch p := e.Data.(type) {
	case *events.UsageReported:
		if err := c.window(e.Position, p); err != nil {
			return err
		}
	case *events.MachineRemoved:
		delete(c.LastEnd, p.Machine) // registered again, it starts afresh
		for _, runs := range c.Runs {
			for _, r := range runs {
				if r.Machine == p.Machine {
					r.removed = true
				}
			}
		}
	}
	if err := projections.Apply(c.s, e); err != nil {
		return fmt.Errorf("position %d: %w", e.Position, err)
	}
	c.follow(c.s.TimeUS)
	return nil
}

// follow opens and closes runs from the task states after an event at us.
func (c *Checker) follow(us int64) {
	seen := map[projections.TaskKey]bool{}
	for _, j := range c.s.Jobs {
		for _, t := range j.Tasks {
			if t == nil {
				continue
			}
			k := t.Key()
			seen[k] = true
			r := c.open[k]
			// Running on its machine: started there, and not since placed
			// again (a restart in place goes back to scheduled, keeping
			// its placement).
			running := t.Live() && (t.State == projections.TaskRunning ||
				r != nil && r.Machine == t.Machine && r.Seq == t.Seq && t.State == projections.TaskScheduled)
			if r != nil && (!running || r.Machine != t.Machine || r.Seq != t.Seq) {
				r.EndUS = max(us, r.StartUS)
				delete(c.open, k)
				r = nil
			}
			if running && r == nil {
				r = &Run{Machine: t.Machine, Seq: t.Seq, StartUS: us}
				c.open[k] = r
				c.Runs[k] = append(c.Runs[k], r)
			}
		}
	}
	for k, r := range c.open { // its job left the state
		if !seen[k] {
			r.EndUS = max(us, r.StartUS)
			delete(c.open, k)
		}
	}
}

func (c *Checker) window(pos int64, p *events.UsageReported) error {
	c.Windows++
	if p.WindowEndUs <= p.WindowStartUs {
		return fmt.Errorf("position %d: machine %s's window [%d, %d] is empty", pos, p.Machine, p.WindowStartUs, p.WindowEndUs)
	}
	if last, ok := c.LastEnd[p.Machine]; ok && p.WindowStartUs != last {
		return fmt.Errorf("position %d: machine %s's window starts at %d, its last ended at %d (%s)", pos, p.Machine,
			p.WindowStartUs, last, time.Duration(p.WindowStartUs-last)*time.Microsecond)
	}
	c.LastEnd[p.Machine] = p.WindowEndUs
	if len(p.Tasks) == 0 {
		return fmt.Errorf("position %d: machine %s's window bills no task", pos, p.Machine)
	}
	for _, u := range p.Tasks {
		k := projections.TaskKey{User: u.User, Job: u.Job, Index: u.Index}
		if u.EndUs <= u.StartUs || u.StartUs < p.WindowStartUs || u.EndUs > p.WindowEndUs {
			return fmt.Errorf("position %d: task %v's interval [%d, %d] is not inside machine %s's window [%d, %d]", pos, k,
				u.StartUs, u.EndUs, p.Machine, p.WindowStartUs, p.WindowEndUs)
		}
		for _, b := range c.Billed[k] {
			if u.StartUs < b.EndUS && b.StartUS < u.EndUs {
				return fmt.Errorf("position %d: task %v's interval [%d, %d] on %s overlaps [%d, %d] billed on %s", pos, k,
					u.StartUs, u.EndUs, p.Machine, b.StartUS, b.EndUS, b.Machine)
			}
		}
		inside := false
		for _, r := range c.Runs[k] {
			if r.Machine == p.Machine && !r.removed && r.StartUS <= u.StartUs && (r.EndUS == 0 || u.EndUs <= r.EndUS) {
				inside = true
				r.billed += u.EndUs - u.StartUs
				break
			}
		}
		if !inside {
			return fmt.Errorf("position %d: task %v's interval [%d, %d] on %s lies in none of its runs there %s", pos, k,
				u.StartUs, u.EndUs, p.Machine, c.describe(k))
		}
		c.Billed[k] = append(c.Billed[k], Interval{p.Machine, u.StartUs, u.EndUs})
	}
	return nil
}

func (c *Checker) describe(k projections.TaskKey) string {
	out := ""
	for _, r := range c.Runs[k] {
		out += fmt.Sprintf(" [%d, %d] on %s", r.StartUS, r.EndUS, r.Machine)
	}
	return "(runs:" + out + ")"
}

// Unbilled is how much of k's running no window billed, over its runs on
// machines still registered, up to their machines' last windows' ends: 0
// when its bill covers every moment it ran.
func (c *Checker) Unbilled(k projections.TaskKey) time.Duration {
	var gap int64
	for _, r := range c.Runs[k] {
		last, ok := c.LastEnd[r.Machine]
		if !ok || r.removed {
			continue
		}
		end := r.EndUS
		if end == 0 || end > last {
			end = last
		}
		gap += max(end-r.StartUS, 0) - r.billed
	}
	return time.Duration(gap) * time.Microsecond
}
