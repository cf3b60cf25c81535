package commands

import (
	"fmt"
	"strings"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// PlaceTasks carries a scheduler pass's proposals. Each placement was
// computed against a machine version; the handler re-checks every one
// against the current state and refuses the stale or no longer feasible
// ones one by one, accepting the rest (Omega's optimistic concurrency,
// Nomad's plan applier). The refused tasks stay pending for the next pass.
// A placement may preempt lower-priority tasks on its machine: they are
// evicted with reason "preempted" and the preemptor, and pending again.
type PlaceTasks struct {
	Meta
	// Allocs are taken in order, each before the placement its Before
	// names, so the plan is applied in the order the pass made it.
	Allocs     []AllocPlacement
	Placements []Placement
	// PassPosition is the log position the pass read, its seed, recorded
	// with each placement so that the pass replays (fauxmaster).
	PassPosition int64
}

// Placement puts one pending task on a machine.
type Placement struct {
	Task             projections.TaskKey
	Machine          string
	MachineVersion   int64 // the machine's Version the scheduler saw
	SpecVersion      int64 // the task's spec version the scheduler saw; 0: not checked
	AllocIndex       int32 // the alloc instance, for a job inside an alloc set
	Ports            []int32
	Preempt          []projections.TaskKey // tasks on Machine to evict first
	Score            float64
	MachinesExamined int32
}

// AllocPlacement puts one pending alloc of a set on a machine.
type AllocPlacement struct {
	User, Set      string
	Index          int32
	Machine        string
	MachineVersion int64
	Score          float64
	// Before is how many of the command's Placements come before this
	// alloc in the pass's order (0: before them all).
	Before int
}

// Refusal says why one proposal was not accepted.
type Refusal struct {
	Alloc  bool // Index is into Allocs, else into Placements
	Index  int
	Reason string
}

func (r Refusal) String() string {
	kind := "placements"
	if r.Alloc {
		kind = "allocs"
	}
	return fmt.Sprintf("%s[%d]: %s", kind, r.Index, r.Reason)
}

// Check returns the proposals Decide would refuse, and why.
func (c PlaceTasks) Check(s *projections.State) []Refusal {
	_, refused := c.plan(s, time.Time{})
	return refused
}

func (c PlaceTasks) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "placing tasks"); err != nil {
		return nil, err
	}
	if len(c.Placements) == 0 && len(c.Allocs) == 0 {
		return nil, invalid("placements", "no placement proposed")
	}
	evs, refused := c.plan(s, now)
	if len(evs) == 0 {
		reasons := make([]string, 0, min(len(refused), 5))
		for i, r := range refused {
			if i == 5 {
				reasons = append(reasons, fmt.Sprintf("and %d more", len(refused)-5))
				break
			}
			reasons = append(reasons, r.String())
		}
		return nil, refuse(Aborted, "placements", "every proposal was refused: %s", strings.Join(reasons, "; "))
	}
	return evs, nil
}

// machineUse is what the command's own placements and preemptions changed on
// one machine.
type machineUse struct {
	limits, reserved projections.Resources
	ports            map[int32]bool // taken (true) or freed (false) by this command
}

type planner struct {
	*draft
	placedAt  map[*projections.Task]*projections.Machine // placed by this command
	use       map[*projections.Machine]*machineUse
	allocAt   map[*projections.Alloc]*projections.Machine // placed by this command
	allocUsed map[*projections.Alloc]projections.Resources
	pass      int64 // PlaceTasks.PassPosition
}

func (p *planner) machineUse(m *projections.Machine) *machineUse {
	u := p.use[m]
	if u == nil {
		u = &machineUse{ports: map[int32]bool{}}
		p.use[m] = u
	}
	return u
}

func (c PlaceTasks) plan(s *projections.State, now time.Time) ([]events.Event, []Refusal) {
	p := &planner{draft: newDraft(s, now), use: map[*projections.Machine]*machineUse{}, placedAt: map[*projections.Task]*projections.Machine{},
		allocAt: map[*projections.Alloc]*projections.Machine{}, allocUsed: map[*projections.Alloc]projections.Resources{}, pass: c.PassPosition}
	var refused []Refusal
	next := 0 // the next alloc
	allocsBefore := func(n int) {
		for ; next < len(c.Allocs) && c.Allocs[next].Before <= n; next++ {
			if reason := p.placeAlloc(c.Allocs[next]); reason != "" {
				refused = append(refused, Refusal{Alloc: true, Index: next, Reason: reason})
			}
		}
	}
	for i, pl := range c.Placements {
		allocsBefore(i)
		if reason := p.placeTask(pl); reason != "" {
			refused = append(refused, Refusal{Index: i, Reason: reason})
		}
	}
	allocsBefore(len(c.Placements) + len(c.Allocs))
	p.finishJobs()
	return p.evs, refused
}

// schedulable returns the machine or why a proposal cannot use it.
func (p *planner) schedulable(name string, version int64) (*projections.Machine, string) {
	m := p.s.Machines[name]
	switch {
	case m == nil:
		return nil, fmt.Sprintf("machine %q is not registered", name)
	case m.State == projections.MachineDown:
		return nil, fmt.Sprintf("machine %s is down", name)
	case m.Draining:
		return nil, fmt.Sprintf("machine %s is draining", name)
	case m.Version != version:
		return nil, fmt.Sprintf("stale: computed against version %d of machine %s, which is at version %d", version, name, m.Version)
	}
	return m, ""
}

// free is what a new task or alloc may use on m after the command's placements so far:
// the pass's own rule, scheduler.Available.
func (p *planner) free(m *projections.Machine, prod bool) projections.Resources {
	u := p.machineUse(m)
	return FromSched(scheduler.Available(Sched(m.Capacity), Sched(m.Limits.Add(u.limits)), Sched(m.Reserved.Add(u.reserved)), prod))
}

// unmet is the first hard constraint of cs that m does not meet, judged by
// the pass's own matcher (scheduler.FirstUnmet); "" when m meets them all.
func unmet(m *projections.Machine, cs []*events.Constraint) string {
	sc := make([]scheduler.Constraint, len(cs))
	for i, c := range cs {
		sc[i] = scheduler.ConstraintFromEvents(c)
	}
	if c, ok := scheduler.FirstUnmet(m.Attributes, sc); !ok {
		return fmt.Sprintf("machine %s does not meet constraint %s", m.Name, c)
	}
	return ""
}

// sameJobOn counts the tasks of t's job other than t on machine m, placed
// before this command (and not ended by it) or by it, and returns the first.
func (p *planner) sameJobOn(t *projections.Task, m *projections.Machine) (first *projections.Task, n int) {
	for _, o := range t.Job.Tasks {
		if o == nil || o == t {
			continue
		}
		there := false
		if at, ok := p.placedAt[o]; ok {
			there = at == m
		} else {
			there = o.Live() && o.Machine == m.Name && !p.dead(o)
		}
		if there {
			if first == nil {
				first = o
			}
			n++
		}
	}
	return first, n
}

func (p *planner) placeAlloc(ap AllocPlacement) string {
	set := p.s.AllocSets[projections.JobKey{User: ap.User, Name: ap.Set}]
	if set == nil {
		return fmt.Sprintf("alloc set %s/%s does not exist", ap.User, ap.Set)
	}
	if ap.Index < 0 || int(ap.Index) >= len(set.Allocs) {
		return fmt.Sprintf("alloc set %s/%s has no alloc %d", ap.User, ap.Set, ap.Index)
	}
	a := set.Allocs[ap.Index]
	if a.Placed() || p.allocAt[a] != nil {
		return fmt.Sprintf("alloc %s/%s/%d is placed already", ap.User, ap.Set, ap.Index)
	}
	m, why := p.schedulable(ap.Machine, ap.MachineVersion)
	if m == nil {
		return why
	}
	if why := unmet(m, set.Constraints); why != "" {
		return why
	}
	if free := p.free(m, projections.IsProd(set.Priority)); !set.Resources.LessEq(free) {
		return fmt.Sprintf("does not fit: the alloc holds [%s], machine %s has [%s] free", set.Resources, m.Name, free)
	}
	u := p.machineUse(m)
	u.limits, u.reserved = u.limits.Add(set.Resources), u.reserved.Add(set.Resources)
	p.allocAt[a] = m
	p.add(events.AllocSetStream(ap.User, ap.Set), &events.AllocScheduled{User: ap.User, Name: ap.Set, Index: ap.Index,
		Machine: m.Name, MachineVersion: ap.MachineVersion, Score: ap.Score, PassPosition: p.pass})
	return ""
}

func (p *planner) placeTask(pl Placement) string {
	t, why := p.pendingTask(pl)
	if t == nil {
		return why
	}
	m, why := p.schedulable(pl.Machine, pl.MachineVersion)
	if m == nil {
		return why
	}
	spec := t.Spec()
	if why := unmet(m, spec.Constraints); why != "" {
		return why
	}
	// distinct_hosts by the pass's rule; the job's tasks are looked through
	// only when it asks for it.
	if spec.DistinctHosts {
		if o, n := p.sameJobOn(t, m); scheduler.DistinctHostsExclude(spec.DistinctHosts, n) {
			return fmt.Sprintf("distinct_hosts: task %d of the job is on machine %s already", o.Index, m.Name)
		}
	}
	prio := spec.Priority
	prod := projections.IsProd(prio)
	pre, why := p.victims(pl.Preempt, m, prio, prod)
	if why != "" {
		return why
	}
	allocIndex := int32(-1)
	if spec.AllocSet != "" {
		if allocIndex, why = p.fitInAlloc(t, m, spec.AllocSet, pl.AllocIndex, len(pre.tasks) > 0); why != "" {
			return why
		}
	} else if free := p.free(m, prod).Add(pre.freed); !t.Limit.LessEq(free) {
		kind := "non-prod"
		if prod {
			kind = "prod"
		}
		return fmt.Sprintf("does not fit: asks for [%s], machine %s has [%s] free for a %s task", t.Limit, m.Name, free, kind)
	}
	ports, why := p.ports(m, t, pl.Ports, pre.ports)
	if why != "" {
		return why
	}
	p.schedule(pl, t, m, prio, pre.tasks, allocIndex, ports)
	return ""
}

// pendingTask returns the task pl names, or why it cannot be placed now.
func (p *planner) pendingTask(pl Placement) (*projections.Task, string) {
	t := p.s.Task(pl.Task.User, pl.Task.Job, pl.Task.Index)
	if t == nil {
		return nil, fmt.Sprintf("task %s does not exist", pl.Task)
	}
	if _, touched := p.status[t]; touched {
		return nil, fmt.Sprintf("task %s was already changed by this command", pl.Task)
	}
	if t.State != projections.TaskPending {
		return nil, fmt.Sprintf("task %s is %s, not pending", pl.Task, t.State)
	}
	if pl.SpecVersion != 0 && pl.SpecVersion != t.SpecVersion {
		return nil, fmt.Sprintf("stale: computed for spec version %d of task %s, which is at version %d", pl.SpecVersion, pl.Task, t.SpecVersion)
	}
	return t, ""
}

// preemption is what a placement's victims free on their machine.
type preemption struct {
	tasks []*projections.Task
	freed projections.Resources
	ports map[int32]bool
}

// victims checks the tasks a placement at prio would preempt on m: tasks
// placed directly on the machine that it may preempt by the pass's own rule,
// events.CanPreempt (Borg §2.5).
func (p *planner) victims(keys []projections.TaskKey, m *projections.Machine, prio int32, prod bool) (preemption, string) {
	pre := preemption{ports: map[int32]bool{}}
	for _, k := range keys {
		v := p.s.Task(k.User, k.Job, k.Index)
		switch {
		case v == nil || !v.Live() || v.Machine != m.Name || (p.state(v) != projections.TaskScheduled && p.state(v) != projections.TaskRunning):
			return pre, fmt.Sprintf("victim %s is not placed on machine %s", k, m.Name)
		case events.WhyNoPreemption(prio, v.Priority()) != "":
			return pre, fmt.Sprintf("victim %s at priority %d, the task at %d: %s", k, v.Priority(), prio, events.WhyNoPreemption(prio, v.Priority()))
		case v.AllocIndex >= 0:
			return pre, fmt.Sprintf("victim %s runs inside an alloc; evicting it frees nothing on the machine", k)
		}
		for _, x := range pre.tasks {
			if x == v {
				return pre, fmt.Sprintf("victim %s is named twice", k)
			}
		}
		pre.tasks = append(pre.tasks, v)
		if prod {
			pre.freed = pre.freed.Add(v.Limit)
		} else {
			pre.freed = pre.freed.Add(v.Reservation)
		}
		for _, port := range v.Ports {
			pre.ports[port] = true
		}
	}
	return pre, ""
}

// fitInAlloc checks that t fits in alloc index of its job's set on m and
// takes its room there; it returns the alloc's index.
func (p *planner) fitInAlloc(t *projections.Task, m *projections.Machine, setName string, index int32, preempts bool) (int32, string) {
	set := p.s.AllocSets[projections.JobKey{User: t.Job.User, Name: setName}]
	if set == nil || index < 0 || int(index) >= len(set.Allocs) {
		return -1, fmt.Sprintf("alloc %d of set %s does not exist", index, setName)
	}
	a := set.Allocs[index]
	if at := p.allocAt[a]; a.Machine != m.Name && at != m {
		return -1, fmt.Sprintf("alloc %s/%d is not on machine %s", setName, index, m.Name)
	}
	if preempts {
		return -1, "a task inside an alloc preempts nothing: the alloc's resources are its own"
	}
	free := a.Free().Sub(p.allocUsed[a])
	if !t.Limit.LessEq(free) {
		return -1, fmt.Sprintf("does not fit: asks for [%s], alloc %s/%d has [%s] free", t.Limit, setName, index, free)
	}
	p.allocUsed[a] = p.allocUsed[a].Add(t.Limit)
	return index, ""
}

// schedule records a checked placement: the victims' evictions, the room
// the task at prio takes on m, and its TaskScheduled.
func (p *planner) schedule(pl Placement, t *projections.Task, m *projections.Machine, prio int32, victims []*projections.Task, allocIndex int32, ports []int32) {
	u := p.machineUse(m)
	preempted := make([]*events.TaskRef, 0, len(victims))
	for _, v := range victims {
		// Not held: the preemptor takes the room in this same command.
		p.evict(v, "preempted", fmt.Sprintf("preempted by %s at priority %d", t.Key(), prio), ref(t), false)
		u.limits, u.reserved = u.limits.Sub(v.Limit), u.reserved.Sub(v.Reservation)
		for _, port := range v.Ports {
			u.ports[port] = false
		}
		preempted = append(preempted, ref(v))
	}
	if allocIndex < 0 {
		u.limits, u.reserved = u.limits.Add(t.Limit), u.reserved.Add(t.Reservation)
	}
	for _, port := range ports {
		u.ports[port] = true
	}
	p.placedAt[t] = m
	p.add(taskStream(t), &events.TaskScheduled{User: t.Job.User, Job: t.Job.Name, Index: t.Index, Machine: m.Name,
		SpecVersion: t.SpecVersion, Score: pl.Score, MachinesExamined: pl.MachinesExamined, Preempted: preempted,
		Ports: ports, MachineVersion: pl.MachineVersion, AllocIndex: max(allocIndex, 0), PassPosition: p.pass})
	p.status[t] = projections.TaskScheduled
	p.touch(t.Job)
}

// ports checks the proposed port numbers, or picks the lowest free ones in
// the machine's range when none were proposed.
func (p *planner) ports(m *projections.Machine, t *projections.Task, proposed []int32, freed map[int32]bool) ([]int32, string) {
	want := int(t.Limit.Ports)
	if want == 0 {
		if len(proposed) > 0 {
			return nil, fmt.Sprintf("task %s asks for no ports, %d proposed", t.Key(), len(proposed))
		}
		return nil, ""
	}
	taken := m.UsedPorts()
	for port := range freed {
		delete(taken, port)
	}
	for port, isTaken := range p.machineUse(m).ports {
		if isTaken {
			taken[port] = true
		} else {
			delete(taken, port)
		}
	}
	lo, hi := m.PortBase, m.PortBase+int32(m.Capacity.Ports)
	if len(proposed) > 0 {
		if len(proposed) != want {
			return nil, fmt.Sprintf("task %s asks for %d ports, %d proposed", t.Key(), want, len(proposed))
		}
		seen := map[int32]bool{}
		for _, port := range proposed {
			switch {
			case port < lo || port >= hi:
				return nil, fmt.Sprintf("port %d is outside machine %s's range %d-%d", port, m.Name, lo, hi-1)
			case taken[port] || seen[port]:
				return nil, fmt.Sprintf("port %d on machine %s is taken", port, m.Name)
			}
			seen[port] = true
		}
		return proposed, ""
	}
	out := make([]int32, 0, want)
	for port := lo; port < hi && len(out) < want; port++ {
		if !taken[port] {
			out = append(out, port)
		}
	}
	if len(out) < want {
		return nil, fmt.Sprintf("machine %s has %d free ports, the task asks for %d", m.Name, len(out), want)
	}
	return out, ""
}
