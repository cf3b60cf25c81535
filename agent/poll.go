package agent

import (
	"github.com/corralhq/corral/agent/agentpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AcceptPoll is the agent's rule for a master's poll, for the agent, the
// cell simulation and agentsim alike: a poll for another machine is
// refused (two cells' masters must not drive one agent), and so is one
// from an epoch older than one already seen (a deposed leader). The error
// is a FailedPrecondition status: the master stops polling it as a leader.
func AcceptPoll(machine string, seenEpoch int64, req *agentpb.PollRequest) error {
	if req.GetMachine() != "" && req.GetMachine() != machine {
		return status.Errorf(codes.FailedPrecondition, "this agent runs machine %q, not %q", machine, req.GetMachine())
	}
	if req.GetEpoch() < seenEpoch {
		return status.Errorf(codes.FailedPrecondition, "epoch %d is older than epoch %d already seen: the master was deposed", req.GetEpoch(), seenEpoch)
	}
	return nil
}
