package master

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// UserHeader is the gRPC metadata key that names the caller in insecure
// mode only (no auth.Authenticator: development on a trusted machine). With
// one, callers are known by certificate or token and the header is removed
// before the service sees it.
const UserHeader = auth.UserHeader

// LeaderHeader is set on a follower's refusal of a write: the leader's
// address, so a client can follow it.
const LeaderHeader = "x-corral-leader"

// Service implements the Cell API over a Master.
type Service struct {
	apipb.UnimplementedCellServer
	m *Master
	// Explain, when set, explains a job's pending tasks (the scheduler
	// fills it in). It runs under the state's read lock.
	Explain func(s *projections.State, j *projections.Job) *apipb.WhyPendingReply
	// ReadWait bounds how long a read waits for its min_position.
	ReadWait time.Duration
	// Analytics answers Query and Bill (the Infrastore); nil: Unimplemented.
	Analytics Analytics
	// Cell is the cell's name, which Status tells clients: the zone of
	// the tasks' DNS names.
	Cell string
	// Scheduler is the scheduling loop's configuration, which PlanUpdate
	// plans with.
	Scheduler SchedulerConfig
	// Logs reads task logs from the agents (TaskLogs); nil: Unimplemented.
	Logs *AgentLogs
	// StreamCaps bounds the long calls open at once (TaskLogs, Watch),
	// per user and over the cell, from the API and the web UI alike; nil:
	// no caps.
	StreamCaps *auth.StreamCaps

	planSlots   chan struct{} // PlanUpdate calls running at once
	replaySlots chan struct{} // replays of the log for StateAt and StateDiff running at once
}

// maxPlans is how many PlanUpdate calls run at once; more wait.
const maxPlans = 2

// maxReplays is how many replays of the log (a past state each) run at
// once; more wait. Each holds a whole state of the cell in memory.
const maxReplays = 2

// takeSlot waits for a slot of slots until ctx ends; release gives it back.
func takeSlot(ctx context.Context, slots chan struct{}) (release func(), err error) {
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, Status(ctx, ctx.Err())
	}
}

// Analytics is what the API needs of the Infrastore. It is an interface so
// this package (and its tests) do not link DuckDB.
type Analytics interface {
	Query(ctx context.Context, r *apipb.QueryRequest) (*apipb.QueryReply, error)
	Bill(ctx context.Context, r *apipb.BillRequest) (*apipb.BillReply, error)
	// ExportBill writes a bill in chunks through send, in order.
	ExportBill(ctx context.Context, r *apipb.BillRequest, send func([]byte) error) error
	// Costs is a period's showback (the web UI's costs page).
	Costs(ctx context.Context, r *apipb.CostsRequest) (*apipb.CostsReply, error)
}

// Query runs SQL over the Infrastore, for admins only
// (commands.MayQueryCell): its tables hold every user's usage and costs.
func (s *Service) Query(ctx context.Context, r *apipb.QueryRequest) (*apipb.QueryReply, error) {
	a, err := s.actor(ctx)
	if err != nil {
		return nil, err
	}
	// Who may ask comes first, as for bills: a refusal does not depend on
	// whether this master runs an Infrastore.
	if err := commands.MayQueryCell(a); err != nil {
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	if s.Analytics == nil {
		return nil, status.Error(codes.Unimplemented, "this master runs no Infrastore")
	}
	out, err := s.Analytics.Query(ctx, r)
	return out, Status(ctx, err)
}

// Bill answers a period's bill of the costs the caller may read
// (commands.CostsScope): their own, or for an admin anyone's or all.
func (s *Service) Bill(ctx context.Context, r *apipb.BillRequest) (*apipb.BillReply, error) {
	if err := s.scopeCosts(ctx, &r.User); err != nil {
		return nil, err
	}
	if s.Analytics == nil {
		return nil, status.Error(codes.Unimplemented, "this master runs no Infrastore")
	}
	out, err := s.Analytics.Bill(ctx, r)
	return out, Status(ctx, err)
}

// NewService returns the API of m.
func NewService(m *Master) *Service {
	return &Service{m: m, ReadWait: 10 * time.Second, planSlots: make(chan struct{}, maxPlans), replaySlots: make(chan struct{}, maxReplays)}
}

// Register adds the service to a gRPC server.
func (s *Service) Register(g *grpc.Server) { apipb.RegisterCellServer(g, s) }

// ActorOf is who an authenticated identity acts as, on every surface of
// this master (the API, and its HTTP endpoints that take a token): the
// admin capability is the certificate's or token's role, or the master's
// Admins list.
func (m *Master) ActorOf(id auth.Identity) commands.Actor {
	admin := id.Role == auth.RoleAdmin
	for _, a := range m.cfg.Admins {
		admin = admin || a == id.Name || a == "*"
	}
	return commands.Actor{User: id.Name, Admin: admin}
}

func (s *Service) actor(ctx context.Context) (commands.Actor, error) {
	if id, ok := auth.FromContext(ctx); ok {
		return s.m.ActorOf(id), nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	users := md.Get(UserHeader)
	if len(users) == 0 || users[0] == "" {
		return commands.Actor{}, status.Error(codes.Unauthenticated, "the request names no user: set the "+UserHeader+" header (the corral command does this from $CORRAL_USER or $USER)")
	}
	u := users[0]
	admin := false
	for _, a := range s.m.cfg.Admins {
		if a == u || a == "*" {
			admin = true
		}
	}
	return commands.Actor{User: u, Admin: admin}, nil
}

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
