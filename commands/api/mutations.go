package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// mutate carries out one mutation: the caller's identity, the command the
// request builds, the write path, and the reply (Status maps refusals).
func (s *Service) mutate(ctx context.Context, r mutation, build func(commands.Meta) (commands.Command, error)) (*apipb.MutationReply, error) {
	a, err := s.actor(ctx)
	if err != nil {
		return nil, err
	}
	m := commands.Meta{Actor: a, RequestID: r.GetRequestId()}
	if m.RequestID != "" {
		m.Fingerprint = fingerprint(r)
	}
	cmd, err := build(m)
	if err != nil {
		return nil, master.Status(ctx, err)
	}
	// The link keys the agents' events "link/..." in the same idempotency
	// namespace: a client must not be able to take (or replay) one.
	if strings.HasPrefix(cmd.Metadata().RequestID, "link/") {
		return nil, status.Error(codes.InvalidArgument, "request_id: the prefix link/ is reserved for the master's agent link; use another id")
	}
	res, err := s.m.Do(ctx, cmd)
	if err != nil {
		return nil, master.Status(ctx, err)
	}
	msg := Touched(res.Appended)
	switch {
	case res.Duplicate:
		msg = fmt.Sprintf("already done: this request appended %d..%d before", res.First, res.Last)
	case res.Events > 0 && len(res.Appended) == 0:
		msg = fmt.Sprintf("appended %d events at %d..%d", res.Events, res.First, res.Last)
	}
	reply := &apipb.MutationReply{FirstPosition: res.First, LastPosition: res.Last, Duplicate: res.Duplicate, Events: int32(res.Events), Message: msg, Actor: a.User}
	for _, e := range res.Appended {
		switch p := e.Data.(type) {
		case *events.JobSubmitted:
			reply.SpecVersion = p.SpecVersion
		case *events.JobUpdated:
			reply.SpecVersion = p.SpecVersion
		case *events.JobUpdatePromoted:
			reply.SpecVersion = p.SpecVersion
		}
	}
	return reply, nil
}

// mutation is a request of a mutating call: each carries a request id.
type mutation interface {
	proto.Message
	GetRequestId() string
}

// fingerprint is a digest of a mutation without its request id: the same id
// sent again with another request is refused rather than taken for a retry
// (commands.Meta.Fingerprint). Secret values arrive sealed deterministically
// (auth.Sealer), so a retry has the same fingerprint.
func fingerprint(r mutation) string {
	c := proto.Clone(r)
	if f := c.ProtoReflect().Descriptor().Fields().ByName("request_id"); f != nil {
		c.ProtoReflect().Clear(f)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(c.ProtoReflect().Descriptor().FullName()))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func (s *Service) Submit(ctx context.Context, r *apipb.SubmitRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.SubmitJob{Meta: m, Spec: r.Spec}, nil
	})
}

func (s *Service) Update(ctx context.Context, r *apipb.UpdateRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return updateCommand(m, r), nil
	})
}

// updateCommand is the UpdateJob an UpdateRequest asks for.
func updateCommand(m commands.Meta, r *apipb.UpdateRequest) commands.UpdateJob {
	c := commands.UpdateJob{Meta: m, Spec: r.Spec, Selector: r.Selector, User: r.User, Job: r.Job, RevertTo: r.RevertTo, IfPosition: r.IfPosition}
	if r.Selector != "" {
		p := r.Priority
		c.Change.Priority = &p
	}
	return c
}

func (s *Service) Kill(ctx context.Context, r *apipb.KillRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.KillJob{Meta: m, User: r.User, Name: r.Job, Selector: r.Selector, Reason: r.Reason}, nil
	})
}

func (s *Service) KillTask(ctx context.Context, r *apipb.KillTaskRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.KillTask{Meta: m, User: r.User, Job: r.Job, Index: r.Index, Reason: r.Reason}, nil
	})
}

func (s *Service) CommitUpdate(ctx context.Context, r *apipb.JobRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.CommitUpdate{Meta: m, User: r.User, Job: r.Job}, nil
	})
}

func (s *Service) RollbackUpdate(ctx context.Context, r *apipb.JobRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.RollbackUpdate{Meta: m, User: r.User, Job: r.Job}, nil
	})
}

func (s *Service) PromoteUpdate(ctx context.Context, r *apipb.JobRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.PromoteUpdate{Meta: m, User: r.User, Job: r.Job}, nil
	})
}

func (s *Service) SetQuota(ctx context.Context, r *apipb.SetQuotaRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.SetQuota{Meta: m, User: r.User, Band: r.Band, Resources: projections.ResourcesOf(r.Resources)}, nil
	})
}

func (s *Service) DrainMachine(ctx context.Context, r *apipb.DrainMachineRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.DrainMachine{Meta: m, Machine: r.Machine, Draining: r.Draining, Force: r.Force, Reason: r.Reason}, nil
	})
}

func (s *Service) RemoveMachine(ctx context.Context, r *apipb.RemoveMachineRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.RemoveMachine{Meta: m, Machine: r.Machine, Reason: r.Reason}, nil
	})
}

func (s *Service) CreateAllocSet(ctx context.Context, r *apipb.CreateAllocSetRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.CreateAllocSet{Meta: m, Name: r.Name, Count: r.Count, Priority: r.Priority,
			Resources: projections.ResourcesOf(r.Resources), Constraints: r.Constraints, Labels: r.Labels}, nil
	})
}

func (s *Service) RemoveAllocSet(ctx context.Context, r *apipb.JobRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.RemoveAllocSet{Meta: m, User: r.User, Name: r.Job}, nil
	})
}
