package infrastore

import (
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// model is what the ingester folds the log into: the projection's own
// State, folded by projections.Apply (the one fold the master, the
// scheduler and the CLI read), so that every fact of the current-state
// tables and of the derived rows (a task's state, spec, limit and
// reservation on its task_events and task_usage rows) is the projection's.
// Beside it, only what the log says of the Infrastore's own rows: the
// position of each spec version's job_specs row (task_usage.spec_position
// cites it).
//
// Building a batch's rows is pure: no I/O, no clock. The model is
// recovered from the file: the newest fold_checkpoint (the projection's
// checkpoint codec, written in a batch's transaction every
// checkpointEvery events) and the events after it, read back from the
// events table (model_load.go).
type model struct {
	st *projections.State
	// specPositions maps a spec version to the position of its job_specs
	// row. A name used again starts its versions afresh, and the new
	// job's rows come later, so the newest row of a version is the one a
	// live task can run.
	specPositions map[specKey]int64
	// checkpointed is the position of the last checkpoint a batch carries.
	checkpointed int64
}

type specKey struct {
	user, job string
	version   int64
}

// allocKey names one alloc of an alloc set.
type allocKey struct {
	user, set string
	index     int32
}

// checkpointEvery is how many events may pass between two checkpoints of
// the fold in the file: a restart replays at most that many events from
// the events table. Encoding the state costs a few milliseconds per
// thousand jobs, so it is paid once per many batches while catching up.
var checkpointEvery int64 = 200_000

func newModel() *model {
	return &model{st: projections.New(), specPositions: map[specKey]int64{}}
}

// Task states in the tables, the same for rows from the log and from the
// trace. A task is "in force" (tasks_at) while pending or running.
const (
	statePending  = "pending"
	stateRunning  = "running"
	stateEvicted  = "evicted"
	stateFailed   = "failed"
	stateFinished = "finished"
	stateKilled   = "killed"
	stateLost     = "lost"
)

// stateOfCode is the task state after a trace event code (the trace's
// rows; the log's come from the fold, taskStateName).
func stateOfCode(code int) string {
	switch code {
	case 0, 7:
		return statePending
	case 1, 8:
		return stateRunning
	case 2:
		return stateEvicted
	case 3:
		return stateFailed
	case 4:
		return stateFinished
	case 5:
		return stateKilled
	case 6:
		return stateLost
	}
	return ""
}

// taskStateName is the tables' word for a task of the fold: pending;
// running while it holds a machine (placed, started, or restarting in
// place, as the trace's SCHEDULE means); else how it ended.
func taskStateName(t *projections.Task) string {
	switch t.State {
	case projections.TaskPending:
		return statePending
	case projections.TaskScheduled, projections.TaskRunning:
		return stateRunning
	}
	return t.End.String()
}

// jobStatus is the jobs table's status of a job of the fold.
func jobStatus(j *projections.Job) string {
	switch j.End {
	case projections.JobKilledEnd:
		return "killed"
	case projections.JobFinishedEnd:
		return "finished"
	}
	return "running"
}

// bandOf names the priority band of a priority (events.BandOf, Borg §2.5).
func bandOf(priority int32) string { return events.BandOf(priority).String() }

// bandRank orders bands from the most important.
var bandRank = map[string]int{"monitoring": 0, "production": 1, "batch": 2, "best-effort": 3}

// schedulingClass maps a spec to the trace's scheduling class (0-3, 3 the
// most latency-sensitive): from the appclass when set, else from the band.
func schedulingClass(s *events.JobSpec) int32 {
	switch s.GetAppclass() {
	case "latency-sensitive":
		return 3
	case "batch":
		return 0
	}
	switch bandOf(s.GetPriority()) {
	case "monitoring":
		return 3
	case "production":
		return 2
	case "batch":
		return 1
	}
	return 0
}

// row is one row for DuckDB's appender, in the table's column order.
type row = []driver.Value

// touch is the event that last changed an entity in a batch.
type touch struct{ time, position int64 }

// taskTouch is a task's last change in a batch, and the facts of the
// log's task events that only its events say: the trace code of the last
// one, and when it was last submitted (unset: the row keeps what it had).
type taskTouch struct {
	touch
	eventType  int32 // -1: no task event in the batch
	submitTime int64 // 0: not submitted in the batch
}

// jobTouch is a job's last change in a batch; submitPosition is set when
// the batch submitted it.
type jobTouch struct {
	touch
	submitPosition int64
}

// batch collects the rows one transaction appends, table by table, and the
// entities whose current-state row must be replaced.
type batch struct {
	events, jobSpecs, taskEvents, jobEvents, machineEvents, taskUsage, decisions []row

	dirtyJobs     map[projections.JobKey]jobTouch
	dirtyTasks    map[projections.TaskKey]taskTouch
	dirtyMachines map[string]touch
	dirtyAllocs   map[allocKey]touch

	// The current-state rows of the entities touched, as they stand at
	// the end of the batch, and the keys of those the fold no longer
	// holds (a machine removed, a dead job's tasks when its name is used
	// again, an alloc set removed).
	jobs, tasks, machines, allocs                 []row
	goneJobs, goneTasks, goneMachines, goneAllocs []row

	// checkpoint is the fold's checkpoint at the batch's end, when one is
	// due (checkpointEvery).
	checkpoint []byte

	// For the hourly rollup of usage (rollup.go): the positions of the
	// billing periods closed in the batch, and when its last event occurred.
	closes   []int64
	lastTime time.Time

	slab []driver.Value
}

// build folds a batch of events into the model and returns their rows. It
// fails only when an event does not continue the fold's position: the
// model does not match the file, and must be loaded again.
func (m *model) build(evs []events.Event, payloads []string) (*batch, error) {
	b := newBatch()
	for i := range evs {
		if err := m.apply(b, &evs[i], payloads[i]); err != nil {
			return nil, err
		}
		if _, ok := evs[i].Data.(*events.BillingPeriodClosed); ok {
			b.closes = append(b.closes, evs[i].Position)
		}
	}
	if len(evs) > 0 {
		b.lastTime = evs[len(evs)-1].OccurredAt
	}
	for k, at := range b.dirtyJobs {
		if j := m.st.Jobs[k]; j != nil {
			b.jobs = append(b.jobs, jobRow(j, at))
		} else {
			b.goneJobs = append(b.goneJobs, row{k.User, k.Name})
		}
	}
	for k, at := range b.dirtyTasks {
		if t := m.st.Task(k.User, k.Job, k.Index); t != nil {
			b.tasks = append(b.tasks, taskRow(t, at))
		} else {
			b.goneTasks = append(b.goneTasks, row{k.User, k.Job, k.Index})
		}
	}
	for name, at := range b.dirtyMachines {
		if mc := m.st.Machines[name]; mc != nil {
			b.machines = append(b.machines, machineRow(mc, at))
		} else {
			b.goneMachines = append(b.goneMachines, row{name})
		}
	}
	for k, at := range b.dirtyAllocs {
		if a := m.alloc(k); a != nil {
			b.allocs = append(b.allocs, allocRow(a, at))
		} else {
			b.goneAllocs = append(b.goneAllocs, row{k.user, k.set, k.index})
		}
	}
	if m.st.Position-m.checkpointed >= checkpointEvery {
		b.checkpoint, m.checkpointed = projections.Encode(m.st), m.st.Position
	}
	return b, nil
}

// slabValues is how many values a batch allocates at once for its rows.
const slabValues = 1 << 15

// row copies vals into the batch's slab: one allocation for many rows rather
// than one per row, which the garbage collector feels at 100,000 events/s.
func (b *batch) row(vals ...driver.Value) row {
	if len(b.slab)+len(vals) > cap(b.slab) {
		b.slab = make([]driver.Value, 0, max(slabValues, len(vals)))
	}
	n := len(b.slab)
	b.slab = append(b.slab, vals...)
	return b.slab[n : n+len(vals) : n+len(vals)]
}

func newBatch() *batch {
	return &batch{
		dirtyJobs: map[projections.JobKey]jobTouch{}, dirtyTasks: map[projections.TaskKey]taskTouch{},
		dirtyMachines: map[string]touch{}, dirtyAllocs: map[allocKey]touch{},
	}
}

// nz turns an empty string into NULL.
func nz(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nzInt turns 0 into NULL.
func nzInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func labelsValue(m map[string]string) any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[any]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return duckdbMap(out)
}

// apply folds one event into the model and adds its rows to b. payload is
// the event's JSON. An event the fold skips (it names an unknown job or
// task, or is out of place) still gets its rows, with NULLs where the fold
// knows nothing: the log is the truth.
func (m *model) apply(b *batch, e *events.Event, payload string) error {
	us := e.OccurredAt.UnixMicro()
	pos := e.Position
	at := touch{us, pos}
	b.events = append(b.events, b.row(
		pos, e.OccurredAt.UTC(), nullTime(e.RecordedAt), e.Type, e.SchemaVersion, e.Stream, e.StreamVersion,
		nz(e.Actor), nz(e.CausationID), nz(e.CorrelationID), nz(e.IdempotencyKey), payload,
	))
	// What the event changes without naming it, seen before the fold
	// changes it: the tasks a job's end or a machine's removal ends, the
	// tasks of a dead job whose name a submission takes, the allocs of a
	// set removed, the machine a removal forgets.
	removed := m.touchImplied(b, e.Data, at)
	if e.Position != m.st.Position+1 {
		return fmt.Errorf("infrastore: the fold is at position %d, the event at %d", m.st.Position, e.Position)
	}
	if err := projections.Apply(m.st, *e); err != nil {
		return fmt.Errorf("infrastore: folding position %d: %w", pos, err)
	}
	switch e.Data.(type) {
	case *events.MachineRegistered, *events.MachineUpdated, *events.MachineDrainSet, *events.MachineDown,
		*events.MachineUp, *events.MachineRemoved:
		m.machineRows(b, e, removed, at)
	case *events.JobSubmitted, *events.JobUpdated, *events.JobUpdateRolledBack, *events.JobKilled, *events.JobFinished:
		m.jobRows(b, e, at)
	default:
		m.taskRows(b, e, at)
	}
	return nil
}

// machineRows adds the rows of a machine event.
func (m *model) machineRows(b *batch, e *events.Event, removed *projections.Machine, at touch) {
	typ := e.Type
	switch p := e.Data.(type) {
	case *events.MachineRegistered:
		m.machineEvent(b, p.Machine, nil, events.TraceMachineAdd, typ, "", at)
	case *events.MachineUpdated:
		m.machineEvent(b, p.Machine, nil, events.TraceMachineUpdate, typ, "", at)
	case *events.MachineDrainSet:
		m.machineEvent(b, p.Machine, nil, events.TraceMachineUpdate, typ, p.Reason, at)
	case *events.MachineDown:
		// The trace records a machine failure as REMOVE, its return as ADD.
		m.machineEvent(b, p.Machine, nil, events.TraceMachineRemove, typ, p.Reason, at)
	case *events.MachineUp:
		m.machineEvent(b, p.Machine, nil, events.TraceMachineAdd, typ, "", at)
	case *events.MachineRemoved:
		m.machineEvent(b, p.Machine, removed, events.TraceMachineRemove, typ, p.Reason, at)
	}
}

// jobRows adds the rows of a job event.
func (m *model) jobRows(b *batch, e *events.Event, at touch) {
	typ, pos := e.Type, e.Position
	switch p := e.Data.(type) {
	case *events.JobSubmitted:
		k := projections.JobKey{User: p.GetSpec().GetUser(), Name: p.GetSpec().GetName()}
		if m.newSpec(b, k, at) {
			b.dirtyJobs[k] = jobTouch{at, pos}
		}
		m.jobEvent(b, k, events.TraceSubmit, typ, "", at)
	case *events.JobUpdated:
		k := projections.JobKey{User: p.GetSpec().GetUser(), Name: p.GetSpec().GetName()}
		m.newSpec(b, k, at)
		m.jobEvent(b, k, events.TraceUpdatePending, typ, "", at)
	case *events.JobUpdateRolledBack:
		// A rollback is a new version whose spec is an older one's.
		m.newSpec(b, projections.JobKey{User: p.User, Name: p.Job}, at)
	case *events.JobKilled:
		m.jobEvent(b, projections.JobKey{User: p.User, Name: p.Job}, events.TraceKill, typ, p.Reason, at)
	case *events.JobFinished:
		m.jobEvent(b, projections.JobKey{User: p.User, Name: p.Job}, events.TraceFinish, typ, "", at)
	}
}

// taskRows adds the rows of a task, usage or alloc event.
func (m *model) taskRows(b *batch, e *events.Event, at touch) {
	typ, us, pos := e.Type, e.OccurredAt.UnixMicro(), e.Position
	switch p := e.Data.(type) {
	case *events.TaskSubmitted:
		k := projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}
		m.taskEvent(b, k, events.TraceSubmit, "", typ, p.Reason, nil, "", at)
		if tt, ok := b.dirtyTasks[k]; ok {
			tt.submitTime = us
			b.dirtyTasks[k] = tt
		}
	case *events.TaskScheduled:
		k := projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}
		t := m.taskEvent(b, k, events.TraceSchedule, p.Machine, typ, "", nil, "", at)
		version := p.SpecVersion
		if t != nil {
			version = t.SpecVersion
		}
		preempted := make([]string, len(p.Preempted))
		for i, r := range p.Preempted {
			preempted[i] = projections.TaskKey{User: r.GetUser(), Job: r.GetJob(), Index: r.GetIndex()}.String()
		}
		b.decisions = append(b.decisions, b.row(
			us, pos, p.User, p.Job, p.Index, nz(p.Machine), version, p.Score,
			p.MachinesExamined, int32(len(p.Preempted)), preempted, p.AllocIndex, p.MachineVersion,
		))
	case *events.TaskStarted:
		m.touchTask(b, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, at)
	case *events.TaskHealthChanged:
		m.touchTask(b, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, at)
	case *events.TaskEvicted:
		m.taskEvent(b, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, events.TraceEvict, p.Machine, typ, p.Reason, nil, p.Message, at)
	case *events.TaskFailed:
		m.taskEvent(b, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, events.TraceFail, p.Machine, typ, p.Signal, p.ExitCode, p.Message, at)
	case *events.TaskFinished:
		m.taskEvent(b, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, events.TraceFinish, p.Machine, typ, "", p.ExitCode, "", at)
	case *events.TaskKilled:
		m.taskEvent(b, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, events.TraceKill, p.Machine, typ, p.Reason, nil, "", at)
	case *events.TaskLost:
		m.taskEvent(b, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, events.TraceLost, p.Machine, typ, p.Reason, nil, "", at)
	case *events.TaskUpdated:
		m.taskEvent(b, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, events.TraceCodeOf(p), "", typ, "", nil, "", at)
	case *events.UsageReported:
		for _, u := range p.Tasks {
			m.usage(b, p, u, pos)
		}
	case *events.ReservationEstimated:
		for _, r := range p.Tasks {
			m.touchTask(b, projections.TaskKey{User: r.User, Job: r.Job, Index: r.Index}, at)
		}

	case *events.AllocSetCreated:
		if set := m.st.AllocSets[projections.JobKey{User: p.User, Name: p.Name}]; set != nil {
			for _, a := range set.Allocs {
				b.dirtyAllocs[allocKey{p.User, p.Name, a.Index}] = at
			}
		}
	case *events.AllocScheduled:
		b.dirtyAllocs[allocKey{p.User, p.Name, p.Index}] = at
	case *events.AllocEvicted:
		b.dirtyAllocs[allocKey{p.User, p.Name, p.Index}] = at
	}
}

// touchImplied marks what e changes without naming it, as the fold holds it
// before e; for a MachineRemoved it returns the machine, which the fold
// then forgets.
func (m *model) touchImplied(b *batch, d events.Payload, at touch) *projections.Machine {
	st := m.st
	switch p := d.(type) {
	case *events.JobSubmitted:
		// A name used again: the dead job's tasks leave with it.
		if j := st.Jobs[projections.JobKey{User: p.GetSpec().GetUser(), Name: p.GetSpec().GetName()}]; j != nil && j.Dead() {
			for _, t := range j.Tasks {
				if t != nil {
					m.touchTask(b, t.Key(), at)
				}
			}
		}
	case *events.JobKilled:
		m.touchLiveTasks(b, st.Jobs[projections.JobKey{User: p.User, Name: p.Job}], at)
	case *events.JobFinished:
		m.touchLiveTasks(b, st.Jobs[projections.JobKey{User: p.User, Name: p.Job}], at)
	case *events.MachineRemoved:
		mc := st.Machines[p.Machine]
		if mc == nil {
			return nil
		}
		mc.RangeTasks(func(t *projections.Task) bool {
			m.touchTask(b, t.Key(), at)
			return true
		})
		for _, a := range mc.Allocs() {
			b.dirtyAllocs[allocKey{a.Set.User, a.Set.Name, a.Index}] = at
		}
		return mc
	case *events.AllocSetRemoved:
		if set := st.AllocSets[projections.JobKey{User: p.User, Name: p.Name}]; set != nil {
			for _, a := range set.Allocs {
				b.dirtyAllocs[allocKey{p.User, p.Name, a.Index}] = at
				m.touchAllocTasks(b, a, at)
			}
		}
	case *events.AllocEvicted:
		if a := m.alloc(allocKey{p.User, p.Name, p.Index}); a != nil {
			m.touchAllocTasks(b, a, at)
		}
	case *events.TaskSubmitted, *events.TaskFinished, *events.TaskFailed, *events.TaskEvicted,
		*events.TaskKilled, *events.TaskLost, *events.TaskUpdated:
		// A task leaving an alloc, or changing its limit there, changes
		// what the alloc has in use.
		if k, ok := taskOf(d); ok {
			if t := st.Task(k.User, k.Job, k.Index); t != nil {
				m.touchAllocOf(b, t, at)
			}
		}
	}
	return nil
}

// taskOf names the task a task event is about.
func taskOf(d events.Payload) (projections.TaskKey, bool) {
	switch d.(type) {
	case *events.TaskSubmitted, *events.TaskFinished, *events.TaskFailed, *events.TaskEvicted,
		*events.TaskKilled, *events.TaskLost, *events.TaskUpdated:
		p := d.(interface {
			GetUser() string
			GetJob() string
			GetIndex() int32
		})
		return projections.TaskKey{User: p.GetUser(), Job: p.GetJob(), Index: p.GetIndex()}, true
	}
	return projections.TaskKey{}, false
}

func (m *model) touchLiveTasks(b *batch, j *projections.Job, at touch) {
	if j == nil || j.Dead() {
		return
	}
	for _, t := range j.Tasks {
		if t != nil && t.State != projections.TaskDead {
			m.touchTask(b, t.Key(), at)
		}
	}
}

// touchAllocTasks marks the tasks running in alloc a.
func (m *model) touchAllocTasks(b *batch, a *projections.Alloc, at touch) {
	mc := m.st.Machines[a.Machine]
	if mc == nil {
		return
	}
	mc.RangeTasks(func(t *projections.Task) bool {
		if t.AllocIndex == a.Index && t.Job.User == a.Set.User && t.Spec().GetAllocSet() == a.Set.Name {
			m.touchTask(b, t.Key(), at)
		}
		return true
	})
}

// touchAllocOf marks the alloc t runs in, if it runs in one.
func (m *model) touchAllocOf(b *batch, t *projections.Task, at touch) {
	if t.Live() && t.AllocIndex >= 0 {
		if set := t.Spec().GetAllocSet(); set != "" {
			b.dirtyAllocs[allocKey{t.Job.User, set, t.AllocIndex}] = at
		}
	}
}

func (m *model) alloc(k allocKey) *projections.Alloc {
	set := m.st.AllocSets[projections.JobKey{User: k.user, Name: k.set}]
	if set == nil || k.index < 0 || int(k.index) >= len(set.Allocs) {
		return nil
	}
	return set.Allocs[k.index]
}

// touchTask marks a task changed by the event at, keeping the batch's
// facts of its task events.
func (m *model) touchTask(b *batch, k projections.TaskKey, at touch) {
	tt, ok := b.dirtyTasks[k]
	if !ok {
		tt.eventType = -1
	}
	tt.touch = at
	b.dirtyTasks[k] = tt
}

// machineEvent adds the machine_events row of a machine event: the
// machine's whole state after it, as the fold holds it. removed is the
// machine a MachineRemoved made the fold forget.
func (m *model) machineEvent(b *batch, name string, removed *projections.Machine, code events.MachineTraceCode, typ, reason string, at touch) {
	b.dirtyMachines[name] = at
	mc, state := m.st.Machines[name], any(nil)
	switch {
	case mc != nil:
		state = mc.State.String()
	case removed != nil:
		mc, state = removed, "removed"
	}
	if mc == nil {
		// A machine the fold never registered.
		b.machineEvents = append(b.machineEvents, b.row(
			at.time, name, int32(code), nil, nil, nil, SourceLog, at.position, typ,
			nil, nil, nil, nil, nil, nil, nil, nil, nil, nz(reason),
		))
		return
	}
	c := mc.Capacity
	b.machineEvents = append(b.machineEvents, b.row(
		at.time, name, int32(code), nil, float64(c.CPUMilli)/1000, float64(c.MemoryBytes),
		SourceLog, at.position, typ, nz(mc.Address), c.CPUMilli, c.MemoryBytes, c.DiskBytes,
		int32(c.Ports), c.GPUMilli, labelsValue(mc.Attributes), state, mc.Draining, nz(reason),
	))
}

// newSpec adds the job_specs row of the version a job event put in force,
// if the fold took it, and reports whether it did.
func (m *model) newSpec(b *batch, k projections.JobKey, at touch) bool {
	j := m.st.Jobs[k]
	if j == nil || j.ChangedPos != at.position {
		return false
	}
	b.dirtyJobs[k] = jobTouch{touch: at, submitPosition: b.dirtyJobs[k].submitPosition}
	spec, version := j.Spec(), j.Current
	m.specPositions[specKey{k.User, k.Name, version}] = at.position
	r := spec.GetResources()
	b.jobSpecs = append(b.jobSpecs, b.row(
		at.position, at.time, k.User, k.Name, version, spec.GetPriority(), bandOf(spec.GetPriority()), schedulingClass(spec),
		spec.GetTaskCount(), r.GetCpuMilli(), r.GetMemoryBytes(), r.GetDiskBytes(), r.GetPorts(), r.GetGpuMilli(),
		labelsValue(spec.GetLabels()), nz(spec.GetAppclass()), nz(spec.GetCommand()), specJSON(spec),
	))
	return true
}

func (m *model) jobEvent(b *batch, k projections.JobKey, code events.TraceCode, typ, reason string, at touch) {
	var class, priority, count, version any
	if j := m.st.Jobs[k]; j != nil {
		if jt, ok := b.dirtyJobs[k]; ok {
			jt.touch = at
			b.dirtyJobs[k] = jt
		} else {
			b.dirtyJobs[k] = jobTouch{touch: at}
		}
		version = j.Current
		if s := j.Spec(); s != nil {
			class, priority, count = schedulingClass(s), s.GetPriority(), s.GetTaskCount()
		}
	}
	b.jobEvents = append(b.jobEvents, b.row(
		at.time, nil, k.Name, int32(code), k.User, class, k.Name, k.Name,
		SourceLog, at.position, typ, version, priority, count, nz(reason),
	))
}

// taskEvent adds the task_events row of a task event, with the task as the
// fold holds it after the event, and returns the task (nil when the fold
// does not hold it). machine is the one the event names, else where the
// task is placed or last ran.
func (m *model) taskEvent(b *batch, k projections.TaskKey, code events.TraceCode, machine, typ, reason string, exitCode any, message string, at touch) *projections.Task {
	t := m.st.Task(k.User, k.Job, k.Index)
	var class, priority, cpu, mem, disk, state, version any
	if t != nil {
		m.touchTask(b, k, at)
		tt := b.dirtyTasks[k]
		tt.eventType = int32(code)
		b.dirtyTasks[k] = tt
		m.touchAllocOf(b, t, at)
		if machine == "" && t.State != projections.TaskPending {
			machine = t.Machine
		}
		if s := t.Spec(); s != nil {
			class, priority = schedulingClass(s), s.GetPriority()
		}
		l := t.Limit
		cpu, mem, disk = float64(l.CPUMilli)/1000, float64(l.MemoryBytes), float64(l.DiskBytes)
		state, version = taskStateName(t), t.SpecVersion
	}
	// In the order of queryAppends["task_events"].
	b.taskEvents = append(b.taskEvents, b.row(
		at.time, k.Job, k.Index, nz(machine), int32(code), k.User, class, priority, cpu, mem, disk,
		at.position, typ, state, version, nz(reason), exitCode, nz(message),
	))
	return t
}

// usageTerms are what a task's usage window is billed against: the spec
// version it runs (and its job_specs row), its limit and its reservation,
// as the fold holds them.
func (m *model) usageTerms(k projections.TaskKey) (version int64, limit, res *events.Resources, priority, specPos any) {
	t := m.st.Task(k.User, k.Job, k.Index)
	if t == nil {
		return 0, nil, nil, nil, nil
	}
	version = t.SpecVersion
	if spec := t.Spec(); spec != nil {
		limit, res, priority = t.Limit.Proto(), t.Reservation.Proto(), spec.GetPriority()
		if p, ok := m.specPositions[specKey{k.User, k.Job, version}]; ok {
			specPos = p
		}
	}
	return version, limit, res, priority, specPos
}

// Divisors that turn (milli-cores × µs) into core-hours and (bytes × µs)
// into GiB-hours.
const (
	milliCoreMicrosPerCoreHour = 1000 * 3_600_000_000
	byteMicrosPerGiBHour       = (1 << 30) * 3_600_000_000
)

func (m *model) usage(b *batch, p *events.UsageReported, u *events.TaskUsage, pos int64) {
	// The task's terms as the fold holds them: usage changes none of them.
	specVersion, limit, res, priority, specPos := m.usageTerms(projections.TaskKey{User: u.User, Job: u.Job, Index: u.Index})
	// A float comes in, so rounding once here is as exact as the input
	// allows; from here on the stored decimal is the figure that is summed.
	cpuUsage := int64(0)
	if f := u.CpuCoreSeconds*1e9/3600 + 0.5; f >= maxDecimal18 {
		cpuUsage = maxDecimal18
	} else if f >= 1 {
		cpuUsage = int64(f)
	}
	// A task is billed for its own interval: the part of the machine's
	// window its run held resources in. Events written before tasks
	// carried one bill the whole window, as they always did.
	start, end := p.WindowStartUs, p.WindowEndUs
	if u.EndUs > 0 {
		start, end = u.StartUs, u.EndUs
	}
	// In the order of queryAppends["task_usage"], which derives the band
	// and the byte-seconds.
	dur := max(end-start, 0)
	b.taskUsage = append(b.taskUsage, b.row(
		start, end, u.Job, u.Index, nz(p.Machine), u.User, pos, specVersion, specPos, priority,
		u.CpuCoreSeconds, u.MemoryBytes, u.MemoryMaxBytes, u.DiskBytes,
		limit.GetCpuMilli(), limit.GetMemoryBytes(), limit.GetDiskBytes(),
		res.GetCpuMilli(), res.GetMemoryBytes(), res.GetDiskBytes(),
		scaledRatio(limit.GetCpuMilli(), dur, milliCoreMicrosPerCoreHour),
		scaledRatio(res.GetCpuMilli(), dur, milliCoreMicrosPerCoreHour),
		cpuUsage,
		scaledRatio(limit.GetMemoryBytes(), dur, byteMicrosPerGiBHour),
		scaledRatio(res.GetMemoryBytes(), dur, byteMicrosPerGiBHour),
		scaledRatio(u.MemoryBytes, dur, byteMicrosPerGiBHour),
		scaledRatio(u.DiskBytes, dur, byteMicrosPerGiBHour),
		limit.GetGpuMilli(),
		scaledRatio(limit.GetGpuMilli(), dur, milliCoreMicrosPerCoreHour),
	))
}
