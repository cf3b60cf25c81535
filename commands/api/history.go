package api

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
)

// maxHistory is the most versions one JobHistory answers.
const maxHistory = 1000

// JobHistory answers a job's spec versions, read from its stream in the
// log: who made each, when, how, and how its update ended. A name used
// again after its job ended starts a new history.
func (s *Service) JobHistory(ctx context.Context, r *apipb.JobHistoryRequest) (*apipb.JobHistoryReply, error) {
	if _, err := s.actor(ctx); err != nil {
		return nil, err
	}
	user := userOr(ctx, r.User)
	if r.Job == "" {
		return nil, status.Error(codes.InvalidArgument, "job: name the job")
	}
	evs, err := s.m.Store().ReadStream(ctx, events.JobStream(user, r.Job))
	if err != nil {
		return nil, master.Status(ctx, err)
	}
	out := History(evs)
	if len(out.Versions) == 0 {
		return nil, status.Errorf(codes.NotFound, "job %s/%s does not exist (list your jobs with `corral job list`)", user, r.Job)
	}
	limit := int(r.Limit)
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, maxHistory)
	if n := len(out.Versions); n > limit {
		out.Versions = out.Versions[n-limit:]
	}
	return out, nil
}

// History folds a job stream's events into its versions since the job's
// last submission, oldest first.
func History(evs []events.Event) *apipb.JobHistoryReply {
	out := &apipb.JobHistoryReply{}
	byVersion := map[int64]*apipb.JobVersionView{}
	add := func(e events.Event, v int64, spec *events.JobSpec, how string, restores int64) *apipb.JobVersionView {
		jv := &apipb.JobVersionView{Version: v, Spec: spec, Actor: e.Actor, AtUs: e.OccurredAt.UnixMicro(), How: how,
			Restores: restores, Position: e.Position}
		out.Versions = append(out.Versions, jv)
		byVersion[v] = jv
		out.Current = v
		return jv
	}
	outcome := func(v int64, o string) {
		if jv := byVersion[v]; jv != nil {
			jv.Outcome = o
		}
	}
	withReason := func(what, why string) string {
		if why == "" {
			return what
		}
		return what + ": " + why
	}
	for _, e := range evs {
		switch p := e.Data.(type) {
		case *events.JobSubmitted:
			out.Versions, byVersion = nil, map[int64]*apipb.JobVersionView{}
			add(e, max(p.SpecVersion, 1), p.Spec, "submitted", 0)
		case *events.JobUpdated:
			add(e, p.SpecVersion, p.Spec, "updated", 0).Outcome = "open"
		case *events.JobUpdateCommitted:
			outcome(p.SpecVersion, withReason("committed", p.Reason))
		case *events.JobUpdateHalted:
			outcome(p.SpecVersion, withReason("halted", p.Reason))
		case *events.JobUpdatePromoted:
			outcome(p.SpecVersion, "canaries promoted")
		case *events.JobUpdateRolledBack:
			how := "rolled back"
			if p.Reason != "" {
				how = "reverted"
			}
			outcome(p.FromVersion, withReason(how, p.Reason))
			var spec *events.JobSpec
			if old := byVersion[p.ToVersion]; old != nil {
				spec = old.Spec
			}
			add(e, p.SpecVersion, spec, how, p.ToVersion)
		}
	}
	out.Total = int32(len(out.Versions))
	return out
}
