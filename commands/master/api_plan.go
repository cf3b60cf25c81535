package master

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// PlanUpdate answers what the Update request r would do now: the update's
// own events and the scheduling pass after them (placements, preemptions,
// the job's tasks that would wait and why), planned on a copy of the state
// under the read lock. Nothing is appended; the reply's position is the
// one to pass back as if_position.
func (s *Service) PlanUpdate(ctx context.Context, r *apipb.UpdateRequest) (*apipb.PlanReply, error) {
	a, err := s.actor(ctx)
	if err != nil {
		return nil, err
	}
	cmd := updateCommand(commands.Meta{Actor: a}, r)
	var out *apipb.PlanReply
	err = s.read(ctx, nil, func(st *projections.State) error {
		p, err := PlanCommand(st, cmd, s.m.clock(), s.Scheduler)
		if err != nil {
			return Status(ctx, err)
		}
		out = planReply(st, p)
		return nil
	})
	return out, err
}

// planReply words a plan for the API.
func planReply(st *projections.State, p *Plan) *apipb.PlanReply {
	out := &apipb.PlanReply{Position: p.Position}
	var job projections.JobKey
	for _, e := range p.Events {
		out.Changes = append(out.Changes, Summary(e))
		if u, ok := e.Data.(*events.JobUpdated); ok {
			out.SpecVersion, out.Proposed, out.RestartNeeded = u.SpecVersion, u.Spec, u.RestartNeeded
			job = projections.JobKey{User: u.Spec.GetUser(), Name: u.Spec.GetName()}
			if j := st.Jobs[job]; j != nil {
				out.Current, out.CurrentVersion = j.Spec(), j.Current
			}
		}
	}
	if p.Pass != nil {
		for _, pl := range p.Pass.Placements {
			pp := &apipb.PlannedPlacement{Task: fmt.Sprintf("%s/%s/%d", pl.Task.User, pl.Task.Job, pl.Task.Index), Machine: pl.Machine, Score: pl.Score}
			for _, v := range pl.Preempted {
				pp.Preempts = append(pp.Preempts, fmt.Sprintf("%s/%s/%d", v.User, v.Job, v.Index))
			}
			out.Placements = append(out.Placements, pp)
		}
	}
	if j := p.After.Jobs[job]; j != nil {
		ex := NewExplanations()
		if p.Pass != nil {
			ex.set(p.After.Position, p.Pass)
		}
		out.Pending = ex.Explain(p.After, j)
	}
	if out.Current != nil && out.Proposed != nil && proto.Equal(out.Current, out.Proposed) {
		out.SpecVersion = 0
	}
	return out
}
