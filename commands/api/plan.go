package api

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// PlanUpdate answers what the Update request r would do now: the update's
// own events and the scheduling pass after them (placements, preemptions,
// the job's tasks that would wait and why), planned on a copy of the state
// under the read lock. Nothing is appended; the reply's position is the
// one to pass back as if_position. A job that does not live is planned as
// its submission, as is any job when r asks for that (submit).
func (s *Service) PlanUpdate(ctx context.Context, r *apipb.UpdateRequest) (*apipb.PlanReply, error) {
	a, err := s.actor(ctx)
	if err != nil {
		return nil, err
	}
	if r.AtPosition != 0 || r.AtTimeUs != 0 {
		return s.planAt(ctx, commands.Meta{Actor: a}, r)
	}
	m := commands.Meta{Actor: a}
	if r.Submit && r.Spec == nil {
		return nil, status.Error(codes.InvalidArgument, "spec: a planned submission needs the job's spec")
	}
	// Plans run a few at a time, and off the state's lock: the copy is
	// taken under it (milliseconds for 100,000 tasks), the pass runs on
	// the copy, so that no plan holds up the writer.
	release, err := takeSlot(ctx, s.planSlots)
	if err != nil {
		return nil, err
	}
	defer release()
	var snapshot []byte
	if err := s.read(ctx, nil, func(st *projections.State) error {
		snapshot = projections.Encode(st)
		return nil
	}); err != nil {
		return nil, err
	}
	cp, err := projections.Decode(snapshot)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "copying the state to plan on: %v", err)
	}
	p, err := master.PlanCommand(cp, plannedCommand(cp, m, r), s.m.Now(), s.Scheduler)
	if err != nil {
		return nil, master.Status(ctx, err)
	}
	return planReply(p), nil
}

// planAt plans r on the cell as the log had it at a past point, by the
// same command and scheduling pass, at that point's time: the update of a
// job that lived then, or else its submission. The replay is the plan's
// own copy.
func (s *Service) planAt(ctx context.Context, m commands.Meta, r *apipb.UpdateRequest) (*apipb.PlanReply, error) {
	if r.Spec == nil {
		return nil, status.Error(codes.InvalidArgument, "spec: a plan at a past point needs the job's spec")
	}
	if r.IfPosition != 0 {
		return nil, status.Error(codes.InvalidArgument, "if_position: a plan at a past point cannot be applied")
	}
	release, err := takeSlot(ctx, s.planSlots)
	if err != nil {
		return nil, err
	}
	defer release()
	st, err := s.stateAtPoint(ctx, r.AtPosition, r.AtTimeUs, "at_position", "at_time_us")
	if err != nil {
		return nil, err
	}
	p, err := master.PlanCommand(st, plannedCommand(st, m, r), time.UnixMicro(st.TimeUS), s.Scheduler)
	if err != nil {
		return nil, master.Status(ctx, err)
	}
	return planReply(p), nil
}

// plannedCommand is the command a plan of r runs on st: the submission of
// r's spec when asked (submit) or when the job does not live in st, else
// the update r asks for.
func plannedCommand(st *projections.State, m commands.Meta, r *apipb.UpdateRequest) commands.Command {
	if r.Spec != nil {
		// The job UpdateJob would change: r's user's, else the caller's.
		user := r.User
		if user == "" {
			user = m.Actor.User
		}
		if j := st.Jobs[projections.JobKey{User: user, Name: r.Spec.GetName()}]; r.Submit || j == nil || j.Dead() {
			return commands.SubmitJob{Meta: m, Spec: r.Spec}
		}
	}
	return updateCommand(m, r)
}

// planReply words a plan for the API.
func planReply(p *master.Plan) *apipb.PlanReply {
	out := &apipb.PlanReply{Position: p.Position}
	var job projections.JobKey
	for _, e := range p.Events {
		out.Changes = append(out.Changes, Summary(e))
		switch u := e.Data.(type) {
		case *events.JobUpdated:
			out.SpecVersion, out.Proposed, out.RestartNeeded = u.SpecVersion, u.Spec, u.RestartNeeded
			job = projections.JobKey{User: u.Spec.GetUser(), Name: u.Spec.GetName()}
			if j := p.After.Jobs[job]; j != nil {
				out.Current, out.CurrentVersion = j.SpecOf(u.PreviousVersion), u.PreviousVersion
			}
		case *events.JobSubmitted:
			out.SpecVersion, out.Proposed = u.SpecVersion, u.Spec
			job = projections.JobKey{User: u.Spec.GetUser(), Name: u.Spec.GetName()}
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
		ex := master.NewExplanations()
		if p.Pass != nil {
			ex.Set(p.After.Position, p.Pass)
		}
		out.Pending = ex.Explain(p.After, j)
	}
	if out.Current != nil && out.Proposed != nil && proto.Equal(out.Current, out.Proposed) {
		out.SpecVersion = 0
	}
	return out
}
