package cellsim

import (
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/projections"
)

// simSched is the leader's scheduling loop (master.SchedulerLoop) in
// simulated time: on news or every interval, the real core
// (master.SchedulingCore: the adapter, the pass, the command) under a view,
// its PlaceTasks and RecordPendingReasons proposed, rolling updates stepped
// while any job updates.
type simSched struct {
	m      *Master
	term   int
	core   *master.SchedulingCore
	busy   bool
	Passes int
}

func newSched(m *Master) *simSched {
	return &simSched{m: m, term: m.term, core: master.NewSchedulingCore(master.SchedulerConfig{})}
}

func (s *simSched) live() bool { return s.m.term == s.term && s.m.sched == s }

func (s *simSched) start() {
	var tick func()
	tick = func() {
		if !s.live() {
			return
		}
		s.run(true)
		s.m.at(s.core.Interval(), tick)
	}
	tick()
}

// run is one turn of the loop; retry is the interval's tick, which retries
// pending work even without news.
func (s *simSched) run(retry bool) {
	if retry {
		s.core.Retry()
	}
	if s.busy {
		return
	}
	s.m.view(func(st *projections.State) {
		if !s.live() || s.busy {
			return
		}
		cell, position, rolling := s.core.Input(st, s.m.now())
		// What the pass proposes, in the loop's order: its placements,
		// then why the tasks it left wait.
		var cmds []commands.Command
		if cell != nil {
			s.Passes++
			plan, place := s.core.Plan(cell, position)
			if place != nil {
				cmds = append(cmds, *place)
			}
			if why := s.core.Reasons(plan); why != nil {
				cmds = append(cmds, *why)
			}
		}
		if len(cmds) == 0 && !rolling {
			return
		}
		s.busy = true
		step := func() {
			if !rolling || !s.live() {
				s.busy = false
				return
			}
			s.m.do(commands.RollingUpdateStep{Meta: s.core.Meta()}, func(master.Result, error) { s.busy = false })
		}
		var next func(i int)
		next = func(i int) {
			if i == len(cmds) {
				step()
				return
			}
			s.m.do(cmds[i], func(_ master.Result, err error) {
				if err != nil && commands.CodeOf(err) != commands.Aborted {
					s.m.logf("%s: %v", commands.Name(cmds[i]), err)
				}
				next(i + 1)
			})
		}
		next(0)
	})
}
