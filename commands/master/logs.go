package master

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// AgentLogs reads task logs from the agents over the agent protocol
// (agentpb.Agent.Logs), dialing the machine's registered address as the
// link does.
type AgentLogs struct {
	m *Master
	// Dial connects to an agent; default agent.Dial (plaintext). Pass the
	// link's, so logs travel with the link's credentials.
	Dial func(addr string) (*agent.Client, error)
}

// NewAgentLogs returns the log reader of m's cell.
func NewAgentLogs(m *Master, dial func(addr string) (*agent.Client, error)) *AgentLogs {
	if dial == nil {
		dial = func(addr string) (*agent.Client, error) { return agent.Dial(addr) }
	}
	return &AgentLogs{m: m, Dial: dial}
}

// Stream sends the log req asks for from the agent of machine to send,
// until the agent's stream ends or ctx does.
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
	c, err := l.Dial(addr)
	if err != nil {
		return status.Errorf(codes.Unavailable, "machine %s: %v", machine, err)
	}
	defer c.Close()
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

// Tail is the end of a task's stdout or stderr, at most maxBytes (the web
// UI's webui.Logs).
func (l *AgentLogs) Tail(ctx context.Context, machine string, t projections.TaskKey, stream string, maxBytes int) ([]byte, error) {
	if stream != "stdout" && stream != "stderr" {
		return nil, fmt.Errorf("stream %q: want stdout or stderr", stream)
	}
	var out []byte
	err := l.Stream(ctx, machine, &agentpb.LogsRequest{Task: &events.TaskRef{User: t.User, Job: t.Job, Index: t.Index},
		Stderr: stream == "stderr", TailBytes: int64(maxBytes)}, func(b []byte) error {
		out = append(out, b...)
		return nil
	})
	return out, err
}

// Follow sends what a task writes to its stdout or stderr from now on,
// until ctx ends (the web UI's webui.Logs).
func (l *AgentLogs) Follow(ctx context.Context, machine string, t projections.TaskKey, stream string, send func([]byte) error) error {
	if stream != "stdout" && stream != "stderr" {
		return fmt.Errorf("stream %q: want stdout or stderr", stream)
	}
	return l.Stream(ctx, machine, &agentpb.LogsRequest{Task: &events.TaskRef{User: t.User, Job: t.Job, Index: t.Index},
		Stderr: stream == "stderr", Follow: true, OnlyNew: true}, send)
}

// TaskLogs streams a task's log from its machine's agent: the machine it
// runs on, or last ran on. Only the task's owner or an admin may read it:
// logs hold what the task prints, which specs and events do not.
func (s *Service) TaskLogs(r *apipb.TaskLogsRequest, stream apipb.Cell_TaskLogsServer) error {
	ctx := stream.Context()
	a, err := s.actor(ctx)
	if err != nil {
		return err
	}
	if s.Logs == nil {
		return status.Error(codes.Unimplemented, "this master reads no logs (no agent link configured)")
	}
	user := userOr(ctx, r.User)
	if !a.Admin && a.User != user {
		return status.Errorf(codes.PermissionDenied, "%s may read only their own tasks' logs, not %s's: that needs the admin capability", a.User, user)
	}
	var machine string
	var found bool
	s.m.View(func(st *projections.State) {
		if t := st.Task(user, r.Job, r.Index); t != nil {
			found = true
			machine = t.Machine
			if machine == "" {
				machine = t.LastMachine
			}
		}
	})
	switch {
	case !found:
		return status.Errorf(codes.NotFound, "task %s/%s/%d does not exist", user, r.Job, r.Index)
	case machine == "":
		return status.Errorf(codes.FailedPrecondition, "task %s/%s/%d has never run: it has no logs yet; `corral why %s` says why", user, r.Job, r.Index, r.Job)
	}
	req := &agentpb.LogsRequest{Task: &events.TaskRef{User: user, Job: r.Job, Index: r.Index}, Stderr: r.Stderr,
		TailLines: r.TailLines, Follow: r.Follow, Previous: r.Previous}
	return s.Logs.Stream(ctx, machine, req, func(b []byte) error { return stream.Send(&apipb.LogChunk{Data: b}) })
}
