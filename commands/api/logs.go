package api

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// AgentLogs reads task logs from the agents over the agent protocol
// (agentpb.Agent.Logs), dialing the machine's registered address as the
// link does.
//
// Log streams travel on connections of their own, one per agent address,
// shared by all the streams to that agent and never the link's: a flood
// of streams can fill these connections' flow-control windows and the
// agent's log-stream cap, but polls ride on the link's connections and
// are never queued behind them. One connection per agent, not one per
// stream, keeps the master's file descriptors and buffers bounded by the
// number of machines.
type AgentLogs struct {
	m *master.Master
	// Dial connects to an agent; default agent.Dial (plaintext). Pass the
	// link's, so logs travel with the link's credentials.
	Dial func(addr string) (*agent.Client, error)

	mu     sync.Mutex
	conns  map[string]*agent.Client // by agent address
	closed bool
}

// NewAgentLogs returns the log reader of m's cell.
func NewAgentLogs(m *master.Master, dial func(addr string) (*agent.Client, error)) *AgentLogs {
	if dial == nil {
		dial = func(addr string) (*agent.Client, error) { return agent.Dial(addr) }
	}
	return &AgentLogs{m: m, Dial: dial, conns: map[string]*agent.Client{}}
}

// client is the log connection to the agent at addr, dialed on first use.
func (l *AgentLogs) client(addr string) (*agent.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, status.Error(codes.Unavailable, "this master is stopping")
	}
	if c := l.conns[addr]; c != nil {
		return c, nil
	}
	c, err := l.Dial(addr)
	if err != nil {
		return nil, err
	}
	if l.conns == nil {
		l.conns = map[string]*agent.Client{}
	}
	l.conns[addr] = c
	return c, nil
}

// drop closes c, the connection to addr, unless another replaced it.
func (l *AgentLogs) drop(addr string, c *agent.Client) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns[addr] == c {
		delete(l.conns, addr)
		c.Close()
	}
}

// Close closes the log connections; streams still open on them end.
func (l *AgentLogs) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for addr, c := range l.conns {
		c.Close()
		delete(l.conns, addr)
	}
}

// Stream sends the log req asks for from the agent of machine to send,
// until the agent's stream ends or ctx does. Ending ctx (the client went
// away) cancels the agent's stream too.
func (l *AgentLogs) Stream(ctx context.Context, machine string, req *agentpb.LogsRequest, send func([]byte) error) error {
	var addr string
	l.m.View(func(s *projections.State) {
		if m := s.Machines[machine]; m != nil {
			addr = m.Address
		}
	})
	if addr == "" {
		return status.Errorf(codes.NotFound, "machine %s is not registered any more: its logs are gone with it", machine)
	}
	c, err := l.client(addr)
	if err != nil {
		return status.Errorf(codes.Unavailable, "machine %s: %v", machine, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the agent's stream ends with this call, however it ends
	// An agent that does not answer is the machine's trouble, not this
	// master's: FailedPrecondition, so that clients neither retry another
	// master nor blame their connection to this one.
	agentErr := func(err error) error {
		if s, ok := status.FromError(err); ok && (s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded) {
			return status.Errorf(codes.FailedPrecondition, "machine %s (%s) does not answer, and the task's logs are on it: %s", machine, addr, s.Message())
		}
		return err
	}
	st, err := c.Logs(ctx, req)
	if err != nil {
		if status.Code(err) == codes.Unavailable {
			l.drop(addr, c) // the next stream dials afresh, not after a reconnect backoff
		}
		return agentErr(err)
	}
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return agentErr(err)
		}
		if err := send(chunk.Data); err != nil {
			return err
		}
	}
}

// MayReadLogs says whether ctx's caller may read task t's logs
// (commands.MayReadLogs): PermissionDenied if not. The web UI asks it
// before it starts a live stream; every read asks it again.
func (s *Service) MayReadLogs(ctx context.Context, t projections.TaskKey) error {
	a, err := s.actor(ctx)
	if err != nil {
		return err
	}
	if err := commands.MayReadLogs(a, t.User); err != nil {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return nil
}

// runAsk names an earlier run of a task for a log read: run from 0 (the
// first since its job was submitted), negative back from the latest, or
// previous, the run before the latest (RunOf).
type runAsk struct {
	run      int32
	previous bool
}

// readLogs is the one path of every log read, the API's and the web UI's:
// the caller must be the task's owner or an admin (commands.MayReadLogs),
// holds a slot under StreamCaps for as long as the read lasts, and reads
// from the machine the task runs on, or last ran on, over the log
// connections (AgentLogs). With ask it reads that run from the machine
// where it ran (routeRun).
func (s *Service) readLogs(ctx context.Context, t projections.TaskKey, req *agentpb.LogsRequest, ask *runAsk, send func([]byte) error) error {
	a, err := s.actor(ctx)
	if err != nil {
		return err
	}
	if s.Logs == nil {
		return status.Error(codes.Unimplemented, "this master reads no logs (no agent link configured)")
	}
	if err := commands.MayReadLogs(a, t.User); err != nil {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	var machine string
	var found bool
	s.m.View(func(st *projections.State) {
		if task := st.Task(t.User, t.Job, t.Index); task != nil {
			found = true
			machine = task.Machine
			if machine == "" {
				machine = task.LastMachine
			}
		}
	})
	switch {
	case !found:
		return status.Errorf(codes.NotFound, "task %s does not exist", t)
	case machine == "":
		return status.Errorf(codes.FailedPrecondition, "task %s has never run: it has no logs yet; `corral why %s` says why", t, t.Job)
	}
	var run *TaskRun
	if ask != nil {
		if run, err = s.routeRun(ctx, t, req, *ask); err != nil {
			return err
		}
		if run != nil {
			machine = run.Machine
		}
	}
	release, err := s.StreamCaps.Open(a.User)
	if err != nil {
		return err
	}
	defer release()
	req.Task = &events.TaskRef{User: t.User, Job: t.Job, Index: t.Index}
	err = s.Logs.Stream(ctx, machine, req, send)
	if run != nil && err != nil {
		st := status.Convert(err)
		switch st.Code() {
		case codes.NotFound:
			return status.Errorf(codes.FailedPrecondition, "run %d of task %s ran on machine %s, which no longer keeps its logs: %s (an agent keeps an ended task's sandbox for its retention, and a log's last window only)",
				run.Number, t, run.Machine, st.Message())
		case codes.FailedPrecondition:
			return status.Errorf(codes.FailedPrecondition, "run %d of task %s ran on machine %s: %s", run.Number, t, run.Machine, st.Message())
		}
	}
	return err
}

// routeRun points req at the run ask names (TaskRuns, read from the
// task's stream in the log): the run's placement and number on the
// machine where it ran. It answers nil, leaving req as it is, for the
// latest run, which the task's machine serves as any read. An error names
// the run, the machine and why its logs cannot be read: no such run, an
// ended run followed, its machine removed or down.
func (s *Service) routeRun(ctx context.Context, t projections.TaskKey, req *agentpb.LogsRequest, ask runAsk) (*TaskRun, error) {
	evs, err := s.m.Store().ReadStream(ctx, events.TaskStream(t.User, t.Job, t.Index))
	if err != nil {
		return nil, master.Status(ctx, err)
	}
	run, latest, err := RunOf(TaskRuns(evs), ask.run, ask.previous)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "task %s: %v", t, err)
	}
	if latest {
		return nil, nil
	}
	if req.Follow {
		return nil, status.Errorf(codes.InvalidArgument, "follow: run %d of task %s has ended (%s on %s); it writes no more", run.Number, t, run.Ended, run.Machine)
	}
	var gone, down bool
	s.m.View(func(st *projections.State) {
		m := st.Machines[run.Machine]
		gone, down = m == nil, m != nil && m.State == projections.MachineDown
	})
	switch {
	case gone:
		return nil, status.Errorf(codes.FailedPrecondition, "run %d of task %s ran on machine %s, which was removed from the cell: its logs went with it", run.Number, t, run.Machine)
	case down:
		return nil, status.Errorf(codes.FailedPrecondition, "run %d of task %s ran on machine %s, which is down: its logs are on it, out of reach until it is up again", run.Number, t, run.Machine)
	}
	req.Previous, req.Run, req.PlacementsBack = false, run.AgentRun, int32(run.PlacementsBack)
	return &run, nil
}

// TailLogs is the end of a task's stdout or stderr, at most maxBytes (the
// web UI's webui.Logs), read as TaskLogs reads it.
func (s *Service) TailLogs(ctx context.Context, t projections.TaskKey, stream string, maxBytes int) ([]byte, error) {
	if stream != "stdout" && stream != "stderr" {
		return nil, status.Errorf(codes.InvalidArgument, "stream %q: want stdout or stderr", stream)
	}
	var out []byte
	err := s.readLogs(ctx, t, &agentpb.LogsRequest{Stderr: stream == "stderr", TailBytes: int64(maxBytes)}, nil, func(b []byte) error {
		out = append(out, b...)
		return nil
	})
	return out, err
}

// FollowLogs sends what a task writes to its stdout or stderr from now
// on, until ctx ends (the web UI's webui.Logs), read as TaskLogs reads it.
func (s *Service) FollowLogs(ctx context.Context, t projections.TaskKey, stream string, send func([]byte) error) error {
	if stream != "stdout" && stream != "stderr" {
		return status.Errorf(codes.InvalidArgument, "stream %q: want stdout or stderr", stream)
	}
	return s.readLogs(ctx, t, &agentpb.LogsRequest{Stderr: stream == "stderr", Follow: true, OnlyNew: true}, nil, send)
}

// TaskLogs streams a task's log from its machine's agent: the machine it
// runs on, or last ran on; an earlier run's (previous, run) from the
// machine where that run ran. Only the task's owner or an admin may read
// it: logs hold what the task prints, which specs and events do not.
func (s *Service) TaskLogs(r *apipb.TaskLogsRequest, stream apipb.Cell_TaskLogsServer) error {
	ctx := stream.Context()
	user := userOr(ctx, r.User)
	t := projections.TaskKey{User: user, Job: r.Job, Index: r.Index}
	req := &agentpb.LogsRequest{Stderr: r.Stderr, TailLines: r.TailLines, Follow: r.Follow}
	var ask *runAsk
	if r.Previous || r.Run != nil {
		if r.Previous && r.Run != nil {
			return status.Error(codes.InvalidArgument, "run: give previous or run, not both")
		}
		ask = &runAsk{run: r.GetRun(), previous: r.Previous}
	}
	return s.readLogs(ctx, t, req, ask, func(b []byte) error { return stream.Send(&apipb.LogChunk{Data: b}) })
}

// RunLogs is the end of an earlier run's stdout or stderr, at most
// maxBytes (the web UI's task page), read as TaskLogs reads it: run from
// 0, the first since its job was submitted.
func (s *Service) RunLogs(ctx context.Context, t projections.TaskKey, run int32, stream string, maxBytes int) ([]byte, error) {
	if stream != "stdout" && stream != "stderr" {
		return nil, status.Errorf(codes.InvalidArgument, "stream %q: want stdout or stderr", stream)
	}
	var out []byte
	err := s.readLogs(ctx, t, &agentpb.LogsRequest{Stderr: stream == "stderr", TailBytes: int64(maxBytes)}, &runAsk{run: run}, func(b []byte) error {
		out = append(out, b...)
		return nil
	})
	return out, err
}

// TaskRunsOf is a task's runs since its job was submitted (TaskRuns), for
// whoever may read its logs (commands.MayReadLogs): where each ran is
// where its logs are.
func (s *Service) TaskRunsOf(ctx context.Context, t projections.TaskKey) ([]TaskRun, error) {
	if err := s.MayReadLogs(ctx, t); err != nil {
		return nil, err
	}
	evs, err := s.m.Store().ReadStream(ctx, events.TaskStream(t.User, t.Job, t.Index))
	if err != nil {
		return nil, master.Status(ctx, err)
	}
	return TaskRuns(evs), nil
}
