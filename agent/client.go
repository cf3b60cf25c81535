package agent

import (
	"fmt"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Client is the master's side of one agent: agentpb.AgentClient on a
// connection of its own.
type Client struct {
	agentpb.AgentClient
	conn *grpc.ClientConn
}

// Dial connects to the agent at addr. Without options the connection is
// plaintext, as on a cell's private network; pass credentials otherwise.
// The connection is made lazily: an unreachable agent fails its polls, not
// Dial.
func Dial(addr string, opts ...grpc.DialOption) (*Client, error) {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", addr, err)
	}
	return &Client{AgentClient: agentpb.NewAgentClient(conn), conn: conn}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// StartRequest, StopRequest, UpdateRequest and ForgetRequest build the
// requests a poll carries. A start names the spec version and the
// submission its run serves (the log position of the task's TaskSubmitted;
// 0: not said).
func StartRequest(id string, task *events.TaskRef, specVersion, submission int64, spec *agentpb.TaskSpec) *agentpb.Request {
	return &agentpb.Request{Id: id, Kind: &agentpb.Request_Start{Start: &agentpb.StartTask{Task: task, SpecVersion: specVersion, Submission: submission, Spec: spec}}}
}

func StopRequest(id string, task *events.TaskRef, reason string, graceMs int64) *agentpb.Request {
	return &agentpb.Request{Id: id, Kind: &agentpb.Request_Stop{Stop: &agentpb.StopTask{Task: task, Reason: reason, GracePeriodMs: graceMs}}}
}

func UpdateRequest(id string, task *events.TaskRef, specVersion int64, spec *agentpb.TaskSpec) *agentpb.Request {
	return &agentpb.Request{Id: id, Kind: &agentpb.Request_Update{Update: &agentpb.UpdateTask{Task: task, SpecVersion: specVersion, Spec: spec}}}
}

func ForgetRequest(id string, task *events.TaskRef) *agentpb.Request {
	return &agentpb.Request{Id: id, Kind: &agentpb.Request_Forget{Forget: &agentpb.ForgetTask{Task: task}}}
}
