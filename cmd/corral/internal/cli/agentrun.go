package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/commands/ops"
)

// agentRun is one machine's agent as the corral command runs it: the
// agent package's Agent, served on its own listener, registered with
// whichever of the cell's masters leads.
//
// It does what agent.Run does, and also takes several masters: it
// registers with the first that answers, follows a follower's refusal to
// the leader it names (trailer x-corral-leader), and moves on to the next
// master when one is unreachable.
type agentRun struct {
	cfg     agent.Config
	masters []string
	// stopTasks stops every task when the agent stops (corral up);
	// otherwise they keep running for the next agent to adopt.
	stopTasks bool
	// ready is called with the address the agent serves on.
	ready func(addr string)
	log   *slog.Logger
	// http, when set, serves /metrics, /healthz and /readyz.
	http string
	// metrics, when set, gets the agent's series under a machine label
	// (corral up: the master's /metrics shows every agent's).
	metrics prometheus.Registerer
}

// pollTracker serves the Agent service and notes when the master polled.
type pollTracker struct {
	agentpb.UnimplementedAgentServer
	a    *agent.Agent
	last atomic.Int64 // unix nanoseconds of the last poll
}

func (p *pollTracker) Poll(ctx context.Context, req *agentpb.PollRequest) (*agentpb.AgentState, error) {
	p.last.Store(time.Now().UnixNano())
	return p.a.Poll(ctx, req)
}

func (r *agentRun) run(ctx context.Context) error {
	if r.log == nil {
		r.log = slog.Default()
	}
	r.cfg.Logger = r.log
	listen := r.cfg.ListenAddr
	a, err := agent.New(r.cfg)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			_ = a.Close()
		}
	}()
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", listen, err)
	}
	addr := r.cfg.AdvertiseAddr
	if addr == "" {
		addr = advertised(lis.Addr().String())
	}
	if r.http != "" {
		stopHTTP, err := serveAgentHTTP(a, r.http, r.log)
		if err != nil {
			lis.Close()
			return err
		}
		defer stopHTTP()
	}
	defer registerAgentMetrics(r.metrics, a, r.cfg.Name)()
	polls := &pollTracker{a: a}
	// Recovery outermost: a panic in a poll answers Internal, and the tasks'
	// agent serves on.
	srv := grpc.NewServer(append(ops.NewRecovery(r.log, nil).ServerOptions(), r.cfg.ServerOptions...)...)
	agentpb.RegisterAgentServer(srv, polls)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	log := r.log.With("machine", r.cfg.Name)
	log.Info("agent serving", "addr", addr, "masters", r.masters)
	if r.ready != nil {
		r.ready(addr)
	}
	regCtx, stopReg := context.WithCancel(ctx)
	regDone := make(chan struct{})
	go func() { defer close(regDone); r.registerLoop(regCtx, a, polls, addr, log) }()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	stopReg()
	<-regDone
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(3 * time.Second):
		srv.Stop()
	}
	if r.stopTasks {
		// No poll is served any more, so the master does not see these
		// ends now; the next agent on this data dir reports the tasks
		// killed, and the master puts them back to pending.
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := a.StopAll(sctx, 5*time.Second)
		cancel()
		if err != nil {
			log.Error("stopping tasks", "err", err)
		}
	}
	closed = true
	if err := a.Close(); err != nil {
		log.Warn("closing the agent", "err", err)
	}
	if serveErr != nil {
		return fmt.Errorf("serving the Agent service: %w", serveErr)
	}
	return nil
}

// advertised turns a listener's address into one others can dial: an
// unspecified host (0.0.0.0, ::) becomes this machine's host name.
func advertised(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			return net.JoinHostPort(h, port)
		}
	}
	return addr
}

// registerLoop registers the machine until a master accepts it, and again
// whenever no poll has come for ReregisterAfter.
func (r *agentRun) registerLoop(ctx context.Context, a *agent.Agent, polls *pollTracker, addr string, log *slog.Logger) {
	reregister := r.cfg.ReregisterAfter
	if reregister <= 0 {
		reregister = 30 * time.Second
	}
	backoff := 500 * time.Millisecond
	var registered time.Time
	target, next := r.masters[0], 1
	for {
		lastPoll := time.Unix(0, polls.last.Load())
		due := registered.IsZero() || (time.Since(registered) > reregister && time.Since(lastPoll) > reregister)
		wait := reregister / 4
		if due {
			reply, leader, err := register(ctx, target, a.MachineInfo(addr), r.cfg.MasterDialOptions...)
			switch {
			case err == nil:
				log.Info("registered", "master", target, "cell", reply.Cell, "epoch", reply.Epoch)
				registered, backoff = time.Now(), 500*time.Millisecond
			case ctx.Err() != nil:
				return
			case leader != "" && leader != target:
				log.Info("following the leader", "from", target, "to", leader)
				target, wait = leader, 0
			default:
				log.Warn("registering with the master", "master", target, "err", err, "retry_in", backoff)
				target = r.masters[next%len(r.masters)]
				next++
				wait = backoff
				backoff = min(2*backoff, 15*time.Second)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// register makes one attempt on a connection of its own; on a follower's
// refusal it returns the leader's address.
func register(ctx context.Context, target string, info *agentpb.MachineInfo, opts ...grpc.DialOption) (*agentpb.RegisterReply, string, error) {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var trailer metadata.MD
	reply, err := agentpb.NewMasterClient(conn).Register(ctx, info, grpc.Trailer(&trailer))
	if err != nil && status.Code(err) == codes.Unavailable {
		if l := trailer.Get(master.LeaderHeader); len(l) > 0 {
			return nil, l[0], err
		}
	}
	return reply, "", err
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, x := range splitComma(s) {
		if x != "" && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
