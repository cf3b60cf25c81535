package projections

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/events"
)

// JobKey names a job: job names are unique per user.
type JobKey struct{ User, Name string }

func (k JobKey) String() string { return k.User + "/" + k.Name }

// TaskKey names one task of one job.
type TaskKey struct {
	User, Job string
	Index     int32
}

func (k TaskKey) String() string { return k.User + "/" + k.Job + "/" + strconv.Itoa(int(k.Index)) }

// UserBand keys quotas and their use.
type UserBand struct {
	User string
	Band Band
}

// MachineState says whether the master hears from a machine's agent.
type MachineState int8

const (
	MachineUp MachineState = iota
	MachineDown
)

func (s MachineState) String() string {
	if s == MachineDown {
		return "down"
	}
	return "up"
}

// TaskState is the task's place in DESIGN.md's lifecycle.
type TaskState int8

const (
	TaskPending   TaskState = iota // waiting for a machine
	TaskScheduled                  // placed; holds resources, not (yet, or again) running
	TaskRunning                    // the agent reported it started
	TaskDead                       // see TaskEnd
)

func (s TaskState) String() string {
	return [...]string{"pending", "scheduled", "running", "dead"}[s]
}

// TaskEnd says how a dead task ended (NoEnd while it lives).
type TaskEnd int8

const (
	NoEnd TaskEnd = iota
	Finished
	Failed
	Killed
	Evicted
	Lost
)

func (h TaskEnd) String() string {
	return [...]string{"", "finished", "failed", "killed", "evicted", "lost"}[h]
}

// Health is what a running task's health check last said: HealthUnknown
// until a check passed or failed in this run, and always for tasks without
// a check.
type Health int8

const (
	HealthUnknown Health = iota
	HealthHealthy
	HealthUnhealthy
)

func (h Health) String() string { return [...]string{"", "healthy", "unhealthy"}[h] }

// JobEnd says how a dead job ended; NotEnded while it lives.
type JobEnd int8

const (
	NotEnded JobEnd = iota
	JobKilledEnd
	JobFinishedEnd
)

// JobState is derived from the job's end and its tasks.
type JobState int8

const (
	JobPending JobState = iota // no task placed yet (or deferred)
	JobRunning                 // at least one task placed or running
	JobDead                    // killed or finished
)

func (s JobState) String() string { return [...]string{"pending", "running", "dead"}[s] }

// State is the projection of a cell's log at Position. Apply is its only
// writer. Pointers between its parts (task to job, task to machine) and the
// indexes are derived: checkpoints hold the primary fields and rebuild them.
type State struct {
	Position int64 // the last event applied; 0 for the empty log
	TimeUS   int64 // the latest occurred_at of the events applied, microseconds (never runs backwards)

	Leader        string // holder of the leader lease, from LeaderElected
	LeaderEpoch   int64
	LeaderAddress string

	Machines map[string]*Machine
	// UpdatesChangedPos is the position of the last event that moved a
	// job's spec or update after its submission (an update, its commit,
	// rollback, halt or promotion): only those leave tasks behind their
	// job's spec. Loaded from a checkpoint, it is the newest ChangedPos.
	UpdatesChangedPos int64
	Jobs              map[JobKey]*Job
	AllocSets         map[JobKey]*AllocSet
	Quotas            map[UserBand]Resources // granted; best-effort is unlimited and absent
	Charged           map[UserBand]Resources // in use: the limits of live jobs and alloc sets

	// PriceSheets are every price sheet set, in log order (a handful a
	// year); ClosedPeriods maps a closed billing period's start to the
	// position of its BillingPeriodClosed.
	PriceSheets   []PriceSheet
	ClosedPeriods map[int64]int64

	// Skipped counts events that named something unknown or were out of
	// place; they moved only the position. Non-zero means a writer bug.
	Skipped int64

	// Indexes, maintained by Apply and rebuilt from the fields above.
	pending       map[*Task]struct{}
	pendingAllocs map[*Alloc]struct{}
	byUser        map[string]map[string]*Job
	labels        map[string]map[string]map[*Job]struct{} // key -> value -> jobs
	waiting       map[JobKey]map[*Job]struct{}            // prerequisite -> deferred jobs
	live          map[*Job]struct{}                       // jobs not ended: Jobs keeps the dead until their name is reused
	// pendingLog lists the tasks that entered the queue or had their spec
	// version (so maybe their priority) changed, from pendingLogBase on:
	// what PendingOrder sorts in. Trimmed as it outgrows the queue.
	pendingLog     []*Task
	pendingLogBase int64

	// lastJob caches the job Apply found last: consecutive events mostly
	// name the same job (its tasks' submissions, one pass's placements).
	// Only Apply reads and writes it, so readers never race on it.
	lastJob *Job
}

// New returns the state of an empty log.
func New() *State {
	s := &State{
		Machines:  map[string]*Machine{},
		Jobs:      map[JobKey]*Job{},
		AllocSets: map[JobKey]*AllocSet{},
		Quotas:    map[UserBand]Resources{},
		Charged:   map[UserBand]Resources{},

		ClosedPeriods: map[int64]int64{},
	}
	s.resetIndexes()
	return s
}

func (s *State) resetIndexes() {
	s.pending = map[*Task]struct{}{}
	s.pendingAllocs = map[*Alloc]struct{}{}
	s.byUser = map[string]map[string]*Job{}
	s.labels = map[string]map[string]map[*Job]struct{}{}
	s.waiting = map[JobKey]map[*Job]struct{}{}
	s.live = map[*Job]struct{}{}
}

// RangeLiveJobs calls fn for every job not ended, in no order, until fn
// returns false: the dead ones a long-lived cell keeps are not walked.
func (s *State) RangeLiveJobs(fn func(*Job) bool) {
	for j := range s.live {
		if !fn(j) {
			return
		}
	}
}

// DefaultPortBase is a machine's first task port when its registration
// does not say (the agent's default range starts there).
const DefaultPortBase = 20000

// Machine is one machine of the cell.
type Machine struct {
	Name       string
	Address    string
	Capacity   Resources
	Attributes map[string]string
	// PortBase is the first port handed to tasks: the machine offers
	// Capacity.Ports ports from PortBase on.
	PortBase int32
	State    MachineState
	Draining bool
	Reason   string // why it is down or draining
	// Version is the position of the last event that changed the machine
	// or what is placed on it. A placement computed against another
	// version is stale. Positions never repeat, so a machine removed and
	// registered again cannot match an old version by accident.
	Version int64

	// Limits and Reserved sum the limits and reservations of the tasks and
	// allocs placed here (tasks inside an alloc count through the alloc).
	// Prod placements are checked against Limits, others against Reserved
	// (Borg §5.5).
	Limits   Resources
	Reserved Resources

	tasks  map[*Task]struct{}
	allocs map[*Alloc]struct{}
	// stopping holds the runs killed or evicted here whose process may
	// still run: Limits and Reserved count them until TaskStopped (or the
	// machine goes down or away).
	stopping map[TaskRun]Hold
	// UsageEndUS is where the machine's last usage window (UsageReported)
	// ended: the next one starts there, so windows never overlap, through
	// a failover too. 0 before its first.
	UsageEndUS int64
	// spans holds the runs that left the machine since UsageEndUS
	// (RunSpans).
	spans map[TaskRun]span
}

// TaskRun names one run of a task: the task and the submission it served
// (the task's Seq then).
type TaskRun struct {
	TaskKey
	Submission int64
}

// Hold is what a stopping run keeps of its machine until its process is
// gone.
type Hold struct {
	Limit, Reservation Resources
	SinceUS            int64 // when it was told to stop
}

// StoppingRuns returns the runs stopping here, in key order.
func (m *Machine) StoppingRuns() []TaskRun {
	out := make([]TaskRun, 0, len(m.stopping))
	for r := range m.stopping {
		out = append(out, r)
	}
	slices.SortFunc(out, compareRuns)
	return out
}

func compareRuns(a, b TaskRun) int {
	return cmp.Or(compareTaskKeys(a.TaskKey, b.TaskKey), cmp.Compare(a.Submission, b.Submission))
}

// HeldLimits sums the limits of the runs stopping here: room no new task
// may take yet.
func (m *Machine) HeldLimits() Resources {
	var sum Resources
	for _, h := range m.stopping {
		sum = sum.Add(h.Limit)
	}
	return sum
}

// Schedulable reports whether new work may be placed here.
func (m *Machine) Schedulable() bool { return m.State == MachineUp && !m.Draining }

// Free is what a new task may still use: capacity minus limits for a prod
// task, minus reservations for the others.
func (m *Machine) Free(prod bool) Resources {
	if prod {
		return m.Capacity.Sub(m.Limits)
	}
	return m.Capacity.Sub(m.Reserved)
}

// TaskCount is the number of tasks placed here, inside allocs or not.
func (m *Machine) TaskCount() int { return len(m.tasks) }

// Tasks returns the tasks placed here in key order.
func (m *Machine) Tasks() []*Task {
	out := make([]*Task, 0, len(m.tasks))
	for t := range m.tasks {
		out = append(out, t)
	}
	slices.SortFunc(out, compareTasks)
	return out
}

// RangeTasks calls fn for every task placed here, in no order, until fn
// returns false. For hot paths that do not need an order.
func (m *Machine) RangeTasks(fn func(*Task) bool) {
	for t := range m.tasks {
		if !fn(t) {
			return
		}
	}
}

// Allocs returns the allocs placed here in key order.
func (m *Machine) Allocs() []*Alloc {
	out := make([]*Alloc, 0, len(m.allocs))
	for a := range m.allocs {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Alloc) int {
		return cmp.Or(cmp.Compare(a.Set.User, b.Set.User), cmp.Compare(a.Set.Name, b.Set.Name), cmp.Compare(a.Index, b.Index))
	})
	return out
}

// UsedPorts returns the port numbers taken by tasks placed here.
func (m *Machine) UsedPorts() map[int32]bool {
	used := map[int32]bool{}
	for t := range m.tasks {
		for _, p := range t.Ports {
			used[p] = true
		}
	}
	return used
}

// SpecVersion is one version of a job's spec. Versions are never dropped:
// a rollback goes back to any of them.
type SpecVersion struct {
	Version int64
	Spec    *events.JobSpec
}

// Update is a job's uncommitted update: it can be rolled back to From.
type Update struct {
	From, To int64
	SinceUS  int64  // when it was opened: the start of its progress deadline
	Halted   string // why it failed, once it did: nothing more rolls
	Promoted bool   // its canaries were promoted
}

// Job is one job; its tasks are indexed by their index.
type Job struct {
	User, Name string
	Versions   []SpecVersion // oldest first
	Current    int64         // the version in force
	Update     *Update       // nil once committed, rolled back, or never updated
	LastUpdate UpdateOutcome // how the last closed update ended (zero: none)
	// ChangedPos is the position of the last event that changed its spec
	// or its update: a plan made at an earlier position is stale.
	ChangedPos int64
	End        JobEnd
	EndReason  string
	// Deferred: the spec's start_after job had not finished when this job
	// was submitted, and no task has been submitted since.
	Deferred    bool
	SubmittedUS int64
	EndedUS     int64
	Tasks       []*Task // by index; nil where no task was ever submitted

	// The job's charge against its user's quota in ChargeBand; zero for
	// jobs inside an alloc set (the alloc set is charged) and dead jobs.
	Charge     Resources
	ChargeBand Band

	live, pending int // tasks scheduled or running; tasks pending
}

// Key returns the job's key.
func (j *Job) Key() JobKey { return JobKey{j.User, j.Name} }

// Spec returns the spec in force.
func (j *Job) Spec() *events.JobSpec { return j.SpecOf(j.Current) }

// SpecOf returns the spec of a version, or nil.
func (j *Job) SpecOf(version int64) *events.JobSpec {
	for i := len(j.Versions) - 1; i >= 0; i-- {
		if j.Versions[i].Version == version {
			return j.Versions[i].Spec
		}
	}
	return nil
}

// LatestVersion is the highest version number given so far.
func (j *Job) LatestVersion() int64 {
	if len(j.Versions) == 0 {
		return 0
	}
	return j.Versions[len(j.Versions)-1].Version
}

// State derives the job's state.
func (j *Job) State() JobState {
	switch {
	case j.End != NotEnded:
		return JobDead
	case j.live > 0:
		return JobRunning
	}
	return JobPending
}

// Behind reports whether a live task of j runs another spec version than
// the one in force: a roll to finish.
func (j *Job) Behind() bool {
	for _, t := range j.Tasks {
		if t != nil && t.State != TaskDead && t.SpecVersion != j.Current {
			return true
		}
	}
	return false
}

// Dead reports whether the job was killed or finished.
func (j *Job) Dead() bool { return j.End != NotEnded }

// Labels returns the labels of the spec in force.
func (j *Job) Labels() map[string]string {
	if sp := j.Spec(); sp != nil {
		return sp.Labels
	}
	return nil
}

// Priority returns the priority in force.
func (j *Job) Priority() int32 { return j.Spec().GetPriority() }

// LiveTasks counts tasks scheduled or running; PendingTasks those pending.
func (j *Job) LiveTasks() int    { return j.live }
func (j *Job) PendingTasks() int { return j.pending }

// Task returns the task of an index, or nil.
func (j *Job) Task(index int32) *Task {
	if index < 0 || int(index) >= len(j.Tasks) {
		return nil
	}
	return j.Tasks[index]
}

// Usage is one window of a task's measured use.
type Usage struct {
	WindowStartUS, WindowEndUS int64
	CPUCoreSeconds             float64
	MemoryBytes                int64 // mean resident
	MemoryMaxBytes             int64
	DiskBytes                  int64
}

// Task is one task of a job.
type Task struct {
	Job   *Job
	Index int32
	State TaskState
	End   TaskEnd // set when dead
	// Reason is the reason of the last submission, eviction, kill or loss,
	// or the message of the last failure.
	Reason      string
	SpecVersion int64  // the version of the job's spec it runs or will run
	Machine     string // where it is placed; where it last ran once dead; "" when pending
	AllocIndex  int32  // the alloc instance it runs in, -1 outside an alloc
	Ports       []int32
	Restarts    int32 // restarts in place plus reschedules after a failure, eviction or loss
	// NotBeforeUS: a task resubmitted after a failure of its own is not
	// placed before then (RestartPolicy.Backoff); 0 when it need not wait.
	NotBeforeUS int64
	FailStreak  int32 // failures of its own in a row (backoff doubles with each)
	// StoppingOn is the machine where the task's last run was killed or
	// evicted while it ran and still holds its resources (its process may
	// still run, for up to the job's kill_timeout); "" when none does.
	StoppingOn string
	// RunsSeen counts the agent's runs of this placement that the log has
	// a start or a failure of: the agent's restarts count plus one of the
	// last recorded. A report of a run past it failing to start is news
	// (the agent retries such a start in place, and no start precedes it).
	RunsSeen  int32
	StartedUS int64 // when its current or last run started
	// RunStartUS is when the run placed on its machine first started (0:
	// not yet, or not placed): the start of what a usage window bills it.
	RunStartUS  int64
	FailMessage string // the message of its last failure (OOMKilled: ..., the agent's refusal)
	ExitCode    int32  // of the last exit
	Signal      string
	Pid         int64
	Limit       Resources // what it asked for, overrides applied
	Reservation Resources // what the master estimates it needs; starts at Limit
	// ReservationUS is when Reservation was last set (estimated, or reset to
	// the limit), the start of the estimate's decay (Borg §5.5).
	ReservationUS int64
	Usage         Usage // the last window reported
	// Replacing: this run replaces one a rolling update or a drain
	// stopped (set by the "updated" submission, or the "rescheduled" one
	// after an eviction for DrainReason; kept by reschedules). Until it is
	// Settled it counts against the update policy's max_disruptions.
	Replacing bool
	// Health is what its check last said in this run, HealthMessage the
	// failing check's error, HealthyUS when it last turned healthy (0: not
	// in this run).
	Health        Health
	HealthMessage string
	HealthyUS     int64
	SinceUS       int64 // when it entered its state
	// Seq is the position of the TaskSubmitted that made it pending last:
	// the submission order, which the scheduler keeps within a priority.
	Seq int64
	// LastEnd and LastMachine say how and where its last run ended; unlike
	// End and Machine they survive its resubmission, so the scheduler can
	// pace tasks lost with their machine and avoid the machine a task
	// failed on.
	LastEnd     TaskEnd
	LastMachine string
	// WaitReason and WaitHint are why it waits, as the scheduler last
	// recorded it (PendingReasonsChanged) in its current pending spell;
	// empty while it is not pending or before a pass explained it.
	WaitReason string
	WaitHint   string

	machine *Machine
	alloc   *Alloc
}

// Key returns the task's key.
func (t *Task) Key() TaskKey { return TaskKey{t.Job.User, t.Job.Name, t.Index} }

// Live reports whether the task holds resources on a machine.
func (t *Task) Live() bool { return t.State == TaskScheduled || t.State == TaskRunning }

// Priority is the priority of the task's spec version.
func (t *Task) Priority() int32 { return t.Spec().GetPriority() }

// DrainReason is the reason of a drain's evictions (TaskEvicted): the
// resubmitted task is a replacement that counts against its job's
// disruption budget until it settles.
const DrainReason = "drain"

// Serving reports whether a live task serves at nowUS: it runs, its health
// check does not fail, and it is not a replacement that has not settled.
// Every task that does not serve counts against its job's max_disruptions
// (the rule voluntary evictions keep, commands' disruption budget), so a
// roll or a drain waits while it does not.
func (t *Task) Serving(nowUS int64) bool {
	return t.State == TaskRunning && t.Health != HealthUnhealthy && !t.Disrupted(nowUS)
}

// Disrupted reports whether the task is a replacement (a roll's or a
// drain's) that does not serve yet at nowUS: it counts against
// max_disruptions.
func (t *Task) Disrupted(nowUS int64) bool {
	return t.Replacing && t.State != TaskDead && !t.Settled(nowUS)
}

// Settled reports whether the task serves as its spec wants at nowUS:
// running and healthy, or, without a health check, running for the update
// policy's min_healthy_time.
func (t *Task) Settled(nowUS int64) bool {
	at, ok := t.SettledAt()
	return ok && at <= nowUS
}

// SettledAt is when the task's current run settled or will settle (see
// Settled); false when it is not running, or runs unhealthy or unchecked.
func (t *Task) SettledAt() (int64, bool) {
	if t.State != TaskRunning {
		return 0, false
	}
	spec := t.Spec()
	if spec.GetHealthCheck().GetPath() != "" {
		return t.HealthyUS, t.Health == HealthHealthy
	}
	return t.StartedUS + spec.GetUpdate().MinHealthyTime().Microseconds(), true
}

// Spec returns the job spec of the task's version.
func (t *Task) Spec() *events.JobSpec { return t.Job.SpecOf(t.SpecVersion) }

// AllocSet is a set of allocs: reserved resources that tasks of several jobs
// of the same user can run in (Borg §2.4).
type AllocSet struct {
	User, Name  string
	Priority    int32
	Resources   Resources // per alloc
	Constraints []*events.Constraint
	Labels      map[string]string
	Allocs      []*Alloc // by index
	CreatedUS   int64
	Charge      Resources
	ChargeBand  Band
}

// Key returns the alloc set's key.
func (a *AllocSet) Key() JobKey { return JobKey{a.User, a.Name} }

// Alloc is one instance of an alloc set.
type Alloc struct {
	Set     *AllocSet
	Index   int32
	Machine string    // "" while pending
	Used    Resources // the limits of the tasks inside it

	machine *Machine
	tasks   map[*Task]struct{}
}

// Free is what is left in the alloc for another task.
func (a *Alloc) Free() Resources { return a.Set.Resources.Sub(a.Used) }

// Placed reports whether the alloc holds resources on a machine.
func (a *Alloc) Placed() bool { return a.machine != nil }

// ---- read accessors --------------------------------------------------------

// Job returns a job, or nil.
func (s *State) Job(user, name string) *Job { return s.Jobs[JobKey{user, name}] }

// Task returns a task, or nil.
func (s *State) Task(user, job string, index int32) *Task {
	j := s.Jobs[JobKey{user, job}]
	if j == nil {
		return nil
	}
	return j.Task(index)
}

// CrashLoopRestarts is how many restarts of its own make a task that is
// not dead crash-looping (CrashLooping), when it is not backing off already.
const CrashLoopRestarts = 3

// CrashLooping reports whether the task, not dead, backs off after a
// failure of its own at nowUS or has restarted CrashLoopRestarts times.
func (t *Task) CrashLooping(nowUS int64) bool {
	return t.State != TaskDead && (t.NotBeforeUS > nowUS || t.Restarts >= CrashLoopRestarts)
}

// RestartingInPlace reports whether the task's agent restarts it in place
// after a failure the log has (an exit, or a start that failed: no such
// file, permission denied): placed, not running.
func (t *Task) RestartingInPlace() bool {
	return t.State == TaskScheduled && t.Pid == 0 && t.Restarts > 0 && t.FailMessage != "" && t.Reason == t.FailMessage
}

// Status says in words what is happening to the task at nowUS:
// "running (healthy)", "running (unhealthy: GET /: connection refused)",
// "backoff until 2026-11-25T20:01:02Z after OOMKilled: ...", "dead
// (failed: exit 1)".
func (t *Task) Status(nowUS int64) string {
	switch t.State {
	case TaskPending:
		if t.NotBeforeUS > nowUS {
			return fmt.Sprintf("backoff until %s after %s", time.UnixMicro(t.NotBeforeUS).UTC().Format(time.RFC3339), t.LastFailure())
		}
		return "pending"
	case TaskScheduled:
		if t.RestartingInPlace() {
			return "restarting after " + t.LastFailure()
		}
		return "scheduled"
	case TaskRunning:
		switch {
		case t.Health == HealthHealthy:
			return "running (healthy)"
		case t.Health == HealthUnhealthy:
			return "running (unhealthy: " + t.HealthMessage + ")"
		case t.Spec().GetHealthCheck().GetPath() != "":
			return "running (not checked yet)"
		}
		return "running"
	}
	if t.StoppingOn != "" {
		// Dead, but not gone: its process has its kill_timeout to exit.
		if t.Reason != "" {
			return "stopping (" + t.End.String() + ": " + t.Reason + ")"
		}
		return "stopping (" + t.End.String() + ")"
	}
	switch t.End {
	case Failed:
		return "dead (failed: " + t.LastFailure() + ")"
	case Finished:
		return "dead (finished)"
	}
	if t.Reason != "" {
		return "dead (" + t.End.String() + ": " + t.Reason + ")"
	}
	return "dead (" + t.End.String() + ")"
}

// LastFailure words the task's last failure: its message, exit code or
// signal ("OOMKilled: over its memory limit", "exit 1", "signal SIGSEGV").
func (t *Task) LastFailure() string {
	var parts []string
	if t.FailMessage != "" {
		parts = append(parts, t.FailMessage)
	}
	switch {
	case t.Signal != "":
		parts = append(parts, "signal "+t.Signal)
	case t.ExitCode != 0:
		parts = append(parts, fmt.Sprintf("exit %d", t.ExitCode))
	}
	if len(parts) == 0 {
		return "failed"
	}
	return strings.Join(parts, ", ")
}

// PendingCount is the number of pending tasks.
func (s *State) PendingCount() int { return len(s.pending) }

// PendingTasks returns the pending tasks, highest priority first, then by key.
func (s *State) PendingTasks() []*Task {
	return tasksOf(s.sortedPending())
}

// prioritized is a pending task with its priority, read once: it is a
// lookup in its job's versions, too dear for every comparison.
type prioritized struct {
	priority int32
	t        *Task
}

// comparePending is the queue's order: highest priority first, then by key.
func comparePending(a, b prioritized) int {
	if c := cmp.Compare(b.priority, a.priority); c != 0 {
		return c
	}
	return compareTasks(a.t, b.t)
}

func (s *State) sortedPending() []prioritized {
	sorted := make([]prioritized, 0, len(s.pending))
	for t := range s.pending {
		sorted = append(sorted, prioritized{t.Priority(), t})
	}
	slices.SortFunc(sorted, comparePending)
	return sorted
}

func tasksOf(ps []prioritized) []*Task {
	out := make([]*Task, len(ps))
	for i := range ps {
		out[i] = ps[i].t
	}
	return out
}

// pendingLogSlack is how far past twice the queue the log may grow before
// it is trimmed (a reader behind the trim sorts afresh).
var pendingLogSlack = 4096

// notePending logs t as one whose place in the queue may have changed.
func (s *State) notePending(t *Task) {
	if len(s.pendingLog) >= 2*len(s.pending)+pendingLogSlack {
		s.pendingLogBase += int64(len(s.pendingLog))
		s.pendingLog = s.pendingLog[:0]
	}
	s.pendingLog = append(s.pendingLog, t)
}

// RangePending calls fn for every pending task, in no order, until fn
// returns false.
func (s *State) RangePending(fn func(*Task) bool) {
	for t := range s.pending {
		if !fn(t) {
			return
		}
	}
}

// PendingAllocs returns the allocs waiting for a machine, by key.
func (s *State) PendingAllocs() []*Alloc {
	out := make([]*Alloc, 0, len(s.pendingAllocs))
	for a := range s.pendingAllocs {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Alloc) int {
		return cmp.Or(cmp.Compare(a.Set.User, b.Set.User), cmp.Compare(a.Set.Name, b.Set.Name), cmp.Compare(a.Index, b.Index))
	})
	return out
}

// JobsOf returns a user's jobs (dead ones too), by name.
func (s *State) JobsOf(user string) []*Job {
	m := s.byUser[user]
	out := make([]*Job, 0, len(m))
	for _, j := range m {
		out = append(out, j)
	}
	slices.SortFunc(out, compareJobs)
	return out
}

// SelectJobs returns the jobs whose labels match sel, of one user or of
// every user when user is "", dead ones too, by key. An equality or "in"
// requirement narrows the search through the label index.
func (s *State) SelectJobs(sel Selector, user string) []*Job {
	var candidates map[*Job]struct{}
	for _, r := range sel.Reqs {
		if r.Op != OpEquals && r.Op != OpIn {
			continue
		}
		set := map[*Job]struct{}{}
		for _, v := range r.Values {
			for j := range s.labels[r.Key][v] {
				set[j] = struct{}{}
			}
		}
		if candidates == nil || len(set) < len(candidates) {
			candidates = set
		}
	}
	var out []*Job
	consider := func(j *Job) {
		if (user == "" || j.User == user) && sel.Matches(j.Labels()) {
			out = append(out, j)
		}
	}
	switch {
	case candidates != nil:
		for j := range candidates {
			consider(j)
		}
	case user != "":
		for _, j := range s.byUser[user] {
			consider(j)
		}
	default:
		for _, j := range s.Jobs {
			consider(j)
		}
	}
	slices.SortFunc(out, compareJobs)
	return out
}

// SelectTasks returns the tasks of the jobs SelectJobs finds, by key. Tasks
// carry their job's labels.
func (s *State) SelectTasks(sel Selector, user string) []*Task {
	var out []*Task
	for _, j := range s.SelectJobs(sel, user) {
		for _, t := range j.Tasks {
			if t != nil {
				out = append(out, t)
			}
		}
	}
	return out
}

// WaitingOn returns the live jobs deferred until the given job finishes.
func (s *State) WaitingOn(prerequisite JobKey) []*Job {
	out := make([]*Job, 0, len(s.waiting[prerequisite]))
	for j := range s.waiting[prerequisite] {
		out = append(out, j)
	}
	slices.SortFunc(out, compareJobs)
	return out
}

// CellCapacity sums the capacity of every registered machine.
func (s *State) CellCapacity() Resources {
	var sum Resources
	for _, m := range s.Machines {
		// Each machine's capacity is at most events.MaxTotal: the sum
		// saturates rather than wraps.
		if next, ok := sum.AddChecked(m.Capacity); ok {
			sum = next
		} else {
			sum = Resources{satAdd(sum.CPUMilli, m.Capacity.CPUMilli), satAdd(sum.MemoryBytes, m.Capacity.MemoryBytes),
				satAdd(sum.DiskBytes, m.Capacity.DiskBytes), satAdd(sum.GPUMilli, m.Capacity.GPUMilli), satAdd(sum.Ports, m.Capacity.Ports)}
		}
	}
	return sum
}

// SortedMachines returns the machines by name.
func (s *State) SortedMachines() []*Machine {
	out := make([]*Machine, 0, len(s.Machines))
	for _, m := range s.Machines {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *Machine) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// SortedJobs returns every job by key.
func (s *State) SortedJobs() []*Job {
	out := make([]*Job, 0, len(s.Jobs))
	for _, j := range s.Jobs {
		out = append(out, j)
	}
	slices.SortFunc(out, compareJobs)
	return out
}

// compareJobs and compareTasks sort the pending queue every pass: they
// compare names only when they must (cmp.Or would compare them all).
func compareJobs(a, b *Job) int {
	if c := cmp.Compare(a.User, b.User); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

func compareTasks(a, b *Task) int {
	if a.Job != b.Job {
		if c := compareJobs(a.Job, b.Job); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.Index, b.Index)
}

func compareTaskKeys(a, b TaskKey) int {
	return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Job, b.Job), cmp.Compare(a.Index, b.Index))
}
