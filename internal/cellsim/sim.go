package cellsim

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/memstore"
	"github.com/corralhq/corral/projections"
)

// Config shapes one simulated run.
type Config struct {
	Seed     uint64
	Masters  int           // replicas; default 3
	Machines int           // default 6
	Clients  int           // default 2; the first is an admin
	Duration time.Duration // simulated time with faults; default 3 minutes
	// Settle is simulated time after every fault has healed, at the end of
	// which the cell must have converged; default 45 s.
	Settle time.Duration
	// Calm turns every fault off: the cell's own behaviour over a long
	// run (reservations estimated for tasks that outlive their startup).
	Calm bool
	// Trace, when set, receives a line per notable action.
	Trace func(string)
}

// Faults are the seed's fault rates: mean time between faults of each kind
// (zero: never), how long they last, and the network's quality.
type Faults struct {
	MasterCrash, MasterPause, ClockJump time.Duration
	// SameNameRestart: a master is paused and, meanwhile, started again
	// under its name by a supervisor (a second process); the old one
	// resumes later and is killed some time after.
	SameNameRestart                        time.Duration
	StoreDown, StorePartition              time.Duration
	AgentCrash, MachineReboot, AgentIsland time.Duration
	// MasterIsland cuts one master off most machines (its network, not
	// theirs): as leader, its link must hold machine loss.
	MasterIsland       time.Duration
	Loss, SlowMessages float64 // per message
}

// World is one simulated cell.
type World struct {
	cfg    Config
	faults Faults
	rng    *rand.Rand
	now    time.Time
	q      queue
	seq    uint64

	log     *memstore.Log
	db      *node
	masters []*Master
	// ghosts are old processes of masters started again under their name
	// while paused: they run on, as such a process would, until killed.
	ghosts       []*Master
	incarnations int // processes started so far: each gets the next id
	agents       map[string]*Agent
	agentList    []*Agent
	clients      []*Client
	procs        map[int64]*proc
	pid          int64
	cuts         map[link]int
	healing      bool // the end: no new faults

	chk *checker

	// Counters for the report.
	Steps, Messages, Lost, Requests, Refused, GaveUp, Acked int64
	Crashes, Pauses, Jumps, StoreOutages, Partitions        int64
	SameNameRestarts                                        int64
	AgentCrashes, Reboots, Elections                        int64
	// SweptOwn counts processes a restarted agent launched and then killed
	// in its own sweep (see Agent.restart).
	SweptOwn int64
	// Fenced counts appends the store refused for a deposed leader's
	// epoch; Loads, masters starting from the log (newest checkpoint and
	// tail); Checkpoints, checkpoints written.
	Fenced, Loads, Checkpoints int64
	// Landed counts the commands whose events the log holds, by name.
	Landed map[string]int
}

var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// New builds the cell of a seed: its machines registered and the users'
// quotas set in the log, and every process started.
func New(cfg Config) *World {
	if cfg.Masters <= 0 {
		cfg.Masters = 3
	}
	if cfg.Machines <= 0 {
		cfg.Machines = 6
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 2
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 3 * time.Minute
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 45 * time.Second
	}
	w := &World{cfg: cfg, rng: newRand(cfg.Seed), now: epoch0, log: memstore.NewLog(), db: &node{name: "db"},
		agents: map[string]*Agent{}, procs: map[int64]*proc{}, cuts: map[link]int{}, Landed: map[string]int{}}
	w.faults = w.drawFaults()
	w.chk = newChecker(w)
	w.log.OnAppend(w.chk.appended)
	for i := 0; i < cfg.Masters; i++ {
		w.masters = append(w.masters, w.newMaster(fmt.Sprintf("master%d", i)))
	}
	capacity := &events.Resources{CpuMilli: 8000, MemoryBytes: 32 << 30, DiskBytes: 100 << 30, Ports: 100}
	for i := 0; i < cfg.Machines; i++ {
		a := w.newAgent(fmt.Sprintf("m%d", i), capacity, map[string]string{"rack": fmt.Sprintf("r%d", i%2), "kernel": "6.0"})
		w.agents[a.name] = a
		w.agentList = append(w.agentList, a)
	}
	for i := 0; i < cfg.Clients; i++ {
		w.clients = append(w.clients, w.newClient(i))
	}
	w.bootstrap()
	for _, m := range w.masters {
		w.at(m.node, w.between(0, 500*time.Millisecond), m.start)
	}
	for _, c := range w.clients {
		c.start()
	}
	if last := w.agentList[len(w.agentList)-1]; len(w.agentList) > 1 {
		w.at(last.node, w.between(time.Second, 5*time.Second), last.register)
	}
	// An operator upgrades the first machine's kernel and restarts its
	// agent, which registers the change (UpdateMachine) in every run.
	first := w.agentList[0]
	w.at(first.node, w.between(20*time.Second, 40*time.Second), func() {
		first.attrs["kernel"] = "6.1-upgraded"
		first.register()
	})
	w.scheduleFaults()
	return w
}

// drawFaults picks the seed's fault profile: every kind is on in most
// seeds, at rates that differ from seed to seed.
func (w *World) drawFaults() Faults {
	if w.cfg.Calm {
		return Faults{}
	}
	rate := func(mean time.Duration) time.Duration {
		if w.rng.IntN(5) == 0 {
			return 0
		}
		return mean/2 + w.between(0, mean)
	}
	return Faults{
		MasterCrash: rate(50 * time.Second), MasterPause: rate(70 * time.Second), ClockJump: rate(90 * time.Second),
		SameNameRestart: rate(100 * time.Second),
		StoreDown:       rate(2 * time.Minute), StorePartition: rate(90 * time.Second),
		AgentCrash: rate(40 * time.Second), MachineReboot: rate(4 * time.Minute), AgentIsland: rate(50 * time.Second),
		Loss: w.rng.Float64() * 0.04, SlowMessages: w.rng.Float64() * 0.02,
		MasterIsland: rate(60 * time.Second),
	}
}

// bootstrap writes what an operator would before the masters start: the
// machines and the quotas, decided by commands.Decide and appended before
// any lease exists (epoch 0).
func (w *World) bootstrap() {
	s := projections.New()
	conn := w.log.Open(func() time.Time { return w.now })
	admin := commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}
	do := func(cmd commands.Command) {
		evs, err := commands.Decide(s, cmd, commands.FixedClock(w.now))
		if err != nil {
			panic(fmt.Sprintf("sim: bootstrap %T: %v", cmd, err))
		}
		res, err := conn.Append(context.Background(), events.AppendRequest{ExpectedPosition: s.Position, Events: evs})
		if err != nil {
			panic(fmt.Sprintf("sim: bootstrap append: %v", err))
		}
		for i := range evs {
			evs[i].Position = res.First + int64(i)
			if err := projections.Apply(s, evs[i]); err != nil {
				panic(err)
			}
		}
	}
	// The last machine joins the running cell: its agent registers it.
	for _, a := range w.agentList[:max(len(w.agentList)-1, 1)] {
		do(commands.RegisterMachine{Meta: admin, Machine: a.name, Address: a.name + ":7070", Capacity: projections.ResourcesOf(a.capacity),
			Attributes: maps.Clone(a.attrs), PortBase: 20000})
	}
	capacity := s.CellCapacity()
	for _, c := range w.clients {
		share := func(num, den int64) projections.Resources {
			return projections.Resources{CPUMilli: capacity.CPUMilli * num / den, MemoryBytes: capacity.MemoryBytes * num / den,
				DiskBytes: capacity.DiskBytes * num / den, Ports: capacity.Ports * num / den}
		}
		n := int64(len(w.clients))
		do(commands.SetQuota{Meta: admin, User: c.user, Band: "production", Resources: share(1, 2*n)})
		do(commands.SetQuota{Meta: admin, User: c.user, Band: "monitoring", Resources: share(1, 4*n)})
		do(commands.SetQuota{Meta: admin, User: c.user, Band: "batch", Resources: share(2, n)})
	}
	// A service nobody touches: its tasks live long enough for their
	// reservations to be estimated (Borg §5.5), faults permitting.
	owner := w.clients[0].user
	do(commands.SubmitJob{Meta: commands.Meta{Actor: commands.Actor{User: owner}}, Spec: &events.JobSpec{
		Name: "steady", Priority: 9, TaskCount: 3, Command: "/bin/app", Env: map[string]string{"SIM_RUN": "forever"},
		Labels:    map[string]string{"tier": "prod"},
		Resources: &events.Resources{CpuMilli: 1000, MemoryBytes: 1 << 30},
		Restart:   &events.RestartPolicy{Mode: "always"},
	}})
}

func (w *World) masterIndex(name string) int {
	for i, m := range w.masters {
		if m.name == name {
			return i
		}
	}
	return -1
}

// Run runs the seed to its end and returns the first invariant that broke,
// or nil.
func (w *World) Run() error {
	end := epoch0.Add(w.cfg.Duration)
	for w.now.Before(end) && w.chk.err == nil {
		if !w.next() {
			break
		}
		w.chk.step()
	}
	if w.chk.err != nil {
		return w.chk.err
	}
	w.heal()
	stop := w.now.Add(w.cfg.Settle)
	for w.now.Before(stop) && w.chk.err == nil {
		if !w.next() {
			break
		}
		w.chk.step()
	}
	if w.chk.err != nil {
		return w.chk.err
	}
	return w.chk.final()
}

// ---- the machines' processes ------------------------------------------------------

// spawn starts a task's process on a's machine with a fate drawn now: a
// batch task finishes (or fails) after a while, a service runs until it
// crashes or is OOM-killed, rarely.
func (w *World) spawn(a *Agent, t *atask) int64 {
	w.pid++
	p := &proc{pid: w.pid, machine: a.name, task: t.key, boot: a.boot, alive: true,
		cpuFrac: 0.1 + 0.8*w.rng.Float64(), memFrac: 0.1 + 0.8*w.rng.Float64()}
	w.procs[p.pid] = p
	if h := t.spec.GetHealthCheck(); h.GetPath() != "" {
		p.healthyAfter = w.between(500*time.Millisecond, 5*time.Second)
		if p.sick = t.spec.GetEnv()["SIM_HEALTH"] == "bad"; p.sick {
			// The agent kills it once more checks failed than allowed.
			after := events.HealthCheckPeriod(h) * time.Duration(h.FailuresAllowed+1)
			w.at(a.node, after, func() {
				if t := a.tasks[p.task]; !w.healing && t != nil && t.pid == p.pid && p.alive && t.state == agentpb.TaskState_TASK_STATE_RUNNING {
					t.msg = fmt.Sprintf("health check failed %d times in a row: GET %s: connection refused", h.FailuresAllowed+1, h.Path)
					a.terminate(t, agent.KillHealth)
				}
			})
		}
	}
	var (
		after time.Duration
		code  int32
		oom   bool
	)
	switch t.spec.GetEnv()["SIM_RUN"] {
	case "forever":
		return p.pid // runs until it is stopped or its machine goes
	case "crash": // a bad binary
		after, code = w.between(200*time.Millisecond, 3*time.Second), 1
	case "batch":
		after = w.between(3*time.Second, 90*time.Second)
		if w.chance(0.2) {
			code = 1
		}
	default:
		after = w.exp(4 * time.Minute)
		code = 1
		oom = w.chance(0.3)
	}
	w.at(nil, after, func() {
		if !w.healing {
			w.procExit(p, code, oom)
		}
	})
	return p.pid
}

// procExit ends a process; its agent, if one runs, notices.
func (w *World) procExit(p *proc, code int32, oom bool) {
	if !p.alive {
		return
	}
	w.kill(p)
	a := w.agents[p.machine]
	w.at(a.node, 0, func() {
		t := a.tasks[p.task]
		if t == nil || t.pid != p.pid {
			return
		}
		a.exited(t, code, oom, !t.adopted)
	})
}

// machineProcs returns the live processes of a machine by pid.
func (w *World) machineProcs(machine string) []*proc {
	var out []*proc
	for _, pid := range slices.Sorted(maps.Keys(w.procs)) {
		if p := w.procs[pid]; p.machine == machine && p.alive {
			out = append(out, p)
		}
	}
	return out
}

// kill ends a process without its agent noticing: a reboot, or an agent
// destroying a container it cannot account for.
func (w *World) kill(p *proc) {
	w.tracef("%s: pid %d (%s) ends", p.machine, p.pid, p.task)
	p.alive = false
	delete(w.procs, p.pid)
}

func (w *World) clock() time.Time { return w.now }

// Hooks from the masters and clients to the checker and the counters.
func (w *World) loaded(m *Master)                          {}
func (w *World) applied(m *Master)                         {}
func (w *World) elected(m *Master, epoch int64)            { w.Elections++ }
func (w *World) acknowledged(id string, res master.Result) { w.Acked++; w.chk.acknowledged(id, res) }
func (w *World) refusedAnswer(id string, err error)        { w.Refused++; w.chk.refusedAnswer(id, err) }

// Summary counts what happened in the run.
func (w *World) Summary() string {
	return fmt.Sprintf("%d steps, %d events in the log, %s", w.Steps, w.log.Head(), w.counts())
}

// add sums another run's counters into w's, for a batch's report.
func (w *World) add(o *World) {
	w.Steps += o.Steps
	w.Messages, w.Lost, w.Requests, w.Refused, w.GaveUp, w.Acked = w.Messages+o.Messages, w.Lost+o.Lost, w.Requests+o.Requests, w.Refused+o.Refused, w.GaveUp+o.GaveUp, w.Acked+o.Acked
	w.Crashes, w.Pauses, w.Jumps, w.StoreOutages, w.Partitions = w.Crashes+o.Crashes, w.Pauses+o.Pauses, w.Jumps+o.Jumps, w.StoreOutages+o.StoreOutages, w.Partitions+o.Partitions
	w.AgentCrashes, w.Reboots, w.Elections, w.SweptOwn = w.AgentCrashes+o.AgentCrashes, w.Reboots+o.Reboots, w.Elections+o.Elections, w.SweptOwn+o.SweptOwn
	w.Fenced, w.Loads, w.Checkpoints = w.Fenced+o.Fenced, w.Loads+o.Loads, w.Checkpoints+o.Checkpoints
	w.SameNameRestarts += o.SameNameRestarts
	if w.Landed == nil {
		w.Landed = map[string]int{}
	}
	for name, n := range o.Landed {
		w.Landed[name] += n
	}
}

func (w *World) counts() string {
	return fmt.Sprintf("%d elections; %d requests (%d acknowledged, %d refused, %d given up); "+
		"%d messages (%d lost); faults: %d master crashes, %d pauses, %d restarts under the same name while paused, %d clock jumps, %d store outages, %d partitions, %d agent crashes, %d reboots; "+
		"%d appends fenced, %d loads from the log, %d checkpoints; %d processes an agent launched while restarting and killed in its own sweep",
		w.Elections, w.Requests, w.Acked, w.Refused, w.GaveUp, w.Messages, w.Lost,
		w.Crashes, w.Pauses, w.SameNameRestarts, w.Jumps, w.StoreOutages, w.Partitions, w.AgentCrashes, w.Reboots, w.Fenced, w.Loads, w.Checkpoints, w.SweptOwn)
}

// Log is the cell's event log, to read what the run recorded (the
// Fauxmaster's tests replay it).
func (w *World) Log() *memstore.Log { return w.log }
