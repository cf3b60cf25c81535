package api

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

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
	return master.Status(ctx, err)
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
			if r.State != "" && t.State.String() != r.State && t.End.String() != r.State && (r.State != "stopping" || t.StoppingOn == "") {
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
		now := s.m.Now()
		for _, m := range st.SortedMachines() {
			v := withAgent(s.m, MachineView(m))
			v.DrainHolds = DrainHoldLines(st, m, now)
			out.Machines = append(out.Machines, v)
		}
		out.Position = st.Position
		if h, ok := s.m.LossHold(); ok {
			out.LossHeldSinceUs, out.LossHeldMissing, out.LossHeldMachines = h.Since.UnixMicro(), int32(h.Missing), int32(h.Machines)
		}
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
	if r.AtPosition != 0 || r.AtTimeUs != 0 {
		return s.whyPendingAt(ctx, r)
	}
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

// whyPendingAt answers why a job's tasks waited at a past point: the
// reasons and hints the scheduler recorded, as the log had them then,
// grouped by reason and hint.
func (s *Service) whyPendingAt(ctx context.Context, r *apipb.WhyPendingRequest) (*apipb.WhyPendingReply, error) {
	if _, err := s.actor(ctx); err != nil {
		return nil, err
	}
	st, err := s.stateAtPoint(ctx, r.AtPosition, r.AtTimeUs, "at_position", "at_time_us")
	if err != nil {
		return nil, err
	}
	user := userOr(ctx, r.User)
	j := st.Job(user, r.Job)
	if j == nil {
		if st.Position == 0 {
			return nil, status.Errorf(codes.NotFound, "job %s/%s did not exist then: the log was still empty", user, r.Job)
		}
		return nil, status.Errorf(codes.NotFound, "job %s/%s did not exist at position %d", user, r.Job, st.Position)
	}
	return WhyPendingAt(st, j), nil
}

// WhyPendingAt words the reasons recorded for a job's pending tasks in s.
func WhyPendingAt(s *projections.State, j *projections.Job) *apipb.WhyPendingReply {
	out := &apipb.WhyPendingReply{User: j.User, Job: j.Name, Pending: int32(j.PendingTasks()), Position: s.Position}
	if j.PendingTasks() == 0 {
		out.Summary = fmt.Sprintf("at position %d, job %s/%s had no pending task (%s)", s.Position, j.User, j.Name, j.State())
		return out
	}
	type key struct{ reason, hint string }
	groups := map[key]*apipb.PendingClass{}
	var order []key
	unexplained := 0
	for _, t := range j.Tasks {
		if t == nil || t.State != projections.TaskPending {
			continue
		}
		if t.WaitReason == "" {
			unexplained++
			continue
		}
		k := key{t.WaitReason, t.WaitHint}
		g := groups[k]
		if g == nil {
			g = &apipb.PendingClass{Summary: t.WaitReason}
			if t.WaitHint != "" {
				g.Hints = []string{t.WaitHint}
			}
			groups[k] = g
			order = append(order, k)
		}
		g.TaskIndexes = append(g.TaskIndexes, t.Index)
	}
	for _, k := range order {
		out.Classes = append(out.Classes, groups[k])
	}
	out.Summary = fmt.Sprintf("at position %d (%s), %d task(s) of %s/%s were pending", s.Position,
		time.UnixMicro(s.TimeUS).UTC().Format(time.RFC3339), j.PendingTasks(), j.User, j.Name)
	if unexplained > 0 {
		out.Summary += fmt.Sprintf("; %d not yet explained by a scheduling pass", unexplained)
	}
	return out
}

func (s *Service) StateAt(ctx context.Context, r *apipb.StateAtRequest) (*apipb.CellView, error) {
	if _, err := s.actor(ctx); err != nil {
		return nil, err
	}
	st, err := s.stateAtPoint(ctx, r.Position, r.TimeUs, "position", "time_us")
	if err != nil {
		return nil, err
	}
	return CellView(st, r.User), nil
}

// stateAtPoint replays the log up to a position or a time, whichever the
// request gave (the fields are named in errors), a few replays at a time.
func (s *Service) stateAtPoint(ctx context.Context, pos, timeUs int64, posField, timeField string) (*projections.State, error) {
	switch {
	case pos < 0:
		return nil, status.Errorf(codes.InvalidArgument, "%s: %d is not a log position", posField, pos)
	case pos > 0 && timeUs != 0:
		return nil, status.Errorf(codes.InvalidArgument, "give %s or %s, not both", posField, timeField)
	case pos == 0 && timeUs == 0:
		return nil, status.Errorf(codes.InvalidArgument, "%s or %s: one must be set", posField, timeField)
	}
	if timeUs != 0 {
		if err := commands.CheckPastMoment(timeField, time.UnixMicro(timeUs), s.m.Now()); err != nil {
			return nil, master.Status(ctx, err)
		}
	}
	release, err := takeSlot(ctx, s.replaySlots)
	if err != nil {
		return nil, err
	}
	defer release()
	var st *projections.State
	if pos > 0 {
		if st, err = projections.StateAt(ctx, s.m.Store(), pos); err != nil {
			err = fmt.Errorf("%s: %w", posField, err) // which end was beyond the head
		}
	} else {
		st, _, err = projections.StateAtTime(ctx, s.m.Store(), time.UnixMicro(timeUs))
	}
	if err != nil {
		return nil, master.Status(ctx, err)
	}
	return st, nil
}

// maxStateChanges bounds the changes one StateDiff lists; the counts cover
// them all.
const maxStateChanges = 100_000

// StateDiff lists what differs between the cell at two points of its log:
// both states come from the log by the same replay as StateAt, and
// projections.Diff compares them.
func (s *Service) StateDiff(ctx context.Context, r *apipb.StateDiffRequest) (*apipb.StateDiffView, error) {
	if _, err := s.actor(ctx); err != nil {
		return nil, err
	}
	limit := int(r.Limit)
	switch {
	case limit < 0 || limit > maxStateChanges:
		return nil, status.Errorf(codes.InvalidArgument, "limit: %d is outside 0-%d", limit, maxStateChanges)
	case limit == 0:
		limit = 1000
	}
	from, err := s.stateAtPoint(ctx, r.FromPosition, r.FromTimeUs, "from_position", "from_time_us")
	if err != nil {
		return nil, err
	}
	to, err := s.stateAtPoint(ctx, r.ToPosition, r.ToTimeUs, "to_position", "to_time_us")
	if err != nil {
		return nil, err
	}
	if from.Position > to.Position {
		return nil, status.Errorf(codes.InvalidArgument, "from (position %d) is after to (position %d)", from.Position, to.Position)
	}
	changes := projections.Diff(from, to, r.User, auth.RedactSpec)
	out := &apipb.StateDiffView{
		FromPosition: from.Position, FromTimeUs: from.TimeUS,
		ToPosition: to.Position, ToTimeUs: to.TimeUS,
		Total: int32(len(changes)), Counts: map[string]int32{},
	}
	for i, ch := range changes {
		out.Counts[ch.Kind+" "+ch.What]++
		if i < limit {
			out.Changes = append(out.Changes, &apipb.StateChange{Kind: ch.Kind, Name: ch.Name, What: ch.What, Before: ch.Before, After: ch.After})
		}
	}
	return out, nil
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
		if w, ok := e.Data.(*events.PendingReasonsChanged); ok && r.StreamPrefix == "" && r.User != "" {
			// Why tasks wait is recorded for many jobs at once, on the
			// scheduler's stream: it belongs to each job it names.
			return waitsOf(w, r.User, r.Job)
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

// waitsOf reports whether a record of why tasks wait names a task of the
// user (and of the job, when one is given).
func waitsOf(w *events.PendingReasonsChanged, user, job string) bool {
	for _, r := range w.Reasons {
		if r.User == user && (job == "" || r.Job == job) {
			return true
		}
	}
	return false
}

func (s *Service) start(ctx context.Context, r *apipb.EventsRequest) (int64, error) {
	if r.Job != "" && r.User == "" {
		r.User = userOr(ctx, "")
	}
	from := r.FromPosition
	if r.SinceUs != 0 {
		p, err := projections.PositionAt(ctx, s.m.Store(), time.UnixMicro(r.SinceUs))
		if err != nil {
			return 0, master.Status(ctx, err)
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
	head, err := s.m.Store().Head(ctx)
	if err != nil {
		return nil, master.Status(ctx, err)
	}
	out.Head = head
	for from <= head && len(out.Events) < limit {
		evs, err := s.m.Store().Read(ctx, from, 2000)
		if err != nil {
			return nil, master.Status(ctx, err)
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
	a, err := s.actor(ctx)
	if err != nil {
		return err
	}
	from, err := s.start(ctx, r)
	if err != nil {
		return err
	}
	// A watch lasts as long as its reader: it holds a slot under the same
	// caps as log streams.
	release, err := s.StreamCaps.Open(a.User)
	if err != nil {
		return err
	}
	defer release()
	keep := filter(r)
	sub := s.m.Store().Subscribe(from - 1)
	for {
		evs, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return master.Status(ctx, err)
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

// WhoAmI answers with the caller as actor sees it, the identity every
// other call of the same credentials acts as.
func (s *Service) WhoAmI(ctx context.Context, _ *apipb.WhoAmIRequest) (*apipb.WhoAmIReply, error) {
	a, err := s.actor(ctx)
	if err != nil {
		return nil, err
	}
	out := &apipb.WhoAmIReply{User: a.User, Role: string(auth.RoleUser), Via: "header"}
	if a.Admin {
		out.Role = string(auth.RoleAdmin)
	}
	if id, ok := auth.FromContext(ctx); ok {
		out.Via = id.Via
	}
	return out, nil
}

func (s *Service) Status(ctx context.Context, _ *apipb.StatusRequest) (*apipb.StatusReply, error) {
	out := &apipb.StatusReply{Master: s.m.Name(), Leader: s.m.Leading(), Epoch: s.m.Epoch(), Cell: s.Cell}
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
