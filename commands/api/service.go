package api

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/projections"
)

// UserHeader is the gRPC metadata key that names the caller in insecure
// mode only (no auth.Authenticator: development on a trusted machine). With
// one, callers are known by certificate or token and the header is removed
// before the service sees it.
const UserHeader = auth.UserHeader

// Service implements the Cell API over a Master.
type Service struct {
	apipb.UnimplementedCellServer
	m *master.Master
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
	Scheduler master.SchedulerConfig
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
		return nil, master.Status(ctx, ctx.Err())
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
	return out, master.Status(ctx, err)
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
	return out, master.Status(ctx, err)
}

// NewService returns the API of m.
func NewService(m *master.Master) *Service {
	return &Service{m: m, ReadWait: 10 * time.Second, planSlots: make(chan struct{}, maxPlans), replaySlots: make(chan struct{}, maxReplays)}
}

// Register adds the service to a gRPC server.
func (s *Service) Register(g *grpc.Server) { apipb.RegisterCellServer(g, s) }

func (s *Service) actor(ctx context.Context) (commands.Actor, error) {
	if id, ok := auth.FromContext(ctx); ok {
		return s.m.ActorOf(id), nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	users := md.Get(UserHeader)
	if len(users) == 0 || users[0] == "" {
		return commands.Actor{}, status.Error(codes.Unauthenticated, "the request names no user: set the "+UserHeader+" header (the corral command does this from $CORRAL_USER or $USER)")
	}
	// A header names a user, never a role: the admin capability comes
	// from the master's Admins list alone.
	return s.m.ActorOf(auth.Identity{Name: users[0]}), nil
}
