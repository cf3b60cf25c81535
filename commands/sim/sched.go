package sim

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// simSched is the leader's scheduling loop (master.SchedulerLoop): on news
// or every interval, the real adapter (master.BuildCell) and the real pass
// (scheduler.Schedule, seeded by the log position), proposed as one
// PlaceTasks; rolling updates stepped while any job updates.
type simSched struct {
	m           *Master
	term        int
	sched       *scheduler.Scheduler
	limiter     *scheduler.RescheduleLimiter
	lastPlanned int64
	busy        bool
	Passes      int
}

const (
	schedInterval = 200 * time.Millisecond
	crashMemory   = 5 * time.Minute
)

var schedAdmin = commands.Meta{Actor: commands.Actor{User: "scheduler", Admin: true}}

func newSched(m *Master) *simSched {
	return &simSched{m: m, term: m.term, sched: scheduler.New(scheduler.DefaultConfig()),
		limiter: scheduler.NewRescheduleLimiter(50, 500, 0.5), lastPlanned: -1}
}

func (s *simSched) live() bool { return s.m.term == s.term && s.m.sched == s }

func (s *simSched) start() {
	var tick func()
	tick = func() {
		if !s.live() {
			return
		}
		s.run(true)
		s.m.at(schedInterval, tick)
	}
	tick()
}

// run is one turn of the loop; retry is the interval's tick, which retries
// pending work even without news.
func (s *simSched) run(retry bool) {
	if retry {
		s.lastPlanned = -1
	}
	if s.busy {
		return
	}
	s.m.view(func(st *projections.State) {
		if !s.live() || s.busy {
			return
		}
		position := st.Position
		updating := false
		for _, j := range st.SortedJobs() {
			if j.Update != nil && !j.Dead() {
				updating = true
				break
			}
		}
		var cmd *commands.PlaceTasks
		if position != s.lastPlanned && (st.PendingCount() > 0 || len(st.PendingAllocs()) > 0) {
			cell := BuildCell(st, s.m.now(), s.limiter)
			if len(cell.Pending) > 0 {
				s.lastPlanned = position
				s.Passes++
				cmd = placeCommand(s.sched.Schedule(cell, uint64(position)))
			}
		}
		if cmd == nil && !updating {
			return
		}
		s.busy = true
		step := func() {
			if !updating || !s.live() {
				s.busy = false
				return
			}
			s.m.do(commands.RollingUpdateStep{Meta: schedAdmin}, func(master.Result, error) { s.busy = false })
		}
		if cmd == nil {
			step()
			return
		}
		s.m.do(*cmd, func(_ master.Result, err error) {
			if err != nil && commands.CodeOf(err) != commands.Aborted {
				s.m.logf("placing tasks: %v", err)
			}
			step()
		})
	})
}

// BuildCell is master.BuildCell with each machine's tasks in key order: the
// adapter ranges over a map, and the pass's choice between equal victims
// follows their order, so a replay needs one.
func BuildCell(st *projections.State, now time.Time, limiter *scheduler.RescheduleLimiter) *scheduler.Cell {
	cell := master.BuildCell(st, now, crashMemory, limiter)
	for _, m := range cell.Machines {
		slices.SortFunc(m.Tasks, func(a, b scheduler.PlacedTask) int {
			return cmp.Or(cmp.Compare(a.Ref.User, b.Ref.User), cmp.Compare(a.Ref.Job, b.Ref.Job), cmp.Compare(a.Ref.Index, b.Ref.Index))
		})
	}
	return cell
}

// allocJob marks a pending alloc in the scheduler's input, as
// commands/master's adapter names it.
const allocJob = "\x00alloc/"

// placeCommand is the plan as one PlaceTasks (master's placeCommand).
func placeCommand(plan *scheduler.Plan) *commands.PlaceTasks {
	if len(plan.Placements) == 0 {
		return nil
	}
	cmd := &commands.PlaceTasks{Meta: schedAdmin}
	for _, p := range plan.Placements {
		if name, ok := strings.CutPrefix(p.Task.Job, allocJob); ok {
			cmd.Allocs = append(cmd.Allocs, commands.AllocPlacement{User: p.Task.User, Set: name, Index: p.Task.Index, Machine: p.Machine, MachineVersion: p.MachineVersion, Score: p.Score})
			continue
		}
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
