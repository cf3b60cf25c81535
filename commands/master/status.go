package master

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// LeaderHeader is set on a follower's refusal of a write: the leader's
// address, so a client can follow it.
const LeaderHeader = "x-corral-leader"

// Status maps an error of the core to a gRPC status a person can act on.
func Status(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !errors.Is(err, context.Canceled) {
		return err
	}
	var nl *ErrNotLeader
	switch {
	case errors.As(err, &nl):
		if nl.Address != "" {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(LeaderHeader, nl.Address))
		}
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled) && ctx.Err() == nil:
		// Not the caller's cancel: this master stopped the write (it is
		// shutting down or lost the lead). Another may take it; whether
		// this one committed, the request id tells.
		return status.Error(codes.Unavailable, "this master stopped writing (shutting down or deposed): "+err.Error()+"; retry with the same request id")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, projections.ErrNoPosition):
		return status.Error(codes.OutOfRange, err.Error())
	case errors.Is(err, events.ErrFenced), errors.Is(err, events.ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	}
	var ce *commands.Error
	if errors.As(err, &ce) {
		code := map[commands.Code]codes.Code{
			commands.InvalidArgument:    codes.InvalidArgument,
			commands.FailedPrecondition: codes.FailedPrecondition,
			commands.PermissionDenied:   codes.PermissionDenied,
			commands.ResourceExhausted:  codes.ResourceExhausted,
			commands.NotFound:           codes.NotFound,
			commands.AlreadyExists:      codes.AlreadyExists,
			commands.Aborted:            codes.Aborted,
			commands.Unauthenticated:    codes.Unauthenticated,
		}[ce.Code]
		if code == codes.OK {
			code = codes.Unknown
		}
		return status.Error(code, ce.Error())
	}
	return status.Error(codes.Unavailable, "the event log is unreachable or failed: "+err.Error()+"; retry with the same request id")
}
