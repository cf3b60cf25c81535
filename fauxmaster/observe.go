package fauxmaster

import (
	"cmp"
	"slices"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Metrics is what a window did to the people using the cell, recorded or
// simulated, measured the one way for both: the observer reads the events
// and the state they were folded into.
type Metrics struct {
	Groups []*Group `json:"groups"` // per user and band, sorted
	// Pending is the pending time, in seconds, of every task over the
	// window; a wait still open at the window's end counts up to it.
	Pending  Distribution `json:"pending_seconds"`
	Placed   int          `json:"placed"`
	Never    int          `json:"pending_at_end"` // tasks still pending when the window ends
	Evicted  int          `json:"evictions"`      // every eviction, preemptions included
	Preempts int          `json:"preemptions"`
	Lost     int          `json:"lost"`
	// CPU and Memory are the share of the up machines' capacity held by
	// running tasks (their limits), averaged over the window's time.
	CPU    float64 `json:"cpu_utilization"`
	Memory float64 `json:"memory_utilization"`
	// MachinesUsed counts the machines a task ran on during the window.
	MachinesUsed int `json:"machines_used"`
}

// Group is one user's tasks in one band.
type Group struct {
	User     string       `json:"user"`
	Band     string       `json:"band"`
	Pending  Distribution `json:"pending_seconds"`
	Placed   int          `json:"placed"`
	Never    int          `json:"pending_at_end"`
	Evicted  int          `json:"evictions"`
	Preempts int          `json:"preemptions"`
	samples  []float64
}

// Distribution summarizes pending times.
type Distribution struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
	// Histogram counts the waits by power-of-two seconds: bucket i holds
	// waits under 2^i s (bucket 0: under a second), the last everything
	// longer; the web page draws it.
	Histogram []int `json:"histogram"`
}

const histogramBuckets = 20

func distribution(xs []float64) Distribution {
	d := Distribution{Count: len(xs), Histogram: make([]int, histogramBuckets)}
	if len(xs) == 0 {
		return d
	}
	slices.Sort(xs)
	at := func(q float64) float64 { return xs[min(len(xs)-1, int(q*float64(len(xs))))] }
	d.P50, d.P90, d.P99, d.Max = at(0.5), at(0.9), at(0.99), xs[len(xs)-1]
	var sum float64
	for _, x := range xs {
		sum += x
		b, bound := 0, 1.0
		for x >= bound && b < histogramBuckets-1 {
			b++
			bound *= 2
		}
		d.Histogram[b]++
	}
	d.Mean = sum / float64(len(xs))
	return d
}

// observer folds nothing itself: it reads each event after it was applied
// to s (the recording's copy of the state, or the simulation's own).
type observer struct {
	s       *projections.State
	groups  map[groupKey]*Group
	waiting map[projections.TaskKey]int64 // pending since (us)
	running map[projections.TaskKey]projections.Resources
	up      map[string]projections.Resources
	used    map[string]bool
	m       Metrics

	lastUS                 int64
	held, capacity         projections.Resources
	cpuArea, memArea       float64
	cpuCapArea, memCapArea float64
}

type groupKey struct {
	user string
	band events.Band
}

func newObserver(s *projections.State) *observer {
	o := &observer{s: s, groups: map[groupKey]*Group{}, waiting: map[projections.TaskKey]int64{},
		running: map[projections.TaskKey]projections.Resources{}, up: map[string]projections.Resources{}, used: map[string]bool{},
		lastUS: s.TimeUS}
	for name, m := range s.Machines {
		if m.State == projections.MachineUp {
			o.up[name] = m.Capacity
			o.capacity = o.capacity.Add(m.Capacity)
		}
	}
	for _, j := range s.Jobs {
		for _, t := range j.Tasks {
			switch {
			case t == nil:
			case t.State == projections.TaskPending:
				o.waiting[t.Key()] = s.TimeUS
			case t.State == projections.TaskRunning:
				o.running[t.Key()] = t.Limit
				o.held = o.held.Add(t.Limit)
				o.used[t.Machine] = true
			}
		}
	}
	return o
}

func (o *observer) group(user, job string) *Group {
	band := events.BandBestEffort
	if j := o.s.Job(user, job); j != nil {
		band = events.BandOf(j.Priority())
	}
	k := groupKey{user, band}
	g := o.groups[k]
	if g == nil {
		g = &Group{User: user, Band: band.String()}
		o.groups[k] = g
	}
	return g
}

// advance integrates what was held up to us.
func (o *observer) advance(us int64) {
	if us <= o.lastUS {
		return
	}
	dt := float64(us - o.lastUS)
	o.cpuArea += dt * float64(o.held.CPUMilli)
	o.memArea += dt * float64(o.held.MemoryBytes)
	o.cpuCapArea += dt * float64(o.capacity.CPUMilli)
	o.memCapArea += dt * float64(o.capacity.MemoryBytes)
	o.lastUS = us
}

// stopped ends a run; a task pending again (evicted, lost, or failed
// and rescheduled) waits from now.
func (o *observer) stopped(k projections.TaskKey, us int64) {
	if r, ok := o.running[k]; ok {
		o.held = o.held.Sub(r)
		delete(o.running, k)
	}
	if t := o.s.Task(k.User, k.Job, k.Index); t != nil && t.State == projections.TaskPending {
		if _, ok := o.waiting[k]; !ok {
			o.waiting[k] = us
		}
	}
}

func (o *observer) machineDown(name string) {
	if c, ok := o.up[name]; ok {
		o.capacity = o.capacity.Sub(c)
		delete(o.up, name)
	}
}

func (o *observer) observe(e events.Event) {
	us := e.OccurredAt.UnixMicro()
	o.advance(us)
	switch p := e.Data.(type) {
	case *events.TaskSubmitted:
		o.waiting[projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}] = us
	case *events.TaskScheduled:
		k := projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}
		g := o.group(p.User, p.Job)
		if since, ok := o.waiting[k]; ok {
			g.samples = append(g.samples, float64(us-since)/1e6)
			delete(o.waiting, k)
		}
		g.Placed++
	case *events.TaskStarted:
		k := projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}
		if _, ok := o.running[k]; !ok {
			if t := o.s.Task(p.User, p.Job, p.Index); t != nil {
				o.running[k] = t.Limit
				o.held = o.held.Add(t.Limit)
			}
		}
		o.used[p.Machine] = true
	case *events.TaskFinished:
		o.stopped(projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, us)
	case *events.TaskFailed:
		if !p.WillRestart {
			o.stopped(projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, us)
		}
	case *events.TaskKilled:
		k := projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}
		o.stopped(k, us)
		delete(o.waiting, k)
	case *events.TaskLost:
		o.stopped(projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, us)
		o.m.Lost++
	case *events.TaskEvicted:
		o.stopped(projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, us)
		g := o.group(p.User, p.Job)
		g.Evicted++
		if p.Reason == "preempted" {
			g.Preempts++
		}
	case *events.MachineRegistered:
		if m := o.s.Machines[p.Machine]; m != nil && m.State == projections.MachineUp {
			o.machineDown(p.Machine)
			o.up[p.Machine] = m.Capacity
			o.capacity = o.capacity.Add(m.Capacity)
		}
	case *events.MachineUp:
		if m := o.s.Machines[p.Machine]; m != nil {
			o.machineDown(p.Machine)
			o.up[p.Machine] = m.Capacity
			o.capacity = o.capacity.Add(m.Capacity)
		}
	case *events.MachineDown:
		o.machineDown(p.Machine)
	case *events.MachineRemoved:
		o.machineDown(p.Machine)
	}
}

// finish closes the waits still open at endUS and sums up.
func (o *observer) finish(endUS int64) *Metrics {
	o.advance(endUS)
	for k, since := range o.waiting {
		t := o.s.Task(k.User, k.Job, k.Index)
		if t == nil || t.State != projections.TaskPending {
			continue
		}
		g := o.group(k.User, k.Job)
		g.samples = append(g.samples, float64(max(endUS-since, 0))/1e6)
		g.Never++
	}
	m := o.m
	var all []float64
	for _, g := range o.groups {
		all = append(all, g.samples...)
		g.Pending = distribution(g.samples)
		g.samples = nil
		m.Groups = append(m.Groups, g)
		m.Placed += g.Placed
		m.Never += g.Never
		m.Evicted += g.Evicted
		m.Preempts += g.Preempts
	}
	slices.SortFunc(m.Groups, func(a, b *Group) int { return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Band, b.Band)) })
	m.Pending = distribution(all)
	if o.cpuCapArea > 0 {
		m.CPU = o.cpuArea / o.cpuCapArea
	}
	if o.memCapArea > 0 {
		m.Memory = o.memArea / o.memCapArea
	}
	m.MachinesUsed = len(o.used)
	return &m
}
