// Package agentsim is a simulated corral agent: it speaks the real Agent
// gRPC service (agentpb) and keeps task state as the real agent reports it,
// but runs no process, creates no cgroup and arms no timer. Tasks start at
// once, run until stopped (or for Config.RunFor), and report synthetic usage
// computed from the clock at each poll. It exists to load the master's link
// with thousands of machines in one process (BenchmarkLink) and to drive
// failure scenarios: Fail makes a task fail, Partition makes polls fail.
//
// Invariants shared with the real agent: requests are validated by the same
// functions (agent.ValidateTaskRef, agent.ValidateTaskSpec); a poll with an
// older epoch or for another machine is refused; events stay in replies
// until acknowledged; a poll's reply is the full state.
//
// A Fleet serves many simulated agents. ServeEach gives each its own
// loopback listener, like real machines; ServeShared puts them all behind
// one listener and routes each poll by PollRequest.machine, for fleets
// larger than the process's file descriptor limit allows (three
// descriptors per agent with listeners of their own).
package agentsim
