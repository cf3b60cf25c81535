package fauxmaster

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/agentlink"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// Options is the replay's change and its knobs. The zero value replays the
// window as it was.
type Options struct {
	Change Change
	// Seed draws the machines a removal takes. The passes are seeded by
	// the log, as the cell's are.
	Seed uint64
	// PassDelay is how long after a change the simulation runs a pass of
	// its own for work no recorded pass placed (default 100 ms); the
	// recorded passes run when they ran.
	PassDelay time.Duration
}

// Sim is one replay of a Recording.
type Sim struct {
	rec  *Recording
	opt  Options
	st   *projections.State
	obs  *observer
	core *master.SchedulingCore
	cfg  master.SchedulerConfig

	nowUS int64
	q     queue
	seq   uint64

	removed  map[string]bool
	agents   map[string]*simAgent
	runCount map[taskID]int             // runs placed so far (run 0: under way at the start)
	jobInc   map[projections.JobKey]int // the recorded incarnation of each job
	pid      int64

	placed      []placement // the simulation's placements, in order
	tickAt      int64       // when the own pass is due (0: none)
	rolling     bool
	nextPass    int // the next recorded pass to read
	nextStep    int // the next recorded rolling-update step
	currentSeed int64
	refused     map[string]int
	refusedWhy  map[refusal]*refusalCount // refusals by command and the field their reason names
	commands    int
	passes      int // passes run, recorded and the simulation's own
	// onRead, in tests, sees each recorded pass about to read the state.
	onRead func(seed int64)
}

type simAgent struct {
	name  string
	tasks map[projections.TaskKey]*agentRun
	// stopping are the runs killed or evicted here whose processes are
	// still going, by task, their submissions oldest first: the agent
	// reports the oldest stopping (it starts no other run of the task
	// meanwhile) until the recorded run's TaskStopped, so the machine
	// holds their room as long as it did.
	stopping map[projections.TaskKey][]int64
}

type agentRun struct {
	id            taskID
	key           projections.TaskKey
	run           int
	spec          int64
	pid           int64
	started       bool
	health        projections.Health
	healthMessage string
	restarts      int32
	backoff       *restartSample // exited, to be restarted in place
}

// Replay takes the window (from, to] of src apart and replays it under
// opt: what `corral sim` runs over a cell's log, and the child process the
// master starts for its web UI's what-if page.
func Replay(ctx context.Context, src Source, from, to int64, opt Options) (*Report, error) {
	rec, err := Load(ctx, src, from, to)
	if err != nil {
		return nil, err
	}
	return Run(rec, opt)
}

// Run replays rec under opt and reports the two side by side.
func Run(rec *Recording, opt Options) (*Report, error) {
	start := time.Now()
	s, err := newSim(rec, opt)
	if err != nil {
		return nil, err
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	rep := s.report()
	rep.WallSeconds = time.Since(start).Seconds()
	return rep, nil
}

func newSim(rec *Recording, opt Options) (*Sim, error) {
	if opt.PassDelay <= 0 {
		opt.PassDelay = 100 * time.Millisecond
	}
	pass := scheduler.DefaultConfig()
	if opt.Change.Policy != "" {
		pass.Policy = opt.Change.Policy
	}
	if opt.Change.PoolSize != 0 {
		pass.FeasibleK = max(opt.Change.PoolSize, 0)
	}
	if err := pass.Validate(); err != nil {
		return nil, err
	}
	// The replay records no why-pending answers.
	pass.NoExplanations = true
	st, err := projections.Decode(projections.Encode(rec.Start))
	if err != nil {
		return nil, err
	}
	cfg := master.SchedulerConfig{Pass: pass}
	s := &Sim{rec: rec, opt: opt, st: st, cfg: cfg, core: master.NewSchedulingCore(cfg), nowUS: rec.StartTime.UnixMicro(),
		removed: map[string]bool{}, agents: map[string]*simAgent{}, runCount: map[taskID]int{},
		jobInc: map[projections.JobKey]int{}, refused: map[string]int{}, refusedWhy: map[refusal]*refusalCount{}}
	s.obs = newObserver(st)
	if n := opt.Change.removals(len(rec.machines)); n > 0 {
		rng := rand.New(rand.NewPCG(opt.Seed, 0x6661757820))
		for _, i := range rng.Perm(len(rec.machines))[:n] {
			s.removed[rec.machines[i]] = true
		}
	}
	return s, nil
}

// Times are microseconds; rank orders what happens at one instant: the
// recorded position it stands for (twice, so a pass's read can sit just
// after the event it read), or the end for the simulation's own doings.
const ownRank = math.MaxInt64

type item struct {
	atUS, rank int64
	seq        uint64
	do         func()
}

type queue []item

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	a, b := &q[i], &q[j]
	if a.atUS != b.atUS {
		return a.atUS < b.atUS
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.seq < b.seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(item)) }
func (q *queue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = item{}
	*q = old[:len(old)-1]
	return it
}

func (s *Sim) at(us, rank int64, do func()) {
	s.seq++
	heap.Push(&s.q, item{atUS: max(us, s.nowUS), rank: rank, seq: s.seq, do: do})
}

func (s *Sim) run() error {
	if err := s.setUp(); err != nil {
		return err
	}
	end := s.rec.EndTime.UnixMicro()
	for s.q.Len() > 0 {
		it := heap.Pop(&s.q).(item)
		if it.atUS > end {
			break
		}
		s.nowUS = it.atUS
		it.do()
	}
	s.nowUS = end
	return nil
}

// setUp applies the change at the window's start, starts the agents of the
// machines and tasks the state holds, and queues the recorded requests and
// passes.
func (s *Sim) setUp() error {
	s.startAgents()
	if err := s.applyChange(); err != nil {
		return err
	}
	for i := range s.rec.inputs {
		in := &s.rec.inputs[i]
		if in.machine != "" && s.removed[in.machine] {
			continue
		}
		s.at(in.atUS, 2*in.position, func() { s.replay(in) })
	}
	if len(s.rec.passes) > 0 {
		s.queueRead()
	}
	for _, st := range s.rec.steps {
		s.at(st.atUS, 2*st.position-1, func() {
			s.do(commands.RollingUpdateStep{Meta: s.core.Meta()})
		})
	}
	s.changed()
	return nil
}

// startAgents starts an agent per machine the state holds, with the runs
// it holds live or stopping.
func (s *Sim) startAgents() {
	for _, name := range slices.Sorted(maps.Keys(s.st.Machines)) {
		s.agents[name] = &simAgent{name: name, tasks: map[projections.TaskKey]*agentRun{}}
	}
	// Runs stopping at the window's start go on stopping until their
	// recorded TaskStopped (or for ever, when it is not in the window).
	for _, name := range slices.Sorted(maps.Keys(s.st.Machines)) {
		a := s.agents[name]
		for _, r := range s.st.Machines[name].StoppingRuns() {
			if a.stopping == nil {
				a.stopping = map[projections.TaskKey][]int64{}
			}
			a.stopping[r.TaskKey] = append(a.stopping[r.TaskKey], r.Submission)
			if st, ok := s.rec.stops[r]; ok && st.machine == name {
				s.releaseAt(a, r.TaskKey, r.Submission, st.us, 2*st.position)
			}
		}
	}
	for _, j := range s.st.SortedJobs() {
		for _, t := range j.Tasks {
			if t == nil || !t.Live() {
				continue
			}
			id := taskID{t.Key(), 0}
			s.runCount[id] = 1
			a := s.agents[t.Machine]
			if a == nil {
				continue
			}
			ar := &agentRun{id: id, key: t.Key(), run: 0, spec: t.SpecVersion, pid: t.Pid, started: t.State == projections.TaskRunning}
			a.tasks[t.Key()] = ar
			if ar.started {
				s.runFrom(a, ar, t.StartedUS)
			} else {
				s.startLater(a, ar)
			}
		}
	}
}

// applyChange removes and adds the change's machines and sets its quotas.
func (s *Sim) applyChange() error {
	admin := commands.Meta{Actor: commands.Actor{User: "fauxmaster", Admin: true}}
	for _, name := range slices.Sorted(maps.Keys(s.st.Machines)) {
		if s.removed[name] {
			if err := s.decide(commands.RemoveMachine{Meta: admin, Machine: name, Reason: "removed by the simulation's change"}); err != nil {
				return fmt.Errorf("remove: machine %s: %w", name, err)
			}
		}
	}
	for i, m := range s.opt.Change.Add {
		for n := range m.Count {
			name := fmt.Sprintf("sim-%d-%d", i, n)
			err := s.decide(commands.RegisterMachine{Meta: admin, Machine: name, Address: name + ":7070", Capacity: m.Capacity, Attributes: m.Attributes})
			if err != nil {
				return fmt.Errorf("add: machine %s: %w", name, err)
			}
		}
	}
	// Quotas the change sets: now if the cell has machines to hold them,
	// and in place of the recorded ones in any case.
	if !s.st.CellCapacity().IsZero() {
		for _, q := range s.opt.Change.Quotas {
			if err := s.decide(commands.SetQuota{Meta: admin, User: q.User, Band: q.Band, Resources: q.Resources}); err != nil {
				return fmt.Errorf("quota: %s/%s: %w", q.User, q.Band, err)
			}
		}
	}
	return nil
}

// replay makes a recorded request again.
func (s *Sim) replay(in *input) {
	switch {
	case in.lost != nil:
		a := s.agents[in.machine]
		if a == nil {
			return
		}
		if ar := a.tasks[*in.lost]; ar != nil && ar.started {
			delete(a.tasks, *in.lost)
			s.poll(a, nil, nil)
		}
	case in.down:
		if s.agents[in.machine] != nil {
			s.do(commands.ReportAgentState{Meta: agentlink.Meta, Machine: in.machine, Unreachable: true, MissedPolls: 3})
		}
	case in.up:
		if a := s.agents[in.machine]; a != nil {
			s.poll(a, nil, nil)
		}
	case in.inc > 0:
		if s.do(s.changedCmd(in.cmd)) {
			s.jobInc[in.job] = in.inc
		}
	default:
		if cmd := s.changedCmd(in.cmd); cmd != nil {
			s.do(cmd)
		}
	}
}

// changedCmd is a recorded request under the change: specs of selected
// jobs changed, a quota the change sets not set otherwise (nil).
func (s *Sim) changedCmd(cmd commands.Command) commands.Command {
	switch c := cmd.(type) {
	case commands.SubmitJob:
		c.Spec = s.opt.Change.apply(c.Spec)
		return c
	case commands.UpdateJob:
		if c.Spec != nil {
			c.Spec = s.opt.Change.apply(c.Spec)
		}
		return c
	case commands.SetQuota:
		for _, q := range s.opt.Change.Quotas {
			if q.User == c.User && q.Band == c.Band {
				c.Resources = q.Resources
				return c
			}
		}
	}
	return cmd
}

// queueRead queues the next recorded pass: it reads the state just after
// the event at its seed, and its placements land when they landed.
func (s *Sim) queueRead() {
	p := &s.rec.passes[s.nextPass]
	s.at(p.readUS, 2*p.seed+1, func() {
		s.nextPass++
		if s.nextPass < len(s.rec.passes) {
			s.queueRead()
		}
		// The pass's own clock is not in the log: its placements' time is
		// the nearest after it (a pass retried when a backoff ran out
		// reads an old position at a later time).
		if s.onRead != nil {
			s.onRead(p.seed)
		}
		s.core.Retry()
		cell, _, rolling := s.core.Input(s.st, time.UnixMicro(p.commitUS))
		s.rolling = rolling
		if cell == nil {
			return
		}
		s.passes++
		_, place := s.core.Plan(cell, p.seed)
		if place == nil {
			s.changed()
			return
		}
		s.at(p.commitUS, 2*p.commitPosition-1, func() {
			s.currentSeed = p.seed
			s.do(*place)
			s.currentSeed = 0
			s.step()
		})
	})
}

// changed queues a pass of the simulation's own when work waits that no
// recorded pass is about to take.
func (s *Sim) changed() {
	if s.st.PendingCount() == 0 && len(s.st.PendingAllocs()) == 0 && !s.rolling {
		return
	}
	s.tick(s.nowUS+s.opt.PassDelay.Microseconds(), false)
}

// tick queues the simulation's own pass at us unless one is due by then;
// retry makes it run even if nothing happened since the last pass (a
// backoff ran out). A tick an earlier one replaced does nothing: the
// earlier pass queues what is still needed.
func (s *Sim) tick(us int64, retry bool) {
	if s.tickAt != 0 && s.tickAt <= us {
		return
	}
	s.tickAt = us
	s.at(us, ownRank, func() {
		if s.tickAt != us {
			return
		}
		if retry {
			s.core.Retry()
		}
		s.ownPass()
	})
}

// lookahead: a recorded pass due this soon takes the pending work instead
// of a pass of the simulation's own, so that an unchanged replay places
// with the recorded seeds.
const lookahead = 2 * time.Second

func (s *Sim) ownPass() {
	s.tickAt = 0
	if s.nextPass < len(s.rec.passes) && s.rec.passes[s.nextPass].readUS-s.nowUS <= lookahead.Microseconds() {
		return
	}
	cell, position, rolling := s.core.Input(s.st, time.UnixMicro(s.nowUS))
	s.rolling = rolling
	if cell != nil {
		s.passes++
		_, place := s.core.Plan(cell, position)
		if place != nil {
			s.do(*place)
		}
	}
	s.step()
	// Tasks backing off after a failure of their own wait for a time,
	// not for news: the pass runs again when the first may go.
	var wake int64
	s.st.RangePending(func(t *projections.Task) bool {
		if t.NotBeforeUS > s.nowUS && (wake == 0 || t.NotBeforeUS < wake) {
			wake = t.NotBeforeUS
		}
		return true
	})
	if wake > 0 {
		s.tick(wake, true)
	}
}

// step moves the rolling updates on, as the leader's loop does after its
// pass, unless a recorded step is about to.
func (s *Sim) step() {
	if !s.rolling {
		return
	}
	for s.nextStep < len(s.rec.steps) && s.rec.steps[s.nextStep].atUS < s.nowUS {
		s.nextStep++
	}
	if s.nextStep < len(s.rec.steps) && s.rec.steps[s.nextStep].atUS-s.nowUS <= lookahead.Microseconds() {
		return
	}
	s.do(commands.RollingUpdateStep{Meta: s.core.Meta()})
}

// do decides cmd on the state and folds its events, as the writer does
// with one command: refusals are counted, not fatal.
func (s *Sim) do(cmd commands.Command) bool {
	if err := s.decide(cmd); err != nil {
		s.refused[commands.Name(cmd)]++
		countRefusal(s.refusedWhy, commands.Name(cmd), err.Error())
		return false
	}
	return true
}

func (s *Sim) decide(cmd commands.Command) error {
	s.commands++
	evs, err := commands.Decide(s.st, cmd, commands.FixedClock(time.UnixMicro(s.nowUS)))
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return nil
	}
	for i := range evs {
		evs[i].Position = s.st.Position + 1
		if err := projections.Apply(s.st, evs[i]); err != nil {
			panic(fmt.Sprintf("fauxmaster: folding %s: %v", evs[i].Type, err))
		}
		s.obs.observe(evs[i])
		s.react(evs[i])
	}
	if _, ok := cmd.(commands.UpdateJob); ok {
		s.rolling = true
	}
	s.changed()
	return nil
}

// react is the simulated agents' side of an event: a placement is started
// after the recorded delay, an ended run is forgotten.
func (s *Sim) react(e events.Event) {
	switch p := e.Data.(type) {
	case *events.TaskScheduled:
		k := projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}
		id := taskID{k, s.jobInc[projections.JobKey{User: p.User, Name: p.Job}]}
		run := s.runCount[id]
		s.runCount[id]++
		s.placed = append(s.placed, placement{task: id, run: run, machine: p.Machine, atUS: s.nowUS, seed: s.currentSeed})
		a := s.agents[p.Machine]
		if a == nil {
			return
		}
		ar := &agentRun{id: id, key: k, run: run, spec: p.SpecVersion}
		a.tasks[k] = ar
		s.startLater(a, ar)
	case *events.TaskUpdated:
		// Changed in place: the agent runs the new spec version from now.
		if t := s.st.Task(p.User, p.Job, p.Index); t != nil && t.Live() {
			if a := s.agents[t.Machine]; a != nil {
				if ar := a.tasks[t.Key()]; ar != nil {
					ar.spec = p.SpecVersion
				}
			}
		}
	case *events.TaskFinished:
		s.forget(p.Machine, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index})
	case *events.TaskFailed:
		if !p.WillRestart {
			s.forget(p.Machine, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index})
		}
	case *events.TaskEvicted:
		s.stop(p.Machine, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, p.Stopping)
	case *events.TaskLost:
		s.forget(p.Machine, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index})
	case *events.TaskKilled:
		s.stop(p.Machine, projections.TaskKey{User: p.User, Job: p.Job, Index: p.Index}, p.Stopping)
	case *events.MachineRegistered:
		if s.agents[p.Machine] == nil {
			s.agents[p.Machine] = &simAgent{name: p.Machine, tasks: map[projections.TaskKey]*agentRun{}}
		}
	case *events.MachineDown:
		if a := s.agents[p.Machine]; a != nil {
			clear(a.tasks) // its processes are gone with it
			clear(a.stopping)
		}
	case *events.MachineRemoved:
		delete(s.agents, p.Machine)
	}
}

// stop ends a run the master stopped: one it holds room for (stopping)
// goes on as stopping until as long after as the recorded run's
// TaskStopped came after its end; then a poll says it is gone.
func (s *Sim) stop(machine string, k projections.TaskKey, stopping bool) {
	a := s.agents[machine]
	t := s.st.Task(k.User, k.Job, k.Index)
	if a == nil || t == nil {
		return
	}
	submission := t.Seq // the event is folded, its resubmission not yet
	s.forget(machine, k)
	if !stopping {
		return
	}
	if a.stopping == nil {
		a.stopping = map[projections.TaskKey][]int64{}
	}
	a.stopping[k] = append(a.stopping[k], submission)
	// The run is the task's last placed, started by its agent or not. One
	// the recording never saw stopped held its room until its machine
	// went down or away, or past the window.
	id := taskID{k, s.jobInc[projections.JobKey{User: k.User, Name: k.Job}]}
	run, runs := s.runCount[id]-1, s.rec.runs[id]
	if run < 0 || run >= len(runs) || runs[run].stoppedUS == 0 {
		return
	}
	r := runs[run]
	s.releaseAt(a, k, submission, s.nowUS+r.stoppedUS-r.endedUS, 2*r.stopPosition)
}

// releaseAt ends a's stopping run of k at us: a poll then says it is gone.
func (s *Sim) releaseAt(a *simAgent, k projections.TaskKey, submission, us, rank int64) {
	s.at(us, rank, func() {
		if i := slices.Index(a.stopping[k], submission); i >= 0 && s.agents[a.name] == a {
			if a.stopping[k] = slices.Delete(a.stopping[k], i, i+1); len(a.stopping[k]) == 0 {
				delete(a.stopping, k)
			}
			s.poll(a, nil, nil)
		}
	})
}

func (s *Sim) forget(machine string, k projections.TaskKey) {
	if a := s.agents[machine]; a != nil {
		delete(a.tasks, k)
	}
}

// recordedRun is the recording's run of the same number, nil when the
// recording has none.
func (s *Sim) recordedRun(k taskID, run int) *recordedRun {
	if runs := s.rec.runs[k]; run < len(runs) {
		return runs[run]
	}
	return nil
}

// startLater starts a placed run after the recorded run's delay (the
// recording's median for a run it does not have). A run the recording
// placed on the same machine and that never started there before the cell
// ended it (its agent was still stopping the task's previous run) does not
// start. (One that ended by its own doing, a start that failed, is
// replayed like any other run.)
func (s *Sim) startLater(a *simAgent, ar *agentRun) {
	delay, rank := s.rec.startDelay.Microseconds(), int64(ownRank)
	r := s.recordedRun(ar.id, ar.run)
	if r != nil && r.scheduledUS > 0 && r.startedUS == 0 && r.machine == a.name && !r.end.own() {
		return
	}
	if r != nil && r.startedUS > 0 {
		rank = 2 * r.startPosition
		if r.scheduledUS > 0 {
			delay = r.startedUS - r.scheduledUS
		} else {
			delay = r.startedUS - s.nowUS
		}
	}
	s.at(s.nowUS+max(delay, 0), rank, func() {
		if a.tasks[ar.key] != ar || s.agents[a.name] != a {
			return // stopped before it started
		}
		s.pid++
		ar.started, ar.pid = true, 1_000_000+s.pid
		s.poll(a, nil, nil)
		s.runFrom(a, ar, s.nowUS)
	})
}

// runFrom queues how a run that started at startUS ends. The n-th run
// ends as the recording's n-th did when that ended by the task's own
// doing (finished, or failed and not restarted in place), after as long
// as it ran. When the recorded run ended otherwise (evicted, lost,
// killed), the simulated one, spared that, ends as the task's next own
// outcome in the recording, but not before the recorded run's end: it
// really did run that long. With no own outcome left it runs past the
// window's end. Usage reports that moved a reservation are replayed at
// their offsets into the run.
func (s *Sim) runFrom(a *simAgent, ar *agentRun, startUS int64) {
	r := s.recordedRun(ar.id, ar.run)
	if r != nil {
		for _, h := range r.health {
			s.at(startUS+h.offsetUS, 2*h.position, func() {
				if a.tasks[ar.key] != ar || s.agents[a.name] != a {
					return
				}
				ar.health, ar.healthMessage = projections.HealthUnhealthy, h.message
				if h.healthy {
					ar.health = projections.HealthHealthy
				}
				s.poll(a, nil, nil)
			})
		}
		for i := range r.restarts {
			x := &r.restarts[i]
			s.at(startUS+x.offsetUS, 2*x.position, func() {
				if a.tasks[ar.key] != ar || s.agents[a.name] != a {
					return
				}
				if x.started {
					s.pid++
					ar.pid, ar.backoff, ar.health = 1_000_000+s.pid, nil, projections.HealthUnknown
				} else {
					ar.backoff = x
					ar.restarts++
				}
				s.poll(a, nil, nil)
			})
		}
		for _, u := range r.usage {
			s.at(startUS+u.offsetUS, 2*u.position, func() {
				if a.tasks[ar.key] != ar || s.agents[a.name] != a {
					return
				}
				// The simulated window rates the usage over its own
				// interval: scale the CPU so the rate is the recorded one,
				// which is what moved the reservation.
				use := proto.Clone(u.usage).(*events.TaskUsage)
				if m := s.st.Machines[a.name]; m != nil && u.seconds > 0 {
					use.CpuCoreSeconds = u.usage.CpuCoreSeconds / u.seconds * commands.UsageSeconds(m, ar.key, s.nowUS)
				}
				s.poll(a, nil, &commands.UsageWindow{Tasks: []*events.TaskUsage{use}})
			})
		}
	}
	if (r == nil || r.startedUS == 0) && s.rec.healthyAfter > 0 {
		if t := s.st.Task(ar.key.User, ar.key.Job, ar.key.Index); t != nil && t.Spec().GetHealthCheck() != nil {
			s.at(startUS+s.rec.healthyAfter.Microseconds(), ownRank, func() {
				if a.tasks[ar.key] == ar && s.agents[a.name] == a {
					ar.health = projections.HealthHealthy
					s.poll(a, nil, nil)
				}
			})
		}
	}
	out, survived := s.outcome(ar.id, ar.run)
	if out == nil {
		return
	}
	s.at(startUS+max(out.duration(), survived), 2*out.endPosition, func() {
		if a.tasks[ar.key] != ar || s.agents[a.name] != a {
			return // it ended otherwise first
		}
		end := commands.AgentTask{Task: ar.key, SpecVersion: ar.spec, Pid: ar.pid, State: commands.AgentFinished, ExitCode: out.exitCode}
		if out.end == runFailed {
			end.State = commands.AgentFailed
		}
		s.poll(a, &end, nil)
	})
}

// outcome is the first run from the run-th on that ended by the task's own
// doing in the recording (nil: none), and how long the recorded run-th ran
// when it ended otherwise.
func (s *Sim) outcome(k taskID, run int) (*recordedRun, int64) {
	runs := s.rec.runs[k]
	var survived int64
	if run < len(runs) && !runs[run].end.own() && runs[run].end != runOpen {
		survived = runs[run].duration()
	}
	for m := run; m < len(runs); m++ {
		if runs[m].end.own() {
			return runs[m], survived
		}
	}
	return nil, 0
}

// poll is one poll's answer of a's agent: every run it has started,
// ended one first when given, and usage windows.
func (s *Sim) poll(a *simAgent, ended *commands.AgentTask, usage *commands.UsageWindow) {
	tasks := make([]commands.AgentTask, 0, len(a.tasks)+1)
	if ended != nil {
		tasks = append(tasks, *ended)
	}
	// A run being stopped, until the task's next run started here: that
	// one says the run before is gone.
	for k, subs := range a.stopping {
		if ar := a.tasks[k]; ar == nil || !ar.started {
			tasks = append(tasks, commands.AgentTask{Task: k, Submission: subs[0], State: commands.AgentStopping})
		}
	}
	for k, ar := range a.tasks {
		if !ar.started || ended != nil && k == ended.Task {
			continue
		}
		at := commands.AgentTask{Task: k, SpecVersion: ar.spec, Pid: ar.pid, State: commands.AgentRunning, Restarts: ar.restarts,
			Health: ar.health, HealthMessage: ar.healthMessage}
		if _, ok := a.stopping[k]; ok {
			if t := s.st.Task(k.User, k.Job, k.Index); t != nil {
				at.Submission = t.Seq
			}
			delete(a.stopping, k)
		}
		if b := ar.backoff; b != nil {
			at.State, at.ExitCode, at.Signal, at.Message, at.Health = commands.AgentBackoff, b.exitCode, b.signal, b.message, projections.HealthUnknown
		}
		tasks = append(tasks, at)
	}
	// In task order, as an agent lists them (the command sorts them too;
	// sorted, that costs it a look).
	slices.SortFunc(tasks, func(x, y commands.AgentTask) int {
		return cmp.Or(cmp.Compare(x.Task.User, y.Task.User), cmp.Compare(x.Task.Job, y.Task.Job), cmp.Compare(x.Task.Index, y.Task.Index))
	})
	s.do(commands.ReportAgentState{Meta: agentlink.Meta, Machine: a.name, Tasks: tasks, Usage: usage})
}
