package master

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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
}

// Analytics is what the API needs of the Infrastore. It is an interface so
// this package (and its tests) do not link DuckDB.
type Analytics interface {
	Query(ctx context.Context, r *apipb.QueryRequest) (*apipb.QueryReply, error)
	Bill(ctx context.Context, r *apipb.BillRequest) (*apipb.BillReply, error)
}

func (s *Service) Query(ctx context.Context, r *apipb.QueryRequest) (*apipb.QueryReply, error) {
	if _, err := s.actor(ctx); err != nil {
		return nil, err
	}
	if s.Analytics == nil {
		return nil, status.Error(codes.Unimplemented, "this master runs no Infrastore")
	}
	out, err := s.Analytics.Query(ctx, r)
	return out, Status(ctx, err)
}

func (s *Service) Bill(ctx context.Context, r *apipb.BillRequest) (*apipb.BillReply, error) {
	if _, err := s.actor(ctx); err != nil {
		return nil, err
	}
	if s.Analytics == nil {
		return nil, status.Error(codes.Unimplemented, "this master runs no Infrastore")
	}
	out, err := s.Analytics.Bill(ctx, r)
	return out, Status(ctx, err)
}

// NewService returns the API of m.
func NewService(m *Master) *Service { return &Service{m: m, ReadWait: 10 * time.Second} }

// Register adds the service to a gRPC server.
func (s *Service) Register(g *grpc.Server) { apipb.RegisterCellServer(g, s) }

func (s *Service) actor(ctx context.Context) (commands.Actor, error) {
	if id, ok := auth.FromContext(ctx); ok {
		// Authenticated: the admin capability is the certificate's or
		// token's role, or the master's Admins list.
		admin := id.Role == auth.RoleAdmin
		for _, a := range s.m.cfg.Admins {
			admin = admin || a == id.Name || a == "*"
		}
		return commands.Actor{User: id.Name, Admin: admin}, nil
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
		return nil, Status(ctx, err)
	}
	// The link keys the agents' events "link/..." in the same idempotency
	// namespace: a client must not be able to take (or replay) one.
	if strings.HasPrefix(cmd.Metadata().RequestID, "link/") {
		return nil, status.Error(codes.InvalidArgument, "request_id: the prefix link/ is reserved for the master's agent link; use another id")
	}
	res, err := s.m.Do(ctx, cmd)
	if err != nil {
		return nil, Status(ctx, err)
	}
	msg := fmt.Sprintf("appended %d events at %d..%d", res.Events, res.First, res.Last)
	switch {
	case res.Duplicate:
		msg = fmt.Sprintf("already done: this request appended %d..%d before", res.First, res.Last)
	case res.Events == 0:
		msg = "nothing to change"
	}
	return &apipb.MutationReply{FirstPosition: res.First, LastPosition: res.Last, Duplicate: res.Duplicate, Events: int32(res.Events), Message: msg}, nil
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
		c := commands.UpdateJob{Meta: m, Spec: r.Spec, Selector: r.Selector}
		if r.Selector != "" {
			p := r.Priority
			c.Change.Priority = &p
		}
		return c, nil
	})
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

func (s *Service) SetQuota(ctx context.Context, r *apipb.SetQuotaRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.SetQuota{Meta: m, User: r.User, Band: r.Band, Resources: projections.ResourcesOf(r.Resources)}, nil
	})
}

func (s *Service) DrainMachine(ctx context.Context, r *apipb.DrainMachineRequest) (*apipb.MutationReply, error) {
	return s.mutate(ctx, r, func(m commands.Meta) (commands.Command, error) {
		return commands.DrainMachine{Meta: m, Machine: r.Machine, Draining: r.Draining, Reason: r.Reason}, nil
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

// read waits for the request's min position, then runs fn under the read lock.
func (s *Service) read(ctx context.Context, ro *apipb.ReadOptions, fn func(st *projections.State) error) error {
	if _, err := s.actor(ctx); err != nil {
		return err
	}
	if min := ro.GetMinPosition(); min > 0 {
		wctx, cancel := context.WithTimeout(ctx, s.ReadWait)
		err := s.m.WaitFor(wctx, min)
		cancel()
		if err != nil {
			return status.Errorf(codes.Unavailable, "this master has not yet applied position %d: %v", min, err)
		}
	}
	var err error
	s.m.View(func(st *projections.State) { err = fn(st) })
	return Status(ctx, err)
}

func userOr(ctx context.Context, user string) string {
	if user != "" {
		return user
	}
	if id, ok := auth.FromContext(ctx); ok {
		return id.Name
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if u := md.Get(UserHeader); len(u) > 0 {
		return u[0]
	}
	return ""
}

func (s *Service) Get(ctx context.Context, r *apipb.GetRequest) (*apipb.JobView, error) {
	var out *apipb.JobView
	err := s.read(ctx, r.Read, func(st *projections.State) error {
		user := userOr(ctx, r.User)
		j := st.Job(user, r.Job)
		if j == nil {
			return status.Errorf(codes.NotFound, "job %s/%s does not exist (list your jobs with `corral job list`)", user, r.Job)
		}
		limit := int(r.TaskLimit)
		if limit <= 0 {
			limit = 1000
		}
		out = JobView(st, j, int(r.TaskOffset), limit)
		return nil
	})
	return out, err
}

// maxListPage is the most jobs one List answers: a client pages with
// offset for more (Total says how many there are).
const maxListPage = 1000

func (s *Service) List(ctx context.Context, r *apipb.ListRequest) (*apipb.JobList, error) {
	out := &apipb.JobList{}
	err := s.read(ctx, r.Read, func(st *projections.State) error {
		sel, err := projections.ParseSelector(r.Selector)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "selector: %v", err)
		}
		limit := int(r.Limit)
		if limit <= 0 || limit > maxListPage {
			limit = maxListPage
		}
		n := 0
		for _, j := range st.SelectJobs(sel, r.User) {
			if r.State != "" && j.State().String() != r.State {
				continue
			}
			if n >= int(r.Offset) && len(out.Jobs) < limit {
				out.Jobs = append(out.Jobs, JobView(st, j, 0, 0))
			}
			n++
		}
		out.Total, out.Position = int32(n), st.Position
		return nil
	})
	return out, err
}

func (s *Service) ListTasks(ctx context.Context, r *apipb.ListTasksRequest) (*apipb.TaskList, error) {
	out := &apipb.TaskList{}
	err := s.read(ctx, r.Read, func(st *projections.State) error {
		var tasks []*projections.Task
		switch {
		case r.Machine != "":
			m := st.Machines[r.Machine]
			if m == nil {
				return status.Errorf(codes.NotFound, "machine %q is not registered", r.Machine)
			}
			tasks = m.Tasks()
		case r.Job != "":
			user := userOr(ctx, r.User)
			j := st.Job(user, r.Job)
			if j == nil {
				return status.Errorf(codes.NotFound, "job %s/%s does not exist", user, r.Job)
			}
			for _, t := range j.Tasks {
				if t != nil {
					tasks = append(tasks, t)
				}
			}
		default:
			sel, err := projections.ParseSelector(r.Selector)
			if err != nil {
				return status.Errorf(codes.InvalidArgument, "selector: %v", err)
			}
			tasks = st.SelectTasks(sel, r.User)
		}
		limit := int(r.Limit)
		if limit <= 0 {
			limit = 1000
		}
		n := 0
		for _, t := range tasks {
			if r.State != "" && t.State.String() != r.State && t.End.String() != r.State {
				continue
			}
			if n >= int(r.Offset) && len(out.Tasks) < limit {
				out.Tasks = append(out.Tasks, TaskView(st, t))
			}
			n++
		}
		out.Total, out.Position = int32(n), st.Position
		return nil
	})
	return out, err
}

func (s *Service) ListMachines(ctx context.Context, r *apipb.ListMachinesRequest) (*apipb.MachineList, error) {
	out := &apipb.MachineList{}
	err := s.read(ctx, r.Read, func(st *projections.State) error {
		for _, m := range st.SortedMachines() {
			out.Machines = append(out.Machines, s.m.withAgent(MachineView(m)))
		}
		out.Position = st.Position
		return nil
	})
	return out, err
}

func (s *Service) GetQuota(ctx context.Context, r *apipb.GetQuotaRequest) (*apipb.QuotaList, error) {
	out := &apipb.QuotaList{}
	err := s.read(ctx, r.Read, func(st *projections.State) error {
		seen := map[projections.UserBand]bool{}
		add := func(k projections.UserBand) {
			if seen[k] || (r.User != "" && k.User != r.User) {
				return
			}
			seen[k] = true
			out.Quotas = append(out.Quotas, &apipb.QuotaView{User: k.User, Band: k.Band.String(),
				Granted: st.Quotas[k].Proto(), InUse: st.Charged[k].Proto(), Unlimited: k.Band == projections.BestEffort})
		}
		for k := range st.Quotas {
			add(k)
		}
		for k := range st.Charged {
			add(k)
		}
		sortQuotas(out.Quotas)
		return nil
	})
	return out, err
}

func (s *Service) WhyPending(ctx context.Context, r *apipb.WhyPendingRequest) (*apipb.WhyPendingReply, error) {
	var out *apipb.WhyPendingReply
	err := s.read(ctx, r.Read, func(st *projections.State) error {
		user := userOr(ctx, r.User)
		j := st.Job(user, r.Job)
		if j == nil {
			return status.Errorf(codes.NotFound, "job %s/%s does not exist", user, r.Job)
		}
		if s.Explain == nil {
			return status.Error(codes.Unimplemented, "this master runs no scheduler to explain pending tasks")
		}
		out = s.Explain(st, j)
		out.Position = st.Position
		return nil
	})
	return out, err
}

func (s *Service) StateAt(ctx context.Context, r *apipb.StateAtRequest) (*apipb.CellView, error) {
	if _, err := s.actor(ctx); err != nil {
		return nil, err
	}
	var (
		st  *projections.State
		err error
	)
	switch {
	case r.Position > 0 && r.TimeUs != 0:
		return nil, status.Error(codes.InvalidArgument, "give a position or a time, not both")
	case r.Position > 0:
		st, err = projections.StateAt(ctx, s.m.store, r.Position)
	case r.TimeUs != 0:
		st, _, err = projections.StateAtTime(ctx, s.m.store, time.UnixMicro(r.TimeUs))
	default:
		return nil, status.Error(codes.InvalidArgument, "position or time_us: one must be set")
	}
	if err != nil {
		return nil, Status(ctx, err)
	}
	return CellView(st, r.User), nil
}

// filter selects events for Events and Watch.
func filter(r *apipb.EventsRequest) func(e events.Event) bool {
	prefixes := []string{}
	if r.StreamPrefix != "" {
		prefixes = append(prefixes, r.StreamPrefix)
	}
	if r.Job != "" {
		user := r.User
		prefixes = append(prefixes, "job/"+user+"/"+r.Job, "task/"+user+"/"+r.Job+"/")
	}
	return func(e events.Event) bool {
		if r.Type != "" && !strings.EqualFold(e.Type, r.Type) {
			return false
		}
		if r.User != "" && r.Job == "" && e.Actor != r.User && !strings.HasPrefix(e.Stream, "job/"+r.User+"/") && !strings.HasPrefix(e.Stream, "task/"+r.User+"/") {
			return false
		}
		if len(prefixes) == 0 {
			return true
		}
		for _, p := range prefixes {
			if e.Stream == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(e.Stream, p)) || (r.StreamPrefix != "" && strings.HasPrefix(e.Stream, p)) {
				return true
			}
		}
		return false
	}
}

func (s *Service) start(ctx context.Context, r *apipb.EventsRequest) (int64, error) {
	if r.Job != "" && r.User == "" {
		r.User = userOr(ctx, "")
	}
	from := r.FromPosition
	if r.SinceUs != 0 {
		p, err := projections.PositionAt(ctx, s.m.store, time.UnixMicro(r.SinceUs))
		if err != nil {
			return 0, Status(ctx, err)
		}
		from = p + 1
	}
	if from <= 0 {
		from = 1
	}
	return from, nil
}

func (s *Service) Events(ctx context.Context, r *apipb.EventsRequest) (*apipb.EventList, error) {
	if _, err := s.actor(ctx); err != nil {
		return nil, err
	}
	from, err := s.start(ctx, r)
	if err != nil {
		return nil, err
	}
	limit := int(r.Limit)
	if limit <= 0 {
		limit = 1000
	}
	keep := filter(r)
	out := &apipb.EventList{}
	head, err := s.m.store.Head(ctx)
	if err != nil {
		return nil, Status(ctx, err)
	}
	out.Head = head
	for from <= head && len(out.Events) < limit {
		evs, err := s.m.store.Read(ctx, from, 2000)
		if err != nil {
			return nil, Status(ctx, err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			from = e.Position + 1
			if keep(e) {
				out.Events = append(out.Events, EventView(e))
				if len(out.Events) >= limit {
					break
				}
			}
		}
	}
	out.NextPosition = from
	return out, nil
}

func (s *Service) Watch(r *apipb.EventsRequest, stream apipb.Cell_WatchServer) error {
	ctx := stream.Context()
	if _, err := s.actor(ctx); err != nil {
		return err
	}
	from, err := s.start(ctx, r)
	if err != nil {
		return err
	}
	keep := filter(r)
	sub := s.m.store.Subscribe(from - 1)
	for {
		evs, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return Status(ctx, err)
		}
		for _, e := range evs {
			if keep(e) {
				if err := stream.Send(EventView(e)); err != nil {
					return err
				}
			}
		}
	}
}

func (s *Service) Status(ctx context.Context, _ *apipb.StatusRequest) (*apipb.StatusReply, error) {
	out := &apipb.StatusReply{Master: s.m.cfg.Name, Leader: s.m.Leading(), Epoch: s.m.Epoch()}
	var leaderEpoch int64
	s.m.View(func(st *projections.State) {
		out.LeaderName, out.LeaderAddress, out.Position, leaderEpoch = st.Leader, st.LeaderAddress, st.Position, st.LeaderEpoch
		out.Machines, out.Jobs = int64(len(st.Machines)), int64(len(st.Jobs))
		out.TasksPending = int64(st.PendingCount())
		for _, j := range st.Jobs {
			out.TasksRunning += int64(j.LiveTasks())
		}
	})
	s.storeStatus(ctx, out, leaderEpoch)
	return out, nil
}
