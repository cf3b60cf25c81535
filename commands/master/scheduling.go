package master

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// SchedulerConfig tunes the leader's scheduling loop.
type SchedulerConfig struct {
	Pass scheduler.Config
	// Interval between passes while tasks are pending (default 200 ms); a
	// pass also starts as soon as new events arrive.
	Interval time.Duration
	// CrashMemory is how long a machine where a task crashed is avoided for
	// that task (default 5 minutes).
	CrashMemory time.Duration
	// RescheduleRate bounds how many tasks lost with unreachable machines
	// return to the queue per second (a partition looks like a mass
	// failure); RescheduleBurst is the bucket size.
	RescheduleRate  float64
	RescheduleBurst int
	// Explanations receives the why-pending explanations of each pass.
	Explanations *Explanations
	// Metrics, when set, is told what each pass did.
	Metrics SchedulerMetrics
}

// Explanations keeps the latest pass's why-pending answers.
type Explanations struct {
	mu       sync.RWMutex
	position int64
	byJob    map[projections.JobKey][]scheduler.Explanation
	bySet    map[projections.JobKey][]scheduler.Explanation // pending allocs, by alloc set
	// feasibleK is the pass's FeasibleK, which spreading by default's cap
	// depends on (scheduler.SpreadCap).
	feasibleK int
}

// NewExplanations returns an empty store of explanations.
func NewExplanations() *Explanations {
	return &Explanations{byJob: map[projections.JobKey][]scheduler.Explanation{}}
}

// Set keeps plan, the pass at position, as the answers: the scheduling
// loop after each pass, PlanUpdate for the pass it plans.
func (e *Explanations) Set(position int64, plan *scheduler.Plan) {
	by := map[projections.JobKey][]scheduler.Explanation{}
	sets := map[projections.JobKey][]scheduler.Explanation{}
	for _, ex := range plan.Pending {
		if len(ex.Allocs) > 0 {
			k := projections.JobKey{User: ex.Allocs[0].Set.User, Name: ex.Allocs[0].Set.Name}
			sets[k] = append(sets[k], ex)
		}
		seen := map[projections.JobKey]bool{}
		for _, t := range ex.Tasks {
			k := projections.JobKey{User: t.User, Name: t.Job}
			if !seen[k] {
				seen[k] = true
				by[k] = append(by[k], ex)
			}
		}
	}
	e.mu.Lock()
	e.position, e.byJob, e.bySet = position, by, sets
	e.mu.Unlock()
}

// backingOff counts a job's pending tasks waiting out a backoff, the latest
// time one waits until and why the last of them failed.
func backingOff(s *projections.State, j *projections.Job) (n int, until time.Time, why string) {
	now := time.UnixMicro(s.TimeUS)
	for _, t := range j.Tasks {
		if t == nil || t.State != projections.TaskPending || t.NotBeforeUS == 0 {
			continue
		}
		nb := time.UnixMicro(t.NotBeforeUS)
		if !nb.After(now) && !nb.After(time.Now()) {
			continue
		}
		n++
		if nb.After(until) {
			until, why = nb, t.LastFailure()
		}
	}
	return n, until, why
}

// restartingInPlace counts a job's placed tasks that the agent restarts in
// place after a failure, with the first of them and its failure.
func restartingInPlace(j *projections.Job) (n int, first int32, why string) {
	for _, t := range j.Tasks {
		if t == nil || !t.RestartingInPlace() {
			continue
		}
		if n == 0 {
			first, why = t.Index, t.LastFailure()
		}
		n++
	}
	return n, first, why
}

// spreadUnmet is scheduler.SpreadUnmet over the job's placed tasks in s:
// "" when the job packs or its tasks are spread as the pass wants.
func spreadUnmet(s *projections.State, j *projections.Job, k int) string {
	if j.Spec().GetPack() {
		return ""
	}
	on := map[string]int{}
	tasks := j.PendingTasks()
	for _, t := range j.Tasks {
		if t != nil && t.Live() && t.Machine != "" {
			on[t.Machine]++
			tasks++
		}
	}
	if len(on) == 0 {
		return ""
	}
	up := 0
	for _, m := range s.Machines {
		if m.Schedulable() {
			up++
		}
	}
	return scheduler.SpreadUnmet(on, tasks, up, k)
}

// Explain renders the latest explanation of a job's pending tasks; it is
// api.Service.Explain.
func (e *Explanations) Explain(s *projections.State, j *projections.Job) *apipb.WhyPendingReply {
	out := &apipb.WhyPendingReply{User: j.User, Job: j.Name, Pending: int32(j.PendingTasks())}
	e.mu.RLock()
	k := e.feasibleK
	e.mu.RUnlock()
	out.Spread = spreadUnmet(s, j, k)
	if j.PendingTasks() == 0 {
		out.Summary = fmt.Sprintf("job %s/%s has no pending task (%s)", j.User, j.Name, j.State())
		if n, idx, why := restartingInPlace(j); n > 0 {
			// Placed is not running: say what keeps them from it.
			out.Summary += fmt.Sprintf("; %d task(s) are not running but restarting in place after failing (task %d: %s)", n, idx, why)
		}
		return out
	}
	if j.Deferred {
		out.Summary = fmt.Sprintf("job %s/%s waits for job %s to finish before it starts", j.User, j.Name, j.Spec().GetStartAfter())
		return out
	}
	if n, until, why := backingOff(s, j); n > 0 && n == j.PendingTasks() {
		out.Summary = fmt.Sprintf("%d task(s) of %s/%s back off after failing until %s (last: %s); the restart policy's backoff doubles with each failure in a row",
			n, j.User, j.Name, until.UTC().Format(time.RFC3339), why)
		return out
	}
	e.mu.RLock()
	exs := e.byJob[j.Key()]
	// A job inside an alloc set also waits for the set's allocs: say why
	// those are not placed.
	if set := j.Spec().GetAllocSet(); set != "" {
		exs = append(exs, e.bySet[projections.JobKey{User: j.User, Name: set}]...)
	}
	e.mu.RUnlock()
	if len(exs) == 0 {
		out.Summary = fmt.Sprintf("%d task(s) of %s/%s wait for the next scheduling pass", j.PendingTasks(), j.User, j.Name)
		return out
	}
	var parts []string
	for _, ex := range exs {
		pc := &apipb.PendingClass{MachinesConsidered: int32(ex.Machines), Hints: ex.Hints, Summary: ex.String()}
		for _, t := range ex.Tasks {
			if t.User == j.User && t.Job == j.Name {
				pc.TaskIndexes = append(pc.TaskIndexes, t.Index)
			}
		}
		if len(ex.Allocs) > 0 {
			pc.Summary = fmt.Sprintf("the alloc set %s has %d alloc(s) no machine can hold:\n%s", ex.Allocs[0].Set.Name, len(ex.Allocs), pc.Summary)
		}
		for _, r := range ex.Rejections {
			reason := r.Reason.String()
			if r.Reason == scheduler.ReasonConstraint {
				reason = "constraint " + r.Constraint
			}
			pc.Rejections = append(pc.Rejections, &apipb.RejectionCount{Reason: reason, Machines: int32(r.Machines)})
		}
		out.Classes = append(out.Classes, pc)
		if len(ex.Hints) > 0 {
			parts = append(parts, ex.Hints[0])
		}
	}
	out.Summary = fmt.Sprintf("%d task(s) of %s/%s fit on none of %d machines", j.PendingTasks(), j.User, j.Name, exs[0].Machines)
	if len(parts) > 0 {
		out.Summary += ": " + strings.Join(parts, "; ")
	}
	return out
}

// SchedulingCore is the scheduling loop's decisions, pure: what the pass
// reads from the projection, the pass itself, the command that proposes
// its plan, and the one that records why the tasks it left wait. The
// leader's loop (SchedulerLoop) and the simulation drive the same core;
// they own only the waiting, the locking and the I/O.
type SchedulingCore struct {
	cfg         SchedulerConfig
	sched       *scheduler.Scheduler
	limiter     *scheduler.RescheduleLimiter
	meta        commands.Meta
	lastPlanned int64
	// behind caches whether some live job has tasks behind its spec
	// version with no update open, as of behindAt: finding out walks every
	// task (2 ms for 100,000), too much for every wake of the loop, so it
	// is done at most once an interval.
	behind    bool
	behindAt  time.Time
	behindPos int64 // State.UpdatesChangedPos at the last look (-1: never)
	cell      CellCache
}

// NewSchedulingCore returns a core with cfg's defaults filled in.
func NewSchedulingCore(cfg SchedulerConfig) *SchedulingCore {
	if cfg.Pass.Policy == "" {
		cfg.Pass = scheduler.DefaultConfig()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 200 * time.Millisecond
	}
	if cfg.CrashMemory <= 0 {
		cfg.CrashMemory = 5 * time.Minute
	}
	if cfg.RescheduleRate <= 0 {
		cfg.RescheduleRate = 50
	}
	if cfg.RescheduleBurst <= 0 {
		cfg.RescheduleBurst = 500
	}
	if cfg.Explanations != nil {
		cfg.Explanations.mu.Lock()
		cfg.Explanations.feasibleK = cfg.Pass.FeasibleK
		cfg.Explanations.mu.Unlock()
	}
	sched := scheduler.New(cfg.Pass)
	sched.RememberMachines() // buildCell makes a new Machine whenever one changes
	return &SchedulingCore{cfg: cfg, sched: sched, lastPlanned: -1, behindPos: -1,
		limiter: scheduler.NewRescheduleLimiter(cfg.RescheduleRate, cfg.RescheduleBurst, 0.5),
		meta:    commands.Meta{Actor: commands.Actor{User: "scheduler", Admin: true}}}
}

// Interval is the time between passes while work is pending.
func (c *SchedulingCore) Interval() time.Duration { return c.cfg.Interval }

// Meta is the identity the scheduler's commands carry.
func (c *SchedulingCore) Meta() commands.Meta { return c.meta }

// Input reads the pass's input from s (under the caller's consistent view)
// at now: nil when nothing is pending or nothing happened since the last
// planned position. rolling says some live job has an update open or tasks
// behind the spec version it wants (an update committed or rolled back in
// the middle of its roll), or a draining machine still holds tasks, so the
// caller steps the rolls and drains (RollingUpdateStep) until none is
// left.
func (c *SchedulingCore) Input(s *projections.State, now time.Time) (cell *scheduler.Cell, position int64, rolling bool) {
	position = s.Position
	s.RangeLiveJobs(func(j *projections.Job) bool {
		rolling = j.Update != nil
		return !rolling
	})
	if !rolling {
		// Tasks fall behind only when a job's spec moves after its
		// submission: with none behind at the last look and no such move
		// since, there is nothing to walk.
		moved := s.UpdatesChangedPos != c.behindPos
		if (moved || c.behind) && (c.behindAt.IsZero() || now.Sub(c.behindAt) >= c.cfg.Interval || now.Before(c.behindAt)) {
			c.behind, c.behindAt, c.behindPos = false, now, s.UpdatesChangedPos
			s.RangeLiveJobs(func(j *projections.Job) bool {
				c.behind = j.Behind()
				return !c.behind
			})
		}
		rolling = c.behind
	}
	// A drain held by disruption budgets moves on by the same step.
	rolling = rolling || commands.DrainsOpen(s)
	if position == c.lastPlanned || (s.PendingCount() == 0 && len(s.PendingAllocs()) == 0) {
		return nil, position, rolling
	}
	cell = buildCell(s, now, c.cfg.CrashMemory, c.limiter, &c.cell)
	if len(cell.Pending)+len(cell.PendingAllocs) == 0 {
		return nil, position, rolling
	}
	c.lastPlanned = position
	return cell, position, rolling
}

// Plan runs the pass, seeded by the log position so that a pass replays,
// and returns the plan with the PlaceTasks that proposes it (nil when it
// places nothing). The handler refuses stale placements one by one and the
// next pass reconsiders them.
func (c *SchedulingCore) Plan(cell *scheduler.Cell, position int64) (*scheduler.Plan, *commands.PlaceTasks) {
	plan := c.sched.Schedule(cell, uint64(position))
	cmd := placeCommand(c.meta, plan)
	if cmd != nil {
		cmd.PassPosition = position
	}
	return plan, cmd
}

// Reasons is the command that records why the pass left tasks pending, nil
// when it left none (pending allocs aside): for each class, per job, the
// check that rejected the most machines and the pass's first hint. The
// command keeps only what changed since the last record.
func (c *SchedulingCore) Reasons(plan *scheduler.Plan) *commands.RecordPendingReasons {
	var out []*events.PendingReason
	for i := range plan.Pending {
		ex := &plan.Pending[i]
		if len(ex.Tasks) == 0 {
			continue
		}
		reason, hint := mainReason(ex), ""
		if len(ex.Hints) > 0 {
			hint = ex.Hints[0]
		}
		byJob := map[projections.JobKey]*events.PendingReason{}
		for _, t := range ex.Tasks {
			k := projections.JobKey{User: t.User, Name: t.Job}
			r := byJob[k]
			if r == nil {
				r = &events.PendingReason{User: t.User, Job: t.Job, Reason: reason, Hint: hint}
				byJob[k] = r
				out = append(out, r)
			}
			r.Indexes = append(r.Indexes, t.Index)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &commands.RecordPendingReasons{Meta: c.meta, Reasons: out}
}

// mainReason is what kept a class off the most machines, without counts (so
// that it changes when the reason does, not with every placement).
func mainReason(ex *scheduler.Explanation) string {
	if len(ex.Rejections) == 0 {
		if ex.Machines == 0 {
			return "no machine in the cell"
		}
		return "every machine that fits was taken by tasks placed before it in the pass"
	}
	r := ex.Rejections[0]
	if r.Reason == scheduler.ReasonConstraint {
		return "constraint " + r.Constraint
	}
	return r.Reason.String()
}

// Retry forgets the last planned position: the interval's tick plans
// pending work again even without news.
func (c *SchedulingCore) Retry() { c.lastPlanned = -1 }

// SchedulerLoop returns the leader's scheduling loop, for Config.OnLeading:
// on news or every interval, the core's input read under a view, its pass
// run outside it, and its commands (placements, then why the rest wait)
// proposed through Do.
func SchedulerLoop(cfg SchedulerConfig) func(ctx context.Context, m *Master) {
	return func(ctx context.Context, m *Master) {
		core := NewSchedulingCore(cfg)
		for {
			woken := m.applied.Wait()
			var (
				cell     *scheduler.Cell
				position int64
				rolling  bool
			)
			m.View(func(s *projections.State) { cell, position, rolling = core.Input(s, m.clock()) })
			if cell != nil {
				passStart := time.Now()
				plan, cmd := core.Plan(cell, position)
				if cfg.Metrics != nil {
					cfg.Metrics.PassDone(time.Since(passStart), plan)
				}
				if cfg.Explanations != nil {
					cfg.Explanations.Set(position, plan)
				}
				if cmd != nil {
					if _, err := m.Do(ctx, *cmd); err != nil && ctx.Err() == nil && commands.CodeOf(err) != commands.Aborted {
						m.log.Warn("placing tasks", "err", err, "placements", len(cmd.Placements)+len(cmd.Allocs))
					}
				}
				if why := core.Reasons(plan); why != nil {
					if _, err := m.Do(ctx, *why); err != nil && ctx.Err() == nil {
						m.log.Warn("recording why tasks wait", "err", err)
					}
				}
			}
			if rolling {
				if _, err := m.Do(ctx, commands.RollingUpdateStep{Meta: core.Meta()}); err != nil && ctx.Err() == nil {
					m.log.Warn("stepping rolling updates", "err", err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-woken:
			case <-time.After(core.Interval()):
				core.Retry()
			}
		}
	}
}

// BuildCell is the adapter from the projection to the scheduler's input;
// the same state gives the same input.
func BuildCell(s *projections.State, now time.Time, crashMemory time.Duration, limiter *scheduler.RescheduleLimiter) *scheduler.Cell {
	return buildCell(s, now, crashMemory, limiter, nil)
}

// CellCache keeps the scheduler's view of each machine between passes:
// a machine's Version moves with every event that changes it or what is
// placed on it, so an entry of the same version is the same input, and the
// pass never writes its input. A cell of 10,000 machines then costs a pass
// only the machines that changed since the last one. It keeps the pending
// queue's order too, sorting in only what entered it since.
type CellCache struct {
	machines map[string]*scheduler.Machine
	names    []string // the state's machines by name, as of the last pass
	pending  projections.PendingOrder
}

// sorted returns s's machines by name. Sorting 10,000 names costs more than
// checking that the set is the one sorted last time, and the set rarely
// changes between passes.
func (c *CellCache) sorted(s *projections.State) []*projections.Machine {
	out := make([]*projections.Machine, 0, len(s.Machines))
	if c != nil && len(c.names) == len(s.Machines) {
		for _, name := range c.names {
			m := s.Machines[name]
			if m == nil {
				break
			}
			out = append(out, m)
		}
		if len(out) == len(s.Machines) {
			return out
		}
	}
	out = s.SortedMachines()
	if c != nil {
		c.names = c.names[:0]
		for _, m := range out {
			c.names = append(c.names, m.Name)
		}
	}
	return out
}

// buildCell is BuildCell with machines from cache (nil: none kept).
func buildCell(s *projections.State, now time.Time, crashMemory time.Duration, limiter *scheduler.RescheduleLimiter, cache *CellCache) *scheduler.Cell {
	cell := &scheduler.Cell{Machines: make([]*scheduler.Machine, 0, len(s.Machines))}
	down := 0
	if cache != nil && (cache.machines == nil || len(cache.machines) > 2*len(s.Machines)+16) {
		cache.machines = make(map[string]*scheduler.Machine, len(s.Machines)) // machines removed: start afresh
	}
	for _, m := range cache.sorted(s) {
		if m.State == projections.MachineDown {
			down++
		}
		if cache != nil {
			if sm := cache.machines[m.Name]; sm != nil && sm.Version == m.Version {
				cell.Machines = append(cell.Machines, sm)
				continue
			}
		}
		sm := schedulerMachine(m)
		if cache != nil {
			cache.machines[m.Name] = sm
		}
		cell.Machines = append(cell.Machines, sm)
	}
	for _, a := range s.PendingAllocs() {
		pa := scheduler.PendingAlloc{Set: scheduler.AllocSetRef{User: a.Set.User, Name: a.Set.Name}, Index: a.Index,
			Priority: a.Set.Priority, Resources: commands.Sched(a.Set.Resources)}
		for _, c := range a.Set.Constraints {
			pa.Constraints = append(pa.Constraints, scheduler.ConstraintFromEvents(c))
		}
		cell.PendingAllocs = append(cell.PendingAllocs, pa)
	}
	downShare := 0.0
	if len(s.Machines) > 0 {
		downShare = float64(down) / float64(len(s.Machines))
	}
	// Tasks lost with their machine return at a bounded rate.
	var lost []*projections.Task
	var pending []*projections.Task
	if cache != nil {
		pending = cache.pending.Tasks(s)
	} else {
		pending = s.PendingTasks()
	}
	cell.Pending = make([]scheduler.PendingTask, 0, len(pending))
	for _, t := range pending {
		if t.NotBeforeUS > now.UnixMicro() {
			continue // backing off after a failure of its own
		}
		if t.LastEnd == projections.Lost || strings.HasPrefix(t.Reason, "lost") {
			lost = append(lost, t)
			continue
		}
		cell.Pending = append(cell.Pending, pendingOf(t, now, crashMemory))
	}
	if n := limiter.Allow(now, len(lost), downShare); n > 0 {
		for _, t := range lost[:n] {
			cell.Pending = append(cell.Pending, pendingOf(t, now, crashMemory))
		}
	}
	return cell
}

func pendingOf(t *projections.Task, now time.Time, crashMemory time.Duration) scheduler.PendingTask {
	sp := t.Spec()
	pt := scheduler.PendingTask{Ref: scheduler.TaskRef{User: t.Job.User, Job: t.Job.Name, Index: t.Index}, Priority: t.Priority(),
		Seq: t.Seq, SpecVersion: t.SpecVersion, Resources: commands.Sched(t.Limit), AllocSet: sp.GetAllocSet(), Package: sp.GetPackage(),
		Spread: sp.GetSpread(), DistinctHosts: sp.GetDistinctHosts(), Pack: sp.GetPack()}
	for _, c := range sp.GetConstraints() {
		pt.Constraints = append(pt.Constraints, scheduler.ConstraintFromEvents(c))
	}
	// The machine it last failed on is avoided for a while.
	if t.LastEnd == projections.Failed && t.LastMachine != "" && now.UnixMicro()-t.SinceUS < crashMemory.Microseconds() {
		pt.CrashedOn = []string{t.LastMachine}
	}
	return pt
}

func placeCommand(meta commands.Meta, plan *scheduler.Plan) *commands.PlaceTasks {
	if len(plan.Placements) == 0 && len(plan.AllocPlacements) == 0 {
		return nil
	}
	cmd := &commands.PlaceTasks{Meta: meta}
	for _, p := range plan.AllocPlacements {
		cmd.Allocs = append(cmd.Allocs, commands.AllocPlacement{User: p.Alloc.Set.User, Set: p.Alloc.Set.Name, Index: p.Alloc.Index,
			Machine: p.Machine, MachineVersion: p.MachineVersion, Score: p.Score, Before: p.Before})
	}
	for _, p := range plan.Placements {
		pl := commands.Placement{Task: projections.TaskKey{User: p.Task.User, Job: p.Task.Job, Index: p.Task.Index}, Machine: p.Machine,
			MachineVersion: p.MachineVersion, AllocIndex: p.AllocIndex, Ports: p.Ports, Score: p.Score, MachinesExamined: p.MachinesExamined}
		if p.AllocSet == "" {
			pl.AllocIndex = -1
		}
		for _, v := range p.Preempted {
			pl.Preempt = append(pl.Preempt, projections.TaskKey{User: v.User, Job: v.Job, Index: v.Index})
		}
		cmd.Placements = append(cmd.Placements, pl)
	}
	return cmd
}

// schedulerMachine is one machine as the pass sees it.
func schedulerMachine(m *projections.Machine) *scheduler.Machine {
	// Runs stopping here hold their room until their processes are gone;
	// they are going already, so no placement may preempt them: the pass
	// sees less capacity rather than more tasks.
	sm := &scheduler.Machine{Name: m.Name, Version: m.Version, Capacity: commands.Sched(m.Capacity.Sub(m.HeldLimits())), Attributes: m.Attributes, PortBase: m.PortBase}
	switch {
	case m.State == projections.MachineDown:
		sm.State = scheduler.MachineDown
	case m.Draining:
		sm.State = scheduler.MachineDraining
	}
	var pkgs map[string]bool
	if n := m.TaskCount(); n > 0 {
		sm.Tasks = make([]scheduler.PlacedTask, 0, n)
	}
	m.RangeTasks(func(t *projections.Task) bool {
		pt := scheduler.PlacedTask{Ref: scheduler.TaskRef{User: t.Job.User, Job: t.Job.Name, Index: t.Index}, Priority: t.Priority(),
			Limit: commands.Sched(t.Limit), Reservation: commands.Sched(t.Reservation), Ports: t.Ports, AllocIndex: t.AllocIndex}
		if sp := t.Spec(); sp != nil {
			pt.AllocSet, pt.Package = sp.AllocSet, sp.Package
			if sp.Package != "" {
				if pkgs == nil {
					pkgs = map[string]bool{}
				}
				pkgs[sp.Package] = true
			}
		}
		sm.Tasks = append(sm.Tasks, pt)
		return true
	})
	// The machine's tasks come from a map: in key order, because the
	// pass's choice between equal victims follows their order and a
	// pass must replay.
	slices.SortFunc(sm.Tasks, func(a, b scheduler.PlacedTask) int {
		return cmp.Or(cmp.Compare(a.Ref.User, b.Ref.User), cmp.Compare(a.Ref.Job, b.Ref.Job), cmp.Compare(a.Ref.Index, b.Ref.Index))
	})
	for p := range pkgs {
		sm.Packages = append(sm.Packages, p)
	}
	sort.Strings(sm.Packages)
	for _, a := range m.Allocs() {
		sm.Allocs = append(sm.Allocs, scheduler.PlacedAlloc{Set: scheduler.AllocSetRef{User: a.Set.User, Name: a.Set.Name}, Index: a.Index, Priority: a.Set.Priority, Capacity: commands.Sched(a.Set.Resources)})
	}
	return sm
}
