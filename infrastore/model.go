package infrastore

import (
	"database/sql/driver"
	"strconv"
	"time"

	"github.com/corralhq/corral/events"
)

// model is what the ingester must remember between events to fill the
// derived rows: job specs (for the limits a task runs with), tasks (machine,
// spec version, reservation) and machines (their whole state, carried on
// every machine_events row). It is pure: apply turns one event into rows,
// with no I/O and no clock. It is loaded from the jobs, job_specs, tasks and
// machines tables, which are written in the same transaction as the position,
// so a reloaded model always matches the stored position.
type model struct {
	jobs     map[jobKey]*jobState
	tasks    map[taskKey]*taskState
	machines map[string]*machineState
}

type jobKey struct{ user, job string }

type taskKey struct {
	user, job string
	index     int32
}

type jobSpec struct {
	spec     *events.JobSpec
	position int64 // of the job_specs row
}

type jobState struct {
	// since is the position of the JobSubmitted that started this job: a
	// name may be used again once its job has ended.
	since      int64
	versions   map[int64]jobSpec
	version    int64
	status     string // running, killed, finished
	submitTime int64
	endTime    int64 // 0 while the job runs
	time       int64
	position   int64
}

func (j *jobState) current() (jobSpec, bool) {
	s, ok := j.versions[j.version]
	return s, ok
}

type taskState struct {
	state       string
	machine     string
	specVersion int64
	// reservation is the master's last estimate since the task was placed
	// or its spec changed; nil means the reservation is the limit (Borg
	// starts a reservation at the limit and lets it decay).
	reservation *events.Resources
	// spec is the job spec the task ran under when last touched: its row,
	// written at the end of the batch, must not take the spec of a job of
	// the same name submitted later in the batch.
	spec       *events.JobSpec
	restarts   int32
	pid        int64
	eventType  int32
	submitTime int64
	startTime  int64
	time       int64
	position   int64
}

type machineState struct {
	address    string
	capacity   *events.Resources
	attributes map[string]string
	state      string // up, down, removed
	draining   bool
	time       int64
	position   int64
}

func newModel() *model {
	return &model{
		jobs:     map[jobKey]*jobState{},
		tasks:    map[taskKey]*taskState{},
		machines: map[string]*machineState{},
	}
}

// Task states, the same for rows from the log and from the trace. A task is
// "in force" (tasks_at) while pending or running.
const (
	statePending  = "pending"
	stateRunning  = "running"
	stateEvicted  = "evicted"
	stateFailed   = "failed"
	stateFinished = "finished"
	stateKilled   = "killed"
	stateLost     = "lost"
)

// stateOfCode is the task state after a trace event code.
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

// limitOf is what a task of spec asks for: the job's resources, or its
// index's override when that sets resources.
func limitOf(s *events.JobSpec, index int32) *events.Resources {
	if o, ok := s.GetOverrides()[index]; ok && o.GetResources() != nil {
		return o.GetResources()
	}
	return s.GetResources()
}

// row is one row for DuckDB's appender, in the table's column order.
type row = []driver.Value

// batch collects the rows one transaction appends, table by table, and the
// entities whose current-state row must be replaced.
type batch struct {
	events, jobSpecs, taskEvents, jobEvents, machineEvents, taskUsage, decisions []row

	dirtyJobs     map[jobKey]bool
	dirtyTasks    map[taskKey]bool
	dirtyMachines map[string]bool

	// The current-state rows of the entities touched, as they stand at
	// the end of the batch.
	jobs, tasks, machines []row

	// For the hourly rollup of usage (rollup.go): the positions of the
	// billing periods closed in the batch, and when its last event occurred.
	closes   []int64
	lastTime time.Time

	slab []driver.Value
}

// build folds a batch of events into the model and returns their rows.
func (m *model) build(evs []events.Event, payloads []string) *batch {
	b := newBatch()
	for i := range evs {
		m.apply(b, &evs[i], payloads[i])
		if _, ok := evs[i].Data.(*events.BillingPeriodClosed); ok {
			b.closes = append(b.closes, evs[i].Position)
		}
	}
	if len(evs) > 0 {
		b.lastTime = evs[len(evs)-1].OccurredAt
	}
	for k := range b.dirtyJobs {
		b.jobs = append(b.jobs, m.jobRow(k))
	}
	for k := range b.dirtyTasks {
		b.tasks = append(b.tasks, m.taskRow(k))
	}
	for k := range b.dirtyMachines {
		b.machines = append(b.machines, m.machineRow(k))
	}
	return b
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
	return &batch{dirtyJobs: map[jobKey]bool{}, dirtyTasks: map[taskKey]bool{}, dirtyMachines: map[string]bool{}}
}

// nz turns an empty string into NULL.
func nz(s string) any {
	if s == "" {
		return nil
	}
	return s
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
// the event's JSON. It never fails: the log is the truth, so an event that
// names an unknown job or task still gets its rows, with NULLs where the
// model knows nothing.
func (m *model) apply(b *batch, e *events.Event, payload string) {
	us := e.OccurredAt.UnixMicro()
	pos := e.Position
	b.events = append(b.events, b.row(
		pos, e.OccurredAt.UTC(), nullTime(e.RecordedAt), e.Type, e.SchemaVersion, e.Stream, e.StreamVersion,
		nz(e.Actor), nz(e.CausationID), nz(e.CorrelationID), nz(e.IdempotencyKey), payload,
	))
	typ := e.Type
	switch p := e.Data.(type) {
	case *events.MachineRegistered:
		ms := &machineState{address: p.Address, capacity: p.Capacity, attributes: p.Attributes, state: "up"}
		m.machines[p.Machine] = ms
		m.machineEvent(b, p.Machine, ms, events.TraceMachineAdd, typ, "", us, pos)
	case *events.MachineUpdated:
		ms := m.machine(p.Machine)
		ms.address, ms.capacity, ms.attributes = p.Address, p.Capacity, p.Attributes
		m.machineEvent(b, p.Machine, ms, events.TraceMachineUpdate, typ, "", us, pos)
	case *events.MachineDrainSet:
		ms := m.machine(p.Machine)
		ms.draining = p.Draining
		m.machineEvent(b, p.Machine, ms, events.TraceMachineUpdate, typ, p.Reason, us, pos)
	case *events.MachineDown:
		ms := m.machine(p.Machine)
		ms.state = "down"
		// The trace records a machine failure as REMOVE, its return as ADD.
		m.machineEvent(b, p.Machine, ms, events.TraceMachineRemove, typ, p.Reason, us, pos)
	case *events.MachineUp:
		ms := m.machine(p.Machine)
		ms.state = "up"
		m.machineEvent(b, p.Machine, ms, events.TraceMachineAdd, typ, "", us, pos)
	case *events.MachineRemoved:
		ms := m.machine(p.Machine)
		ms.state = "removed"
		m.machineEvent(b, p.Machine, ms, events.TraceMachineRemove, typ, p.Reason, us, pos)

	case *events.JobSubmitted:
		k := jobKey{p.GetSpec().GetUser(), p.GetSpec().GetName()}
		// A name used again after its job ended starts a new job.
		js := &jobState{since: pos, versions: map[int64]jobSpec{}, status: "running", submitTime: us}
		m.jobs[k] = js
		m.newSpec(b, k, js, p.SpecVersion, p.Spec, us, pos)
		m.jobEvent(b, k, js, events.TraceSubmit, typ, "", us, pos)
	case *events.JobUpdated:
		k := jobKey{p.GetSpec().GetUser(), p.GetSpec().GetName()}
		js := m.job(k, us)
		m.newSpec(b, k, js, p.SpecVersion, p.Spec, us, pos)
		m.jobEvent(b, k, js, events.TraceUpdatePending, typ, "", us, pos)
	case *events.JobUpdateRolledBack:
		k := jobKey{p.User, p.Job}
		js := m.job(k, us)
		// A rollback is a new version whose spec is an older one's.
		var spec *events.JobSpec
		if old, ok := js.versions[p.ToVersion]; ok {
			spec = old.spec
		}
		m.newSpec(b, k, js, p.SpecVersion, spec, us, pos)
	case *events.JobKilled:
		k := jobKey{p.User, p.Job}
		js := m.job(k, us)
		js.status, js.endTime = "killed", us
		m.jobEvent(b, k, js, events.TraceKill, typ, p.Reason, us, pos)
	case *events.JobFinished:
		k := jobKey{p.User, p.Job}
		js := m.job(k, us)
		js.status, js.endTime = "finished", us
		m.jobEvent(b, k, js, events.TraceFinish, typ, "", us, pos)

	case *events.TaskSubmitted:
		k := taskKey{p.User, p.Job, p.Index}
		ts := m.task(k)
		ts.state, ts.machine, ts.submitTime = statePending, "", us
		m.setVersion(k, ts, p.SpecVersion)
		m.taskEvent(b, k, ts, events.TraceSubmit, "", typ, p.Reason, nil, "", us, pos)
	case *events.TaskScheduled:
		k := taskKey{p.User, p.Job, p.Index}
		ts := m.task(k)
		ts.state, ts.machine, ts.reservation = stateRunning, p.Machine, nil
		m.setVersion(k, ts, p.SpecVersion)
		m.taskEvent(b, k, ts, events.TraceSchedule, p.Machine, typ, "", nil, "", us, pos)
		preempted := make([]string, len(p.Preempted))
		for i, r := range p.Preempted {
			preempted[i] = r.GetUser() + "/" + r.GetJob() + "/" + strconv.Itoa(int(r.GetIndex()))
		}
		b.decisions = append(b.decisions, b.row(
			us, pos, p.User, p.Job, p.Index, nz(p.Machine), ts.specVersion, p.Score,
			p.MachinesExamined, int32(len(p.Preempted)), preempted, p.AllocIndex, p.MachineVersion,
		))
	case *events.TaskStarted:
		k := taskKey{p.User, p.Job, p.Index}
		ts := m.task(k)
		ts.state, ts.restarts, ts.pid, ts.startTime = stateRunning, p.Restarts, p.Pid, us
		if p.Machine != "" {
			ts.machine = p.Machine
		}
		m.touchTask(b, k, ts, us, pos)
	case *events.TaskEvicted:
		k := taskKey{p.User, p.Job, p.Index}
		ts := m.task(k)
		machine := firstNonEmpty(p.Machine, ts.machine)
		ts.state, ts.machine = stateEvicted, ""
		m.taskEvent(b, k, ts, events.TraceEvict, machine, typ, p.Reason, nil, p.Message, us, pos)
	case *events.TaskFailed:
		k := taskKey{p.User, p.Job, p.Index}
		ts := m.task(k)
		machine := firstNonEmpty(p.Machine, ts.machine)
		ts.restarts = p.Restarts
		if p.WillRestart {
			// The agent restarts it in place: it keeps its machine.
			ts.state, ts.machine = stateRunning, machine
		} else {
			ts.state, ts.machine = stateFailed, ""
		}
		m.taskEvent(b, k, ts, events.TraceFail, machine, typ, p.Signal, p.ExitCode, p.Message, us, pos)
	case *events.TaskFinished:
		k := taskKey{p.User, p.Job, p.Index}
		ts := m.task(k)
		machine := firstNonEmpty(p.Machine, ts.machine)
		ts.state, ts.machine = stateFinished, ""
		m.taskEvent(b, k, ts, events.TraceFinish, machine, typ, "", p.ExitCode, "", us, pos)
	case *events.TaskKilled:
		k := taskKey{p.User, p.Job, p.Index}
		ts := m.task(k)
		machine := firstNonEmpty(p.Machine, ts.machine)
		ts.state, ts.machine = stateKilled, ""
		m.taskEvent(b, k, ts, events.TraceKill, machine, typ, p.Reason, nil, "", us, pos)
	case *events.TaskLost:
		k := taskKey{p.User, p.Job, p.Index}
		ts := m.task(k)
		machine := firstNonEmpty(p.Machine, ts.machine)
		ts.state, ts.machine = stateLost, ""
		m.taskEvent(b, k, ts, events.TraceLost, machine, typ, p.Reason, nil, "", us, pos)
	case *events.TaskUpdated:
		k := taskKey{p.User, p.Job, p.Index}
		ts := m.task(k)
		m.setVersion(k, ts, p.SpecVersion)
		code := events.TraceCodeOf(p)
		// An update changes what a task runs, not where it is: a placed
		// task stays placed (logs before the command said so of tasks
		// placed but not yet started called them pending).
		if ts.state != stateRunning {
			ts.state = stateOfCode(int(code))
			if ts.state == statePending {
				ts.machine = ""
			}
		}
		m.taskEvent(b, k, ts, code, ts.machine, typ, "", nil, "", us, pos)

	case *events.UsageReported:
		for _, u := range p.Tasks {
			m.usage(b, p, u, pos)
		}
	case *events.ReservationEstimated:
		for _, r := range p.Tasks {
			k := taskKey{r.User, r.Job, r.Index}
			ts := m.task(k)
			ts.reservation = r.Reservation
			m.touchTask(b, k, ts, us, pos)
		}
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (m *model) machine(name string) *machineState {
	ms, ok := m.machines[name]
	if !ok {
		ms = &machineState{state: "up"}
		m.machines[name] = ms
	}
	return ms
}

func (m *model) machineEvent(b *batch, name string, ms *machineState, code events.MachineTraceCode, typ, reason string, us, pos int64) {
	ms.time, ms.position = us, pos
	b.dirtyMachines[name] = true
	c := ms.capacity
	b.machineEvents = append(b.machineEvents, b.row(
		us, name, int32(code), nil, float64(c.GetCpuMilli())/1000, float64(c.GetMemoryBytes()),
		SourceLog, pos, typ, nz(ms.address), c.GetCpuMilli(), c.GetMemoryBytes(), c.GetDiskBytes(),
		c.GetPorts(), c.GetGpuMilli(), labelsValue(ms.attributes), ms.state, ms.draining, nz(reason),
	))
}

// job returns the job's state, creating an empty one for a job whose
// submission the model never saw.
func (m *model) job(k jobKey, us int64) *jobState {
	js, ok := m.jobs[k]
	if !ok {
		js = &jobState{versions: map[int64]jobSpec{}, status: "running", submitTime: us}
		m.jobs[k] = js
	}
	return js
}

func (m *model) newSpec(b *batch, k jobKey, js *jobState, version int64, spec *events.JobSpec, us, pos int64) {
	if spec == nil {
		spec = &events.JobSpec{User: k.user, Name: k.job}
	}
	js.versions[version] = jobSpec{spec: spec, position: pos}
	js.version, js.time, js.position = version, us, pos
	b.dirtyJobs[k] = true
	r := spec.GetResources()
	b.jobSpecs = append(b.jobSpecs, b.row(
		pos, us, k.user, k.job, version, spec.GetPriority(), bandOf(spec.GetPriority()), schedulingClass(spec),
		spec.GetTaskCount(), r.GetCpuMilli(), r.GetMemoryBytes(), r.GetDiskBytes(), r.GetPorts(), r.GetGpuMilli(),
		labelsValue(spec.GetLabels()), nz(spec.GetAppclass()), nz(spec.GetCommand()), specJSON(spec),
	))
}

func (m *model) jobEvent(b *batch, k jobKey, js *jobState, code events.TraceCode, typ, reason string, us, pos int64) {
	js.time, js.position = us, pos
	b.dirtyJobs[k] = true
	var class, priority, count any
	if s, ok := js.current(); ok {
		class, priority, count = schedulingClass(s.spec), s.spec.GetPriority(), s.spec.GetTaskCount()
	}
	b.jobEvents = append(b.jobEvents, b.row(
		us, nil, k.job, int32(code), k.user, class, k.job, k.job,
		SourceLog, pos, typ, js.version, priority, count, nz(reason),
	))
}

func (m *model) task(k taskKey) *taskState {
	ts, ok := m.tasks[k]
	if !ok {
		ts = &taskState{eventType: -1}
		if js, ok := m.jobs[jobKey{k.user, k.job}]; ok {
			ts.specVersion = js.version
		}
		m.tasks[k] = ts
	}
	return ts
}

// setVersion moves a task to a spec version (0 in an event: unchanged). A new
// version resets the reservation: the limit it decays from has changed.
func (m *model) setVersion(k taskKey, ts *taskState, v int64) {
	if v != 0 && v != ts.specVersion {
		ts.specVersion, ts.reservation = v, nil
	}
	if ts.specVersion == 0 {
		if js, ok := m.jobs[jobKey{k.user, k.job}]; ok {
			ts.specVersion = js.version
		}
	}
}

// specOf returns the spec version a task runs, if the model knows it.
func (m *model) specOf(k taskKey, ts *taskState) (jobSpec, bool) {
	js, ok := m.jobs[jobKey{k.user, k.job}]
	if !ok {
		return jobSpec{}, false
	}
	if s, ok := js.versions[ts.specVersion]; ok {
		return s, true
	}
	return js.current()
}

func (m *model) touchTask(b *batch, k taskKey, ts *taskState, us, pos int64) {
	ts.time, ts.position = us, pos
	ts.spec = nil
	if s, ok := m.specOf(k, ts); ok {
		ts.spec = s.spec
	}
	b.dirtyTasks[k] = true
}

func (m *model) taskEvent(b *batch, k taskKey, ts *taskState, code events.TraceCode, machine, typ, reason string, exitCode any, message string, us, pos int64) {
	ts.eventType = int32(code)
	m.touchTask(b, k, ts, us, pos)
	var class, priority, cpu, mem, disk any
	if s, ok := m.specOf(k, ts); ok {
		l := limitOf(s.spec, k.index)
		class, priority = schedulingClass(s.spec), s.spec.GetPriority()
		cpu, mem, disk = float64(l.GetCpuMilli())/1000, float64(l.GetMemoryBytes()), float64(l.GetDiskBytes())
	}
	// In the order of queryAppends["task_events"].
	b.taskEvents = append(b.taskEvents, b.row(
		us, k.job, k.index, nz(machine), int32(code), k.user, class, priority, cpu, mem, disk,
		pos, typ, ts.state, ts.specVersion, nz(reason), exitCode, nz(message),
	))
}

// Divisors that turn (milli-cores × µs) into core-hours and (bytes × µs)
// into GiB-hours.
const (
	milliCoreMicrosPerCoreHour = 1000 * 3_600_000_000
	byteMicrosPerGiBHour       = (1 << 30) * 3_600_000_000
)

func (m *model) usage(b *batch, p *events.UsageReported, u *events.TaskUsage, pos int64) {
	k := taskKey{u.User, u.Job, u.Index}
	// Look up without creating: usage changes no state, and a task created
	// here would not be stored with the batch.
	ts, ok := m.tasks[k]
	if !ok {
		ts = &taskState{}
	}
	var limit *events.Resources
	var priority, specPos any
	if s, ok := m.specOf(k, ts); ok {
		limit = limitOf(s.spec, k.index)
		priority, specPos = s.spec.GetPriority(), s.position
	}
	res := limit
	if ts.reservation != nil {
		res = ts.reservation
	}
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
		start, end, u.Job, u.Index, nz(p.Machine), u.User, pos, ts.specVersion, specPos, priority,
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

// Rows of the current-state tables, written for each entity a batch touched.

func (m *model) jobRow(k jobKey) row {
	js := m.jobs[k]
	var priority, band, class, count, cpu, mem, disk, labels any
	if s, ok := js.current(); ok {
		r := s.spec.GetResources()
		priority, band, class = s.spec.GetPriority(), bandOf(s.spec.GetPriority()), schedulingClass(s.spec)
		count, cpu, mem, disk = s.spec.GetTaskCount(), r.GetCpuMilli(), r.GetMemoryBytes(), r.GetDiskBytes()
		labels = labelsValue(s.spec.GetLabels())
	}
	var end any
	if js.endTime != 0 {
		end = js.endTime
	}
	return row{
		k.user, k.job, js.version, priority, band, class, count, cpu, mem, disk, labels,
		js.status, js.submitTime, end, js.since, js.time, js.position,
	}
}

func (m *model) taskRow(k taskKey) row {
	ts := m.tasks[k]
	var priority, band, lc, lm, ld, rc, rm, rd any
	if spec := ts.spec; spec != nil {
		l := limitOf(spec, k.index)
		priority, band = spec.GetPriority(), bandOf(spec.GetPriority())
		lc, lm, ld = l.GetCpuMilli(), l.GetMemoryBytes(), l.GetDiskBytes()
		rc, rm, rd = lc, lm, ld
	}
	if r := ts.reservation; r != nil {
		rc, rm, rd = r.GetCpuMilli(), r.GetMemoryBytes(), r.GetDiskBytes()
	}
	var eventType, submit, start any
	if ts.eventType >= 0 {
		eventType = ts.eventType
	}
	if ts.submitTime != 0 {
		submit = ts.submitTime
	}
	if ts.startTime != 0 {
		start = ts.startTime
	}
	return row{
		k.user, k.job, k.index, nz(ts.state), nz(ts.machine), ts.specVersion, priority, band,
		lc, lm, ld, rc, rm, rd, ts.reservation != nil, ts.restarts, ts.pid, eventType, submit, start,
		ts.time, ts.position,
	}
}

func (m *model) machineRow(name string) row {
	ms := m.machines[name]
	c := ms.capacity
	return row{
		name, nz(ms.address), c.GetCpuMilli(), c.GetMemoryBytes(), c.GetDiskBytes(), c.GetPorts(), c.GetGpuMilli(),
		labelsValue(ms.attributes), ms.state, ms.draining, ms.time, ms.position,
	}
}
