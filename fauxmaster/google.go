package fauxmaster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/agentlink"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler/googletrace"
)

// GoogleStart is when the trace's time 0 falls: its first record, May 2011.
var GoogleStart = time.Date(2011, 5, 1, 19, 0, 0, 0, time.UTC)

// GoogleOptions shapes the cell a trace becomes.
type GoogleOptions struct {
	// Share keeps a share of the trace's machines (drawn by the seed) and
	// of its jobs (by their IDs), for a smaller cell of the same load; 0
	// or 1: all of it.
	Share float64
	Seed  uint64
}

// GoogleTrace turns the public Google trace into a recorded cell: its
// machines (each trace machine a shape of the published mix, drawn by the
// seed), a generous quota per user and band, and its task events as the
// events corral's cell would have logged: a job submitted at its first
// task's submission with as many tasks as the trace names, each task's
// submissions, placements (the trace's machine), evictions, failures,
// finishes, kills (by the user) and losses. The trace's own decisions are
// the recording; a replay makes its submissions and kills again and places
// with corral's scheduler.
//
// What the trace does not have is assumed: the machines' sizes (the mix,
// googletrace.CPU and Memory), a job's tasks submitted together (the trace
// submits them one by one), every task of a job asking for its own request
// (overrides), no constraints (not in these files).
func GoogleTrace(dir string, opt GoogleOptions) (*projections.State, []events.Event, error) {
	var rows []googletrace.TaskEvent
	if err := googletrace.ReadTaskEvents(dir, func(e googletrace.TaskEvent) error {
		rows = append(rows, e)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	share := opt.Share
	if share <= 0 || share > 1 {
		share = 1
	}
	sl := sliceTrace(rows, share, opt.Seed)
	jobTasks := map[int64]int32{} // highest index + 1
	for _, e := range rows {
		if sl.keepJob(e.JobID) {
			jobTasks[e.JobID] = max(jobTasks[e.JobID], e.Index+1)
		}
	}

	st := projections.New()
	st.TimeUS = GoogleStart.UnixMicro()
	r := &traceRecorder{slice: sl, jobTasks: jobTasks, users: map[string]string{},
		jobs: map[int64]*events.JobSpec{}, tasks: map[traceTask]*traceTaskState{}}
	shapes := googletrace.Shapes(len(sl.kept), opt.Seed)
	slices.Sort(sl.kept)
	for i, id := range sl.kept {
		name := fmt.Sprintf("m%d", id)
		r.add(0, "root", events.MachineStream(name), &events.MachineRegistered{Machine: name, Address: name + ":7070",
			Capacity: &events.Resources{CpuMilli: shapes[i][0], MemoryBytes: shapes[i][1], DiskBytes: 1 << 40, Ports: 1000}, PortBase: 20000})
	}
	// Quotas: batch without bound; prod as much as each user's prod jobs
	// ever held at once (a job holds its tasks' requests from its
	// submission to its last task's end), scaled down together if they
	// would exceed the cell, as prod quota may not.
	for _, q := range googleQuotas(rows, sl.keepJob, jobTasks, r.userOf, shapes) {
		r.add(0, "root", events.QuotaStream(q.User), q)
	}
	for _, e := range rows {
		if sl.keepJob(e.JobID) {
			r.record(e)
		}
	}
	// Events of one instant in the trace may come out of time order across
	// jobs; the log is in time order.
	evs := r.evs
	slices.SortStableFunc(evs, func(a, b events.Event) int { return a.OccurredAt.Compare(b.OccurredAt) })
	for i := range evs {
		evs[i].Position = int64(i + 1)
	}
	return st, evs, nil
}

// traceSlice is the share of a trace's machines and jobs a cell keeps.
type traceSlice struct {
	share  float64
	kept   []int64 // machine IDs
	isKept map[int64]bool
}

// sliceTrace keeps a share of every machine the trace names, in the order
// it names them (drawn by seed); a placement on a machine left out goes to
// one kept (by its ID), so the slice holds the load of its share.
func sliceTrace(rows []googletrace.TaskEvent, share float64, seed uint64) *traceSlice {
	var machineIDs []int64
	seen := map[int64]bool{}
	for _, e := range rows {
		if e.Machine != 0 && !seen[e.Machine] {
			seen[e.Machine] = true
			machineIDs = append(machineIDs, e.Machine)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x747261636500))
	kept := slices.Clone(machineIDs)
	if share < 1 {
		rng.Shuffle(len(kept), func(i, j int) { kept[i], kept[j] = kept[j], kept[i] })
		kept = kept[:max(1, int(float64(len(kept))*share))]
	}
	isKept := map[int64]bool{}
	for _, id := range kept {
		isKept[id] = true
	}
	return &traceSlice{share: share, kept: kept, isKept: isKept}
}

// machineOf names the kept machine that takes trace machine id's load.
func (sl *traceSlice) machineOf(id int64) string {
	if !sl.isKept[id] {
		id = sl.kept[uint64(id)%uint64(len(sl.kept))]
	}
	return fmt.Sprintf("m%d", id)
}

// keepJob reports whether the slice keeps the job, whole.
func (sl *traceSlice) keepJob(job int64) bool {
	return sl.share == 1 || float64(uint64(job)*0x9e3779b97f4a7c15>>11)/float64(1<<53) < sl.share
}

type traceTask struct {
	job   int64
	index int32
}

const (
	taskNone = iota
	taskPending
	taskPlaced
	taskEnded
)

type traceTaskState struct {
	state   int
	machine string
}

// traceRecorder turns a trace's rows into the events corral would have
// logged.
type traceRecorder struct {
	slice    *traceSlice
	jobTasks map[int64]int32
	evs      []events.Event
	users    map[string]string // trace user hash: corral user
	jobs     map[int64]*events.JobSpec
	tasks    map[traceTask]*traceTaskState
}

func (r *traceRecorder) add(us int64, actor, stream string, p events.Payload) {
	e := events.New(stream, time.UnixMicro(GoogleStart.UnixMicro()+us).UTC(), p)
	e.Actor = actor
	e.Position = int64(len(r.evs) + 1)
	r.evs = append(r.evs, e)
}

func (r *traceRecorder) userOf(hash string) string {
	u := r.users[hash]
	if u == "" {
		u = fmt.Sprintf("u%d", len(r.users)+1)
		r.users[hash] = u
	}
	return u
}

// record adds the events of one row of a kept job.
func (r *traceRecorder) record(e googletrace.TaskEvent) {
	u := r.userOf(e.User)
	spec := r.jobs[e.JobID]
	if spec == nil {
		if e.Kind != googletrace.Submit && e.Kind != googletrace.Schedule {
			return // a task that ends before the trace shows it start
		}
		spec = &events.JobSpec{Name: fmt.Sprintf("j%d", e.JobID), User: u, Priority: min(max(e.Priority, 0), events.MaxPriority),
			TaskCount: r.jobTasks[e.JobID], Command: "/bin/true", Resources: request(e),
			Restart: &events.RestartPolicy{Mode: "on-failure", MaxRestarts: 100}, Overrides: map[int32]*events.TaskOverride{}}
		r.jobs[e.JobID] = spec
		r.add(e.TimeUS, u, events.JobStream(u, spec.Name), &events.JobSubmitted{Spec: spec, SpecVersion: 1})
	}
	if e.HasRequest && !sameRequest(request(e), spec.Resources) && spec.Overrides[e.Index] == nil {
		spec.Overrides[e.Index] = &events.TaskOverride{Resources: request(e)}
	}
	k := traceTask{e.JobID, e.Index}
	ts := r.tasks[k]
	if ts == nil {
		ts = &traceTaskState{}
		r.tasks[k] = ts
	}
	stream := events.TaskStream(u, spec.Name, e.Index)
	submit := func(reason string) {
		r.add(e.TimeUS, u, stream, &events.TaskSubmitted{User: u, Job: spec.Name, Index: e.Index, SpecVersion: 1, Reason: reason})
		ts.state, ts.machine = taskPending, ""
	}
	switch e.Kind {
	case googletrace.Submit:
		switch ts.state {
		case taskNone:
			submit("new")
		case taskEnded:
			submit("rescheduled")
		}
	case googletrace.Schedule:
		name := r.slice.machineOf(e.Machine)
		if e.Machine == 0 || ts.state == taskPlaced {
			return
		}
		if ts.state != taskPending {
			submit("new")
		}
		r.add(e.TimeUS, "scheduler", stream, &events.TaskScheduled{User: u, Job: spec.Name, Index: e.Index, Machine: name, SpecVersion: 1})
		r.add(e.TimeUS, agentlink.Meta.Actor.User, stream, &events.TaskStarted{User: u, Job: spec.Name, Index: e.Index, Machine: name})
		ts.state, ts.machine = taskPlaced, name
	case googletrace.Evict, googletrace.Fail, googletrace.Finish, googletrace.Kill, googletrace.Lost:
		r.end(e, u, spec.Name, stream, ts)
	}
}

// end adds the event that ends a task's run the way the row says.
func (r *traceRecorder) end(e googletrace.TaskEvent, u, job, stream string, ts *traceTaskState) {
	if ts.state == taskNone || ts.state == taskEnded {
		return
	}
	if ts.state == taskPending && e.Kind != googletrace.Kill {
		return // the trace ends a task it never placed: nothing ran
	}
	m := ts.machine
	switch e.Kind {
	case googletrace.Evict:
		r.add(e.TimeUS, "scheduler", stream, &events.TaskEvicted{User: u, Job: job, Index: e.Index, Machine: m, Reason: "preempted"})
	case googletrace.Fail:
		r.add(e.TimeUS, agentlink.Meta.Actor.User, stream, &events.TaskFailed{User: u, Job: job, Index: e.Index, Machine: m, ExitCode: 1})
	case googletrace.Finish:
		r.add(e.TimeUS, agentlink.Meta.Actor.User, stream, &events.TaskFinished{User: u, Job: job, Index: e.Index, Machine: m})
	case googletrace.Kill:
		r.add(e.TimeUS, u, stream, &events.TaskKilled{User: u, Job: job, Index: e.Index, Machine: m, Reason: "killed by its user"})
	case googletrace.Lost:
		r.add(e.TimeUS, agentlink.Meta.Actor.User, stream, &events.TaskLost{User: u, Job: job, Index: e.Index, Machine: m, Reason: "lost"})
	}
	ts.state, ts.machine = taskEnded, ""
}

func request(e googletrace.TaskEvent) *events.Resources {
	return &events.Resources{CpuMilli: max(int64(e.CPU*googletrace.CPU), 1), MemoryBytes: max(int64(e.Memory*googletrace.Memory), 1<<20)}
}

func sameRequest(a, b *events.Resources) bool {
	return a.GetCpuMilli() == b.GetCpuMilli() && a.GetMemoryBytes() == b.GetMemoryBytes()
}

// googleQuotas are the quotas a trace's users need: batch without bound,
// prod (production and monitoring) as much as each user's prod jobs held
// at their peak, scaled down together to fit the cell.
func googleQuotas(rows []googletrace.TaskEvent, keepJob func(int64) bool, jobTasks map[int64]int32, userOf func(string) string, shapes [][2]int64) []*events.QuotaSet {
	type job struct {
		user     string
		band     string
		cpu, mem int64
		live     int32 // tasks not ended
	}
	jobs := map[int64]*job{}
	held := map[[2]string][2]int64{}
	peak := map[[2]string][2]int64{}
	ended := map[[2]int64]bool{}
	for _, e := range rows {
		if !keepJob(e.JobID) {
			continue
		}
		j := jobs[e.JobID]
		if j == nil {
			if e.Kind != googletrace.Submit && e.Kind != googletrace.Schedule {
				continue
			}
			r := request(e)
			j = &job{user: userOf(e.User), band: events.BandOf(min(max(e.Priority, 0), events.MaxPriority)).String(),
				cpu: r.CpuMilli * int64(jobTasks[e.JobID]), mem: r.MemoryBytes * int64(jobTasks[e.JobID]), live: jobTasks[e.JobID]}
			jobs[e.JobID] = j
			k := [2]string{j.user, j.band}
			h := held[k]
			h[0], h[1] = h[0]+j.cpu, h[1]+j.mem
			held[k] = h
			p := peak[k]
			peak[k] = [2]int64{max(p[0], h[0]), max(p[1], h[1])}
		}
		t := [2]int64{e.JobID, int64(e.Index)}
		switch e.Kind {
		case googletrace.Finish, googletrace.Kill:
			if !ended[t] {
				ended[t] = true
				if j.live--; j.live == 0 {
					k := [2]string{j.user, j.band}
					h := held[k]
					held[k] = [2]int64{h[0] - j.cpu, h[1] - j.mem}
				}
			}
		case googletrace.Submit:
			if ended[t] {
				ended[t] = false
				j.live++
			}
		}
	}
	var capacity, prod [2]int64
	for _, s := range shapes {
		capacity[0], capacity[1] = capacity[0]+s[0], capacity[1]+s[1]
	}
	for k, p := range peak {
		if k[1] == "production" || k[1] == "monitoring" {
			prod[0], prod[1] = prod[0]+p[0], prod[1]+p[1]
		}
	}
	scale := 1.0
	for d := range 2 {
		if prod[d] > capacity[d] {
			scale = min(scale, float64(capacity[d])/float64(prod[d]))
		}
	}
	var out []*events.QuotaSet
	for k, p := range peak {
		switch k[1] {
		case "production", "monitoring":
			out = append(out, &events.QuotaSet{User: k[0], Band: k[1],
				Resources: &events.Resources{CpuMilli: int64(float64(p[0]) * scale), MemoryBytes: int64(float64(p[1]) * scale)}})
		case "batch":
			out = append(out, &events.QuotaSet{User: k[0], Band: k[1],
				Resources: &events.Resources{CpuMilli: 1 << 50, MemoryBytes: 1 << 60, DiskBytes: 1 << 60, Ports: 1 << 30}})
		}
	}
	slices.SortFunc(out, func(a, b *events.QuotaSet) int { return strings.Compare(a.User+"/"+a.Band, b.User+"/"+b.Band) })
	return out
}
