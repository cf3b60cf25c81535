package history

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
	"google.golang.org/protobuf/proto"
)

// Config shapes the simulated cell.
type Config struct {
	Machines   int // registered up to this many
	Users      int
	JobNames   int // names per user; a dead job's name is reused
	MaxTasks   int // per job
	MaxPending int // submissions pause above this many pending tasks
	// Tick is the most the clock moves per step (default a second): a
	// longer one spreads a history over hours, for billing.
	Tick time.Duration
}

// Small is a cell for property tests: everything happens often.
var Small = Config{Machines: 6, Users: 3, JobNames: 6, MaxTasks: 5, MaxPending: 30}

// Large is a cell for benchmarks.
var Large = Config{Machines: 2000, Users: 50, JobNames: 200, MaxTasks: 40, MaxPending: 2000}

// Hours is Small spread over hours: for the Infrastore's tests, whose
// bills and usage tables count hours.
var Hours = Config{Machines: 6, Users: 3, JobNames: 6, MaxTasks: 5, MaxPending: 30, Tick: 40 * time.Second}

// Start is when every history begins.
var Start = start

// Sim is one simulated cell.
type Sim struct {
	S   *projections.State
	Now time.Time
	// Log holds every event applied, positioned and recorded, when Keep is set.
	Log  []events.Event
	Keep bool
	// Refused counts commands Decide refused (stale placements and the like).
	Refused int
	cfg     Config
	rng     *rand.Rand
	epoch   int64
	pid     int64

	machines []*projections.Machine // sorted by name; rebuilt when the set changes
	dirty    bool                   // a machine was removed or registered
	// silent is the machine Silence cut off ("" when none): no poll
	// reaches it and no trouble befalls it until LateUsage hears it again.
	silent string
}

// machineList returns the machines by name, sorting only after the set of
// machines may have changed.
func (s *Sim) machineList() []*projections.Machine {
	if s.dirty || len(s.machines) != len(s.S.Machines) {
		s.machines = s.S.SortedMachines()
		s.dirty = false
	}
	return s.machines
}

var (
	admin = commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}
	start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// New returns a cell seeded with seed.
func New(cfg Config, seed uint64) *Sim {
	return &Sim{S: projections.New(), Now: start, cfg: cfg, rng: rand.New(rand.NewPCG(seed, 0x636f7272616c)), Keep: true}
}

// Run steps until at least n events were applied in total.
func (s *Sim) Run(n int64) {
	for s.S.Position < n {
		s.Step()
	}
}

func (s *Sim) user(i int) string { return fmt.Sprintf("u%d", i) }

func (s *Sim) meta(user string) commands.Meta {
	return commands.Meta{Actor: commands.Actor{User: user}, RequestID: fmt.Sprintf("req-%d", s.S.Position)}
}

// do decides cmd and applies the events; it reports whether any came out.
func (s *Sim) do(cmd commands.Command) bool {
	evs, err := commands.Decide(s.S, cmd, commands.FixedClock(s.Now))
	if err != nil {
		s.Refused++
		return false
	}
	s.apply(evs)
	return len(evs) > 0
}

func (s *Sim) apply(evs []events.Event) {
	for i := range evs {
		evs[i].Position = s.S.Position + 1
		evs[i].RecordedAt = s.Now
		if err := projections.Apply(s.S, evs[i]); err != nil {
			panic(err)
		}
		if s.S.Skipped != 0 {
			all := ""
			for _, e := range evs {
				all += fmt.Sprintf("\n  %s %s %v", e.Type, e.Stream, e.Data)
			}
			panic(fmt.Sprintf("sim: Apply skipped event %d of %d Decide produced, at position %d: %s %v%s", i, len(evs), s.S.Position, evs[i].Type, evs[i].Data, all))
		}
		if s.Keep {
			s.Log = append(s.Log, evs[i])
		}
	}
}

// Step runs one random command (or injects a cell event) and advances the
// clock by up to a second.
func (s *Sim) Step() {
	tick := s.cfg.Tick
	if tick <= 0 {
		tick = time.Second
	}
	s.Now = s.Now.Add(time.Duration(s.rng.Int64N(int64(tick)/int64(time.Millisecond))) * time.Millisecond)
	if len(s.S.Machines) < s.cfg.Machines/2 || (len(s.S.Machines) < s.cfg.Machines && s.rng.IntN(20) == 0) {
		s.registerMachine()
		return
	}
	switch r := s.rng.IntN(100); {
	case r < 14:
		s.submit()
	case r < 40:
		s.schedule()
	case r < 72:
		s.report()
	case r < 76:
		s.update()
	case r < 79:
		s.commitOrRollback()
	case r < 82:
		s.step()
	case r < 85:
		s.kill()
	case r < 87:
		s.quota()
	case r < 89:
		s.machineTrouble()
	case r < 91:
		s.allocs()
	case r < 92:
		s.epoch++
		s.apply([]events.Event{events.New(events.CellStream, s.Now, &events.LeaderElected{Holder: fmt.Sprintf("master-%d", s.epoch%3), Epoch: s.epoch, Address: "10.0.0.1:9000"})})
	case r < 93:
		// Events the projection has no use for must not change it.
		s.apply([]events.Event{events.New(events.CellStream, s.Now, &events.CommandRefused{Actor: "u1", Command: "SubmitJob", Code: "ResourceExhausted", Reason: "over quota"})})
	default:
		s.report()
	}
}

func (s *Sim) registerMachine() {
	n := len(s.S.Machines)
	name := fmt.Sprintf("m%05d", s.rng.IntN(s.cfg.Machines*2))
	if s.S.Machines[name] != nil {
		return
	}
	shapes := []projections.Resources{
		{CPUMilli: 16000, MemoryBytes: 64 << 30, DiskBytes: 1 << 40, Ports: 200},
		{CPUMilli: 32000, MemoryBytes: 128 << 30, DiskBytes: 2 << 40, Ports: 200},
		{CPUMilli: 48000, MemoryBytes: 192 << 30, DiskBytes: 2 << 40, Ports: 200, GPUMilli: 4000},
	}
	s.dirty = true
	s.do(commands.RegisterMachine{Meta: admin, Machine: name, Address: fmt.Sprintf("10.1.%d.%d:7000", n/250, n%250),
		Capacity:   shapes[s.rng.IntN(len(shapes))],
		Attributes: map[string]string{"rack": fmt.Sprintf("r%02d", s.rng.IntN(20)), "arch": []string{"amd64", "arm64"}[s.rng.IntN(2)], "cores": fmt.Sprint(16 * (1 + s.rng.IntN(3)))}})
}

func (s *Sim) quota() {
	capacity := s.S.CellCapacity()
	users := max(s.cfg.Users, 1)
	share := projections.Resources{CPUMilli: capacity.CPUMilli / int64(users) / 2, MemoryBytes: capacity.MemoryBytes / int64(users) / 2,
		DiskBytes: capacity.DiskBytes / int64(users) / 2, Ports: capacity.Ports / int64(users) / 2, GPUMilli: capacity.GPUMilli / int64(users) / 2}
	band := []string{"production", "monitoring", "batch"}[s.rng.IntN(3)]
	if band == "batch" {
		share = share.Scale(4)
	}
	if band == "monitoring" {
		share = projections.Resources{CPUMilli: share.CPUMilli / 10, MemoryBytes: share.MemoryBytes / 10, Ports: share.Ports / 10}
	}
	s.do(commands.SetQuota{Meta: admin, User: s.user(s.rng.IntN(users)), Band: band, Resources: share})
}

func (s *Sim) submit() {
	if s.S.PendingCount() > s.cfg.MaxPending {
		return
	}
	user := s.user(s.rng.IntN(s.cfg.Users))
	prio := []int32{0, 1, 2, 4, 6, 8, 9, 10, 11}[s.rng.IntN(9)]
	sp := &events.JobSpec{
		Name:      fmt.Sprintf("j%d", s.rng.IntN(s.cfg.JobNames)),
		Priority:  prio,
		TaskCount: int32(1 + s.rng.IntN(s.cfg.MaxTasks)),
		Command:   "/bin/app",
		Args:      []string{"--v=1"},
		Labels:    map[string]string{"team": []string{"web", "ads", "search"}[s.rng.IntN(3)], "tier": []string{"canary", "prod"}[s.rng.IntN(2)]},
		Resources: &events.Resources{CpuMilli: int64(100 + s.rng.IntN(4000)), MemoryBytes: int64(1+s.rng.IntN(8)) << 28, Ports: int32(s.rng.IntN(3))},
		Update:    &events.UpdatePolicy{MaxDisruptions: int32(s.rng.IntN(3))},
		Restart:   &events.RestartPolicy{Mode: []string{"on-failure", "always", "never"}[s.rng.IntN(3)], MaxRestarts: int32(s.rng.IntN(3))},
	}
	if s.rng.IntN(5) == 0 {
		sp.Constraints = []*events.Constraint{{Attribute: "arch", Op: "=", Values: []string{"amd64"}, Soft: s.rng.IntN(2) == 0}}
	}
	if s.rng.IntN(4) == 0 {
		sp.Overrides = map[int32]*events.TaskOverride{0: {Args: []string{"--leader"}, Resources: &events.Resources{CpuMilli: 500, MemoryBytes: 1 << 29}}}
	}
	if s.rng.IntN(8) == 0 {
		sp.StartAfter = fmt.Sprintf("j%d", s.rng.IntN(s.cfg.JobNames))
	}
	if s.rng.IntN(10) == 0 {
		sp.AllocSet = "pool"
		sp.Resources = &events.Resources{CpuMilli: 100, MemoryBytes: 1 << 27}
		sp.Overrides = nil
	}
	s.do(commands.SubmitJob{Meta: s.meta(user), Spec: sp})
}

// schedule places some pending tasks and allocs first-fit on random machines.
func (s *Sim) schedule() {
	var cmd commands.PlaceTasks
	cmd.Meta = admin
	machines := s.machineList()
	if len(machines) == 0 {
		return
	}
	for _, a := range s.S.PendingAllocs() {
		if len(cmd.Allocs) == 4 {
			break
		}
		m := machines[s.rng.IntN(len(machines))]
		cmd.Allocs = append(cmd.Allocs, commands.AllocPlacement{User: a.Set.User, Set: a.Set.Name, Index: a.Index, Machine: m.Name, MachineVersion: m.Version})
	}
	taken := map[*projections.Machine]projections.Resources{}
	for _, t := range s.pendingSample() {
		if len(cmd.Placements) == 64 {
			break
		}
		if pl, ok := s.place(t, machines, taken); ok {
			cmd.Placements = append(cmd.Placements, pl)
		}
	}
	if len(cmd.Placements) > 0 || len(cmd.Allocs) > 0 {
		s.do(cmd)
	}
}

// pendingSample is the pending tasks schedule tries. Few pending tasks:
// all of them, in a deterministic order. Many (the benchmark cells): a
// sample in map order, which is cheap but makes the history depend on
// more than the seed.
func (s *Sim) pendingSample() []*projections.Task {
	if s.S.PendingCount() <= 256 {
		return s.S.PendingTasks()
	}
	var pending []*projections.Task
	s.S.RangePending(func(t *projections.Task) bool {
		pending = append(pending, t)
		return len(pending) < 64
	})
	return pending
}

// place tries up to four random machines for t: one where it fits beside
// what taken holds there already, or fits by preempting one lower-priority
// task, or an instance of its alloc set with room.
func (s *Sim) place(t *projections.Task, machines []*projections.Machine, taken map[*projections.Machine]projections.Resources) (commands.Placement, bool) {
	spec := t.Spec()
	for try := 0; try < 4; try++ {
		m := machines[s.rng.IntN(len(machines))]
		if !m.Schedulable() {
			continue
		}
		if !meetsHard(m.Attributes, spec.Constraints) {
			continue
		}
		pl := commands.Placement{Task: t.Key(), Machine: m.Name, MachineVersion: m.Version, Score: s.rng.Float64(), MachinesExamined: int32(try + 1)}
		if spec.AllocSet != "" {
			return s.placeInAlloc(t, spec.AllocSet, pl)
		}
		prod := projections.IsProd(spec.Priority)
		if free := m.Free(prod).Sub(taken[m]); t.Limit.LessEq(free) {
			if s.rng.IntN(20) == 0 {
				pl.MachineVersion-- // stale: the handler refuses it
			}
			taken[m] = taken[m].Add(t.Limit)
			return pl, true
		}
		// Preempt one lower-priority task when that makes room.
		for _, v := range m.Tasks() {
			if v.Priority() < spec.Priority && !(prod && projections.IsProd(v.Priority())) && v.AllocIndex < 0 {
				vfree := v.Reservation
				if prod {
					vfree = v.Limit
				}
				if t.Limit.LessEq(m.Free(prod).Sub(taken[m]).Add(vfree)) {
					pl.Preempt = []projections.TaskKey{v.Key()}
					taken[m] = taken[m].Add(t.Limit).Sub(vfree)
					return pl, true
				}
				break
			}
		}
	}
	return commands.Placement{}, false
}

// placeInAlloc moves pl into the first placed instance of alloc set set
// with room for t.
func (s *Sim) placeInAlloc(t *projections.Task, set string, pl commands.Placement) (commands.Placement, bool) {
	for _, a := range s.S.AllocSets[projections.JobKey{User: t.Job.User, Name: set}].Allocs {
		if a.Machine != "" && t.Limit.LessEq(a.Free()) {
			pl.Machine, pl.MachineVersion, pl.AllocIndex = a.Machine, s.S.Machines[a.Machine].Version, a.Index
			return pl, true
		}
	}
	return pl, false
}

// talkingMachine draws a random machine, or nil when there is none or it
// is the one whose agent is silent.
func (s *Sim) talkingMachine() *projections.Machine {
	machines := s.machineList()
	if len(machines) == 0 {
		return nil
	}
	m := machines[s.rng.IntN(len(machines))]
	if m.Name == s.silent {
		return nil
	}
	return m
}

// report is one poll of a random machine's agent.
func (s *Sim) report() {
	m := s.talkingMachine()
	if m == nil {
		return
	}
	if m.State == projections.MachineDown {
		if s.rng.IntN(3) == 0 {
			s.do(commands.ReportAgentState{Meta: admin, Machine: m.Name})
		}
		return
	}
	cmd := commands.ReportAgentState{Meta: admin, Machine: m.Name}
	window := commands.UsageWindow{}
	for _, t := range m.Tasks() {
		at := commands.AgentTask{Task: t.Key(), SpecVersion: t.SpecVersion, Pid: t.Pid, State: commands.AgentRunning}
		if at.Pid == 0 {
			s.pid++
			at.Pid = s.pid
		}
		switch r := s.rng.IntN(40); {
		case r == 0:
			at.State, at.ExitCode = commands.AgentFinished, 0
		case r == 1:
			at.State, at.ExitCode, at.Message = commands.AgentFailed, 1, "exit status 1"
		case r == 2 && t.State == projections.TaskRunning:
			at.State, at.Reason = commands.AgentEvicted, "oom"
		case r == 3 && t.State == projections.TaskRunning:
			s.pid++
			at.Pid, at.Restarts, at.ExitCode = s.pid, 1, 2 // restarted in place
		case r == 4 && t.State == projections.TaskRunning:
			continue // vanished: lost
		case r < 8 && t.State == projections.TaskScheduled:
			at.State = commands.AgentStarting
		}
		cmd.Tasks = append(cmd.Tasks, at)
		if t.State == projections.TaskRunning && s.rng.IntN(2) == 0 {
			use := s.rng.Float64()
			window.Tasks = append(window.Tasks, &events.TaskUsage{User: t.Job.User, Job: t.Job.Name, Index: t.Index,
				CpuCoreSeconds: float64(t.Limit.CPUMilli) / 1000 * 300 * use, MemoryBytes: int64(float64(t.Limit.MemoryBytes) * use * 0.8),
				MemoryMaxBytes: int64(float64(t.Limit.MemoryBytes) * use)})
		}
	}
	if len(window.Tasks) > 0 {
		cmd.Usage = &window
	}
	s.do(cmd)
}

func (s *Sim) liveJob() *projections.Job {
	user := s.user(s.rng.IntN(s.cfg.Users))
	jobs := s.S.JobsOf(user)
	for range 4 {
		if len(jobs) == 0 {
			return nil
		}
		if j := jobs[s.rng.IntN(len(jobs))]; !j.Dead() {
			return j
		}
	}
	return nil
}

func (s *Sim) update() {
	j := s.liveJob()
	if j == nil {
		return
	}
	cmd := commands.UpdateJob{Meta: s.meta(j.User)}
	switch s.rng.IntN(4) {
	case 0: // a new binary: rolls
		sp := cloneSpec(j.Spec())
		sp.Args = []string{fmt.Sprintf("--v=%d", j.LatestVersion()+1)}
		cmd.Spec = sp
	case 1: // priority within the band: in place
		sp := cloneSpec(j.Spec())
		lo, hi := projections.BandOf(sp.Priority).Range()
		sp.Priority = lo + int32(s.rng.IntN(int(hi-lo+1)))
		cmd.Spec = sp
	case 2: // scale
		sp := cloneSpec(j.Spec())
		sp.TaskCount = int32(1 + s.rng.IntN(s.cfg.MaxTasks))
		cmd.Spec = sp
	default: // by selector
		cmd.Selector = "team=" + []string{"web", "ads", "search"}[s.rng.IntN(3)]
		cmd.Change = commands.JobChange{SetLabels: map[string]string{"rev": fmt.Sprint(s.rng.IntN(5))}}
	}
	s.do(cmd)
}

func (s *Sim) commitOrRollback() {
	j := s.liveJob()
	if j == nil || j.Update == nil {
		return
	}
	if s.rng.IntN(3) == 0 {
		s.do(commands.RollbackUpdate{Meta: s.meta(j.User), Job: j.Name})
	} else {
		s.do(commands.CommitUpdate{Meta: s.meta(j.User), Job: j.Name})
	}
}

func (s *Sim) step() {
	if j := s.liveJob(); j != nil {
		s.do(commands.RollingUpdateStep{Meta: s.meta(j.User), Job: j.Name})
	}
}

func (s *Sim) kill() {
	j := s.liveJob()
	if j == nil {
		return
	}
	switch s.rng.IntN(3) {
	case 0:
		s.do(commands.KillJob{Meta: s.meta(j.User), Name: j.Name})
	case 1:
		s.do(commands.KillTask{Meta: s.meta(j.User), Job: j.Name, Index: int32(s.rng.IntN(len(j.Tasks) + 1))})
	default:
		s.do(commands.KillJob{Meta: s.meta(j.User), Selector: "tier=canary,team=" + j.Labels()["team"]})
	}
}

func (s *Sim) machineTrouble() {
	m := s.talkingMachine()
	if m == nil {
		return
	}
	switch s.rng.IntN(5) {
	case 0:
		s.do(commands.DrainMachine{Meta: admin, Machine: m.Name, Draining: !m.Draining, Reason: "maintenance"})
	case 1:
		s.do(commands.ReportAgentState{Meta: admin, Machine: m.Name, Unreachable: true, MissedPolls: 3})
	case 2:
		if len(s.machineList()) > s.cfg.Machines/2 {
			s.dirty = s.do(commands.RemoveMachine{Meta: admin, Machine: m.Name, Reason: "retired"})
		}
	default:
		capacity := m.Capacity
		capacity.CPUMilli += 1000
		s.do(commands.UpdateMachine{Meta: admin, Machine: m.Name, Address: m.Address, Capacity: capacity, Attributes: m.Attributes, PortBase: m.PortBase})
	}
}

func (s *Sim) allocs() {
	user := s.user(s.rng.IntN(s.cfg.Users))
	if s.S.AllocSets[projections.JobKey{User: user, Name: "pool"}] == nil {
		s.do(commands.CreateAllocSet{Meta: s.meta(user), Name: "pool", Count: int32(1 + s.rng.IntN(3)), Priority: []int32{0, 4}[s.rng.IntN(2)],
			Resources: projections.Resources{CPUMilli: 2000, MemoryBytes: 4 << 30}})
		return
	}
	s.do(commands.RemoveAllocSet{Meta: s.meta(user), Name: "pool"})
}

func cloneSpec(sp *events.JobSpec) *events.JobSpec {
	return proto.Clone(sp).(*events.JobSpec)
}

// meetsHard judges constraints with the scheduler's matcher.
func meetsHard(attrs map[string]string, cs []*events.Constraint) bool {
	for _, c := range cs {
		if !c.GetSoft() && !scheduler.ConstraintFromEvents(c).Matches(attrs) {
			return false
		}
	}
	return true
}

// SetPriceSheet has an admin set the default price sheet
// (commands.DefaultPriceSheet) as edit changes it (nil: as it is) and
// reports whether it was accepted. With CloseBillingPeriod it adds to a
// history what the random steps do not, so that the Infrastore's tests
// read billing histories without driving the commands themselves.
func (s *Sim) SetPriceSheet(edit func(*events.PriceSheetSet)) bool {
	sheet := commands.DefaultPriceSheet()
	if edit != nil {
		edit(sheet)
	}
	return s.do(commands.SetPriceSheet{Meta: admin, Sheet: sheet})
}

// CloseBillingPeriod has an admin close the billing period that starts at
// start and reports whether it was accepted.
func (s *Sim) CloseBillingPeriod(start time.Time) bool {
	return s.do(commands.CloseBillingPeriod{Meta: admin, Start: start})
}

// Silence cuts one machine with running tasks off, as a partition would:
// no poll reaches its agent and no usage window of it is cut until
// LateUsage hears it again, so its next window spans the silence. It
// returns the machine, or "" when no machine runs a task.
func (s *Sim) Silence() string {
	for _, m := range s.machineList() {
		if m.State == projections.MachineDown || m.UsageEndUS == 0 {
			continue
		}
		for _, t := range m.Tasks() {
			if t.State == projections.TaskRunning {
				s.silent = m.Name
				return m.Name
			}
		}
	}
	return ""
}

// LateUsage has the machine Silence cut off report again, with a usage
// window for its running tasks, leaving their states as they are: what an
// agent that was partitioned sends when it is heard again. The window
// starts where the machine's last one ended, before the silence. It
// reports whether the machine was still up and its report recorded.
func (s *Sim) LateUsage() bool {
	m := s.S.Machines[s.silent]
	s.silent = ""
	if m == nil || m.State == projections.MachineDown {
		return false
	}
	cmd := commands.ReportAgentState{Meta: admin, Machine: m.Name}
	for _, t := range m.Tasks() {
		at := commands.AgentTask{Task: t.Key(), SpecVersion: t.SpecVersion, Pid: t.Pid, State: commands.AgentRunning}
		if t.State != projections.TaskRunning {
			// Placed while it was cut off: its agent is starting it.
			at.Pid, at.State = 0, commands.AgentStarting
		}
		cmd.Tasks = append(cmd.Tasks, at)
	}
	// The agent measured every run since its last window, those that
	// ended during the silence too: half of each one's CPU limit.
	window := commands.UsageWindow{}
	seen := map[projections.TaskKey]bool{}
	for _, sp := range m.RunSpans() {
		t := s.S.Task(sp.User, sp.Job, sp.Index)
		if t == nil || seen[sp.TaskKey] {
			continue
		}
		seen[sp.TaskKey] = true
		stop := s.Now
		if sp.StopUS != 0 {
			stop = time.UnixMicro(sp.StopUS)
		}
		secs := stop.Sub(time.UnixMicro(max(sp.StartUS, m.UsageEndUS))).Seconds()
		window.Tasks = append(window.Tasks, &events.TaskUsage{User: sp.User, Job: sp.Job, Index: sp.Index,
			CpuCoreSeconds: float64(t.Limit.CPUMilli) / 1000 * max(secs, 0) / 2, MemoryBytes: t.Limit.MemoryBytes / 2,
			MemoryMaxBytes: t.Limit.MemoryBytes / 2})
	}
	cmd.Usage = &window
	return s.do(cmd)
}
