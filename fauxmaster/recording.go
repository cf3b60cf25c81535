package fauxmaster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/agentlink"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Recording is a window of a cell's log taken apart into what a replay
// needs: the state at the window's start, the requests people and
// operators made (as the commands that made them), the scheduler's passes
// (when each read the log, at which position, its seed, and when its
// placements landed), every task's runs (where, when they started, how
// they ended) and the usage reports that moved a reservation. Recorded is
// the window's report, computed by the same observer the simulation feeds.
type Recording struct {
	Start              *projections.State // after the event at From
	From, To           int64              // the window is the events (From, To]
	StartTime, EndTime time.Time
	Events             int

	inputs  []input
	passes  []recordedPass
	steps   []step // the recorded scheduler's rolling-update steps
	runs    map[taskID][]*recordedRun
	initial map[taskID]bool // live at the window's start: their run 0 is under way
	// stops are the TaskStopped of the window by machine and run: when a
	// run stopped there (at the window's start or in it) let its room go.
	stops map[projections.TaskRun]stopAt
	// machines lists every machine the window knows (at its start or
	// registered in it), sorted: the change's removals draw from it.
	machines []string
	// startDelay is the median time from a placement to its start, for
	// runs the recording does not have.
	startDelay time.Duration
	// healthyAfter is the median time from a run's start to its first
	// healthy answer, for runs of jobs with a health check that the
	// recording does not have.
	healthyAfter time.Duration
	// NotReplayed counts the requests of kinds a replay does not make
	// again, by event type (see doc.go).
	NotReplayed map[string]int
	Recorded    *Metrics
	placements  []placement // the window's placements, in log order
}

// taskID names a task of one incarnation of its job: a job name used
// again after the job ended is another job. inc counts the job's
// submissions in the window (0: the job at the window's start).
type taskID struct {
	projections.TaskKey
	inc int
}

// input is one recorded request, replayed at its time as the command
// that made it.
type input struct {
	atUS     int64
	position int64
	cmd      commands.Command
	machine  string // the machine it names, if any (removals skip it)
	down, up bool   // the machine stopped or resumed answering polls
	// lost: the machine's agent stopped reporting this task's process
	// while the machine answered (the agent restarted and lost it).
	lost *projections.TaskKey
	job  projections.JobKey
	inc  int // a submission: the incarnation it starts
}

// recordedPass is one pass of the recorded scheduler that placed
// something: it read the log at Seed (its seed) at readUS, and its
// placements landed at commitUS from commitPosition on.
type recordedPass struct {
	seed           int64
	readUS         int64
	commitUS       int64
	commitPosition int64
}

// step is a moment the recorded scheduler moved a rolling update on.
type step struct{ atUS, position int64 }

// recordedRun is one placement of a task and how it ended.
type recordedRun struct {
	machine       string
	scheduledUS   int64 // 0 for the run under way at the window's start
	startedUS     int64 // 0: never started
	startPosition int64
	endedUS       int64 // 0: still running at the window's end
	end           runEnd
	exitCode      int32
	endPosition   int64
	passSeed      int64 // the pass that placed it (0: not recorded)
	// stoppedUS and stopPosition: a run killed or evicted while placed
	// held its machine's resources until its agent reported its process
	// gone (TaskStopped); 0 when it held nothing.
	stoppedUS, stopPosition int64
	submission              int64 // the position of the TaskSubmitted it served
	usage                   []usageSample
	health                  []healthSample
	restarts                []restartSample
}

// stopAt is a recorded TaskStopped: where, when and at which position.
type stopAt struct {
	machine      string
	us, position int64
}

// restartSample is an exit of the run's process that its agent restarted
// in place (backoff), or that restart, at an offset from the run's start.
type restartSample struct {
	offsetUS int64
	position int64
	started  bool // the restart; else the exit
	exitCode int32
	signal   string
	message  string
}

// healthSample is a change of the run's health check's answer, at an
// offset from its start.
type healthSample struct {
	offsetUS int64
	position int64
	healthy  bool
	message  string
}

type runEnd int8

const (
	runOpen     runEnd = iota
	runFinished        // exited 0
	runFailed          // failed, not restarted in place
	runEvicted
	runLost
	runKilled
)

// own says the run ended by the task's own doing: that is what a replay
// reproduces (a task runs as long as it really ran); evictions, losses
// and kills come from the replayed cell itself.
func (e runEnd) own() bool { return e == runFinished || e == runFailed }

// duration is how long the run ran, from its start (its placement when it
// never started) to its end.
func (r *recordedRun) duration() int64 {
	from := r.startedUS
	if from == 0 {
		from = r.scheduledUS
	}
	return max(r.endedUS-from, 0)
}

// usageSample is a usage window that moved the task's reservation in the
// recording, at an offset from its run's start.
type usageSample struct {
	offsetUS int64
	position int64
	usage    *events.TaskUsage
	// seconds is what the recorded usage was rated over: the task's own
	// interval, or the whole window in logs older than intervals.
	seconds float64
}

// placement is one recorded or simulated placement of a task's run.
type placement struct {
	task    taskID
	run     int
	machine string
	atUS    int64
	seed    int64 // the pass's seed; 0: a pass the recording does not have
}

// Source is what Load reads: a cell's log.
type Source = projections.Source

// Load takes the window (from, to] of src apart. from may be 0 (the
// log's beginning); to beyond the head is an error.
func Load(ctx context.Context, src Source, from, to int64) (*Recording, error) {
	head, err := src.Head(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case from < 0:
		return nil, fmt.Errorf("from: position %d is negative", from)
	case to <= from:
		return nil, fmt.Errorf("to: position %d is not after from %d", to, from)
	case to > head:
		return nil, fmt.Errorf("to: position %d is beyond the log's head %d", to, head)
	}
	if from, err = commandBoundary(ctx, src, from, to); err != nil {
		return nil, err
	}
	start, err := projections.StateAt(ctx, src, from)
	if err != nil {
		return nil, fmt.Errorf("the state at position %d: %w", from, err)
	}
	// The recorder folds its own copy: a copy of the start, not a second
	// replay of the log to it.
	folded, err := projections.Decode(projections.Encode(start))
	if err != nil {
		return nil, err
	}
	r := newRecorder(start, folded)
	for pos := from + 1; pos <= to; {
		evs, err := src.Read(ctx, pos, int(min(to-pos+1, 2000)))
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return nil, fmt.Errorf("the log has no event at position %d below %d", pos, to)
		}
		for i := range evs {
			if evs[i].Position > to {
				break
			}
			if err := r.add(evs[i]); err != nil {
				return nil, err
			}
			pos = evs[i].Position + 1
		}
	}
	return r.finish(), nil
}

// commandBoundary moves from past the rest of the command its event
// belongs to: a window that split one command's events would start from
// a state no command left (a job without its tasks). A command's events
// share their time.
func commandBoundary(ctx context.Context, src Source, from, to int64) (int64, error) {
	if from == 0 {
		return 0, nil
	}
	evs, err := src.Read(ctx, from, 64)
	if err != nil {
		return 0, err
	}
	if len(evs) == 0 || evs[0].Position != from {
		return 0, fmt.Errorf("from: the log has no event at position %d", from)
	}
	at := evs[0].OccurredAt
	for _, e := range evs[1:] {
		if !e.OccurredAt.Equal(at) || e.Position >= to {
			break
		}
		from = e.Position
	}
	return from, nil
}

// FromEvents takes apart the window of evs after start (a state the
// caller gives up): the events must follow start's position without gaps.
func FromEvents(start *projections.State, evs []events.Event) (*Recording, error) {
	folded, err := projections.Decode(projections.Encode(start))
	if err != nil {
		return nil, err
	}
	r := newRecorder(start, folded)
	for i := range evs {
		if err := r.add(evs[i]); err != nil {
			return nil, err
		}
	}
	return r.finish(), nil
}

// recorder builds a Recording event by event, folding its own copy of the
// state for the observer.
type recorder struct {
	rec      *Recording
	folded   *projections.State
	obs      *observer
	times    []int64 // occurred_at of each event of the window, by position-From-1
	machines map[string]bool
	// usage is the last UsageReported: a ReservationEstimated right after
	// it, on its machine and in its command, was moved by its windows.
	usage    *events.UsageReported
	usagePos int64
	usageUS  int64
	inc      map[projections.JobKey]int // each job's current incarnation
}

func newRecorder(start, folded *projections.State) *recorder {
	at := time.UnixMicro(start.TimeUS).UTC()
	r := &recorder{
		rec: &Recording{Start: start, From: start.Position, To: start.Position, StartTime: at, EndTime: at,
			runs: map[taskID][]*recordedRun{}, initial: map[taskID]bool{}, stops: map[projections.TaskRun]stopAt{}, NotReplayed: map[string]int{}},
		folded: folded, machines: map[string]bool{}, inc: map[projections.JobKey]int{},
	}
	for name := range start.Machines {
		r.machines[name] = true
	}
	for _, j := range start.Jobs {
		for _, t := range j.Tasks {
			if t == nil || !t.Live() {
				continue
			}
			run := &recordedRun{machine: t.Machine, submission: t.Seq}
			if t.State == projections.TaskRunning {
				run.startedUS = t.StartedUS
			}
			id := taskID{t.Key(), 0}
			r.rec.runs[id] = []*recordedRun{run}
			r.rec.initial[id] = true
		}
	}
	r.obs = newObserver(folded)
	return r
}

// System actors: what they append is the cell's own doing, which a replay
// recomputes.
func systemActor(a string) bool {
	return a == "scheduler" || a == agentlink.Meta.Actor.User || a == ""
}

func (r *recorder) add(e events.Event) error {
	if e.Position != r.folded.Position+1 {
		return fmt.Errorf("the window has a gap: event %d after position %d", e.Position, r.folded.Position)
	}
	us := e.OccurredAt.UnixMicro()
	if r.rec.Events == 0 && r.rec.From == 0 {
		// A window from the log's beginning starts with its first event.
		r.rec.StartTime, r.rec.EndTime = e.OccurredAt.UTC(), e.OccurredAt.UTC()
		r.rec.Start.TimeUS, r.obs.lastUS = us, us
	}
	r.times = append(r.times, us)
	r.rec.Events++
	r.rec.To = e.Position
	if t := e.OccurredAt.UTC(); t.After(r.rec.EndTime) {
		r.rec.EndTime = t
	}
	r.input(e, us)
	r.task(e, us)
	if err := projections.Apply(r.folded, e); err != nil {
		return err
	}
	r.obs.observe(e)
	return nil
}

// input records a request people or operators made.
func (r *recorder) input(e events.Event, us int64) {
	in := input{atUS: us, position: e.Position}
	var replayed bool
	switch e.Data.(type) {
	case *events.MachineRegistered, *events.MachineUpdated, *events.MachineDown, *events.TaskLost,
		*events.MachineUp, *events.MachineDrainSet, *events.MachineRemoved, *events.QuotaSet:
		replayed = r.operatorInput(e, &in)
	case *events.JobUpdateHalted, *events.PriceSheetSet, *events.BillingPeriodClosed:
		if !systemActor(e.Actor) {
			r.rec.NotReplayed[e.Type]++
		}
	default:
		replayed = r.userInput(e, &in)
	}
	if replayed {
		r.rec.inputs = append(r.rec.inputs, in)
	}
}

// operatorInput fills in from an operator's request, or a machine's
// going down or up, and reports whether the replay makes it again.
func (r *recorder) operatorInput(e events.Event, in *input) bool {
	admin := commands.Meta{Actor: commands.Actor{User: "fauxmaster", Admin: true}}
	switch p := e.Data.(type) {
	case *events.MachineRegistered:
		r.machines[p.Machine] = true
		in.machine = p.Machine
		in.cmd = commands.RegisterMachine{Meta: admin, Machine: p.Machine, Address: p.Address,
			Capacity: projections.ResourcesOf(p.Capacity), Attributes: p.Attributes, PortBase: p.PortBase}
	case *events.MachineUpdated:
		in.machine = p.Machine
		in.cmd = commands.UpdateMachine{Meta: admin, Machine: p.Machine, Address: p.Address,
			Capacity: projections.ResourcesOf(p.Capacity), Attributes: p.Attributes, PortBase: p.PortBase}
	case *events.MachineDown:
		in.machine, in.down = p.Machine, true
	case *events.TaskLost:
		if m := r.folded.Machines[p.Machine]; m == nil || m.State != projections.MachineUp {
			return false // lost with its machine, which the replay takes down too
		}
		in.machine, in.lost = p.Machine, &projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}
	case *events.MachineUp:
		in.machine, in.up = p.Machine, true
	case *events.MachineDrainSet:
		in.machine = p.Machine
		in.cmd = commands.DrainMachine{Meta: admin, Machine: p.Machine, Draining: p.Draining, Reason: p.Reason}
	case *events.MachineRemoved:
		if systemActor(e.Actor) {
			return false
		}
		in.machine = p.Machine
		in.cmd = commands.RemoveMachine{Meta: admin, Machine: p.Machine, Reason: p.Reason}
	case *events.QuotaSet:
		in.cmd = commands.SetQuota{Meta: admin, User: p.User, Band: p.Band, Resources: projections.ResourcesOf(p.Resources)}
	default:
		return false
	}
	return true
}

// userInput fills in from a user's request on jobs, tasks and alloc sets,
// and reports whether the replay makes it again.
func (r *recorder) userInput(e events.Event, in *input) bool {
	user := func(owner string) commands.Meta {
		return commands.Meta{Actor: commands.Actor{User: e.Actor, Admin: e.Actor != owner}}
	}
	switch p := e.Data.(type) {
	case *events.JobSubmitted:
		if p.Spec == nil {
			return false
		}
		in.job = projections.JobKey{User: p.Spec.User, Name: p.Spec.Name}
		r.inc[in.job]++
		in.inc = r.inc[in.job]
		in.cmd = commands.SubmitJob{Meta: commands.Meta{Actor: commands.Actor{User: p.Spec.User}}, Spec: p.Spec}
	case *events.JobUpdated:
		if systemActor(e.Actor) || p.Spec == nil {
			return false
		}
		in.cmd = commands.UpdateJob{Meta: user(p.Spec.User), User: p.Spec.User, Spec: p.Spec}
	case *events.JobKilled:
		// A job killed because the one it waited for was: the kill that
		// started it is replayed, and this follows from it.
		if systemActor(e.Actor) || strings.Contains(p.Reason, "which it was to start after") {
			return false
		}
		in.cmd = commands.KillJob{Meta: user(p.User), User: p.User, Name: p.Job, Reason: p.Reason}
	case *events.TaskKilled:
		if systemActor(e.Actor) || p.Reason == "job killed" {
			return false // part of a job's kill
		}
		in.cmd = commands.KillTask{Meta: user(p.User), User: p.User, Job: p.Job, Index: p.Index, Reason: p.Reason}
	case *events.AllocSetCreated:
		in.cmd = commands.CreateAllocSet{Meta: commands.Meta{Actor: commands.Actor{User: p.User}}, Name: p.Name, Count: p.Count,
			Priority: p.Priority, Resources: projections.ResourcesOf(p.Resources), Constraints: p.Constraints, Labels: p.Labels}
	case *events.AllocSetRemoved:
		if systemActor(e.Actor) {
			return false
		}
		in.cmd = commands.RemoveAllocSet{Meta: user(p.User), User: p.User, Name: p.Name}
	case *events.JobUpdateCommitted:
		// A reason says the master (or the update's own command) ended it.
		if systemActor(e.Actor) || p.Reason != "" {
			return false
		}
		in.cmd = commands.CommitUpdate{Meta: user(p.User), User: p.User, Job: p.Job}
	case *events.JobUpdateRolledBack:
		if systemActor(e.Actor) || p.Reason != "" {
			return false
		}
		in.cmd = commands.RollbackUpdate{Meta: user(p.User), User: p.User, Job: p.Job}
	case *events.JobUpdatePromoted:
		if systemActor(e.Actor) {
			return false
		}
		in.cmd = commands.PromoteUpdate{Meta: user(p.User), User: p.User, Job: p.Job}
	default:
		return false
	}
	return true
}

// task records runs, passes and the usage that moved reservations.
func (r *recorder) task(e events.Event, us int64) {
	end := func(run *recordedRun, how runEnd, code int32) {
		if run != nil {
			run.end, run.endedUS, run.exitCode, run.endPosition = how, us, code, e.Position
		}
	}
	switch p := e.Data.(type) {
	case *events.TaskScheduled:
		r.taskScheduled(p, e, us)
	case *events.AllocScheduled:
		r.passOf(p.PassPosition, e, us)
	case *events.TaskUpdated, *events.JobUpdateCommitted, *events.JobUpdateRolledBack, *events.JobUpdateHalted, *events.JobUpdatePromoted:
		r.stepAt(e, us)
	case *events.TaskStarted:
		if run := r.currentRun(p.User, p.Job, p.Index); run != nil && run.startedUS == 0 {
			run.startedUS, run.startPosition = us, e.Position
		} else if run != nil {
			run.restarts = append(run.restarts, restartSample{offsetUS: us - run.startedUS, position: e.Position, started: true})
		}
	case *events.TaskFinished:
		end(r.currentRun(p.User, p.Job, p.Index), runFinished, p.ExitCode)
	case *events.TaskFailed:
		run := r.currentRun(p.User, p.Job, p.Index)
		if !p.WillRestart {
			end(run, runFailed, p.ExitCode)
		} else if run != nil && run.startedUS > 0 {
			run.restarts = append(run.restarts, restartSample{offsetUS: us - run.startedUS, position: e.Position,
				exitCode: p.ExitCode, signal: p.Signal, message: p.Message})
		}
	case *events.TaskEvicted:
		end(r.currentRun(p.User, p.Job, p.Index), runEvicted, 0)
		if p.Reason == "update" || p.Reason == projections.DrainReason {
			r.stepAt(e, us) // a roll's, or a drain's moved on by the step
		}
	case *events.TaskLost:
		end(r.currentRun(p.User, p.Job, p.Index), runLost, 0)
	case *events.TaskKilled:
		end(r.currentRun(p.User, p.Job, p.Index), runKilled, 0)
	case *events.TaskStopped:
		r.taskStopped(p, e, us)
	case *events.TaskHealthChanged:
		if run := r.currentRun(p.User, p.Job, p.Index); run != nil && run.startedUS > 0 {
			run.health = append(run.health, healthSample{offsetUS: us - run.startedUS, position: e.Position, healthy: p.Healthy, message: p.Message})
		}
	case *events.UsageReported:
		r.usage, r.usagePos, r.usageUS = p, e.Position, us
	case *events.ReservationEstimated:
		r.reservationEstimated(p, us)
	}
}

// currentRun is the task's open run, or nil.
func (r *recorder) currentRun(user, job string, index int32) *recordedRun {
	runs := r.rec.runs[r.id(user, job, index)]
	if len(runs) == 0 {
		return nil
	}
	if run := runs[len(runs)-1]; run.end == runOpen {
		return run
	}
	return nil
}

func (r *recorder) taskScheduled(p *events.TaskScheduled, e events.Event, us int64) {
	k := r.id(p.User, p.Job, p.Index)
	run := &recordedRun{machine: p.Machine, scheduledUS: us, passSeed: p.PassPosition}
	if t := r.folded.Task(p.User, p.Job, p.Index); t != nil {
		run.submission = t.Seq // not folded yet: pending, at its submission
	}
	r.rec.runs[k] = append(r.rec.runs[k], run)
	r.rec.placements = append(r.rec.placements, placement{task: k, run: len(r.rec.runs[k]) - 1, machine: p.Machine, atUS: us, seed: p.PassPosition})
	r.passOf(p.PassPosition, e, us)
}

func (r *recorder) taskStopped(p *events.TaskStopped, e events.Event, us int64) {
	k := projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}
	r.rec.stops[projections.TaskRun{TaskKey: k, Submission: p.Submission}] = stopAt{machine: p.Machine, us: us, position: e.Position}
	// The run's job may have been killed and submitted again since:
	// look through its earlier incarnations too.
	for id := r.id(p.User, p.Job, p.Index); id.inc >= 0; id.inc-- {
		for _, run := range r.rec.runs[id] {
			if run.machine == p.Machine && run.submission == p.Submission {
				run.stoppedUS, run.stopPosition = us, e.Position
				return
			}
		}
	}
}

// reservationEstimated records, on each moved task's run, the usage
// report the estimate was made from.
func (r *recorder) reservationEstimated(p *events.ReservationEstimated, us int64) {
	if r.usage == nil || r.usage.Machine != p.Machine || r.usageUS != us {
		return
	}
	for _, moved := range p.Tasks {
		run := r.currentRun(moved.User, moved.Job, moved.Index)
		if run == nil || run.startedUS == 0 {
			continue
		}
		for _, u := range r.usage.Tasks {
			if u.GetUser() == moved.User && u.GetJob() == moved.Job && u.GetIndex() == moved.Index {
				secs := float64(r.usage.WindowEndUs-r.usage.WindowStartUs) / 1e6
				if u.GetEndUs() > 0 {
					secs = float64(u.GetEndUs()-u.GetStartUs()) / 1e6
				}
				run.usage = append(run.usage, usageSample{offsetUS: us - run.startedUS, position: r.usagePos, usage: u, seconds: secs})
				break
			}
		}
	}
}

func (r *recorder) id(user, job string, index int32) taskID {
	return taskID{projections.TaskKey{User: user, Job: job, Index: index}, r.inc[projections.JobKey{User: user, Name: job}]}
}

// stepAt records a rolling-update step of the scheduler's: one per
// instant.
func (r *recorder) stepAt(e events.Event, us int64) {
	if e.Actor != "scheduler" {
		return
	}
	if n := len(r.rec.steps); n > 0 && r.rec.steps[n-1].atUS == us {
		return
	}
	r.rec.steps = append(r.rec.steps, step{atUS: us, position: e.Position})
}

// passOf files a placement under its pass: consecutive placements of one
// seed and time are one pass's.
func (r *recorder) passOf(seed int64, e events.Event, us int64) {
	if seed <= 0 {
		return
	}
	if n := len(r.rec.passes); n > 0 && r.rec.passes[n-1].seed == seed && r.rec.passes[n-1].commitUS == us {
		return // the same command's placements (evictions come between)
	}
	read := r.rec.Start.TimeUS
	if i := seed - r.rec.From - 1; i >= 0 && i < int64(len(r.times)) {
		read = r.times[i]
	}
	r.rec.passes = append(r.rec.passes, recordedPass{seed: seed, readUS: read, commitUS: us, commitPosition: e.Position})
}

func (r *recorder) finish() *Recording {
	rec := r.rec
	rec.Recorded = r.obs.finish(rec.EndTime.UnixMicro())
	rec.machines = make([]string, 0, len(r.machines))
	for m := range r.machines {
		rec.machines = append(rec.machines, m)
	}
	slices.Sort(rec.machines)
	var delays, healthy []int64
	for _, runs := range rec.runs {
		for _, run := range runs {
			if run.scheduledUS > 0 && run.startedUS > 0 {
				delays = append(delays, run.startedUS-run.scheduledUS)
			}
			for _, h := range run.health {
				if h.healthy {
					healthy = append(healthy, h.offsetUS)
					break
				}
			}
		}
	}
	rec.startDelay = median(delays)
	rec.healthyAfter = median(healthy)
	r.times = nil
	return rec
}

func median(xs []int64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return time.Duration(xs[len(xs)/2]) * time.Microsecond
}
