package agent

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent/agentpb"
)

// LeaderHeader is the trailer in which a follower names the leader (the
// masters' master.LeaderHeader).
const LeaderHeader = "x-corral-leader"

// Run is the agent's main loop, what `corral agent` and `corral up` run: it
// starts an Agent on cfg, serves the Agent service on cfg.ListenAddr (and
// HTTP on cfg.HTTPAddr), registers the machine with the first of
// cfg.Masters that answers, following a follower to the leader it names
// (retrying while none does, and again whenever no poll came for
// cfg.ReregisterAfter), and returns when ctx is done. Tasks keep running
// after Run returns (the next agent on the same data dir adopts them)
// unless cfg.StopTasksOnExit is set: then every task is stopped first.
func Run(ctx context.Context, cfg Config) error {
	a, err := New(cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	lis, err := net.Listen("tcp", a.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("Config.ListenAddr: %w", err)
	}
	addr := a.cfg.AdvertiseAddr
	if addr == "" {
		addr = Advertised(lis.Addr().String())
	}
	if a.cfg.HTTPAddr != "" {
		stopHTTP, err := a.serveHTTP(a.cfg.HTTPAddr)
		if err != nil {
			lis.Close()
			return err
		}
		defer stopHTTP()
	}
	if reg := a.cfg.Metrics; reg != nil {
		wrapped := prometheus.WrapRegistererWith(prometheus.Labels{"machine": a.cfg.Name}, reg)
		if c := a.Collector(); wrapped.Register(c) == nil {
			defer wrapped.Unregister(c)
		}
	}
	srv := grpc.NewServer(a.cfg.ServerOptions...)
	agentpb.RegisterAgentServer(srv, a)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	a.log.Info("agent serving", "addr", addr, "masters", a.cfg.Masters)
	if a.cfg.OnListen != nil {
		a.cfg.OnListen(lis.Addr().String()) // where it listens, not what it advertises
	}
	regCtx, stopReg := context.WithCancel(ctx)
	regDone := make(chan struct{})
	go func() { defer close(regDone); a.registerLoop(regCtx, addr) }()

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
	case <-time.After(5 * time.Second):
		srv.Stop()
	}
	if a.cfg.StopTasksOnExit {
		// No poll is served any more: the state saved by Close says KILLED,
		// and the next agent on the data dir reports it to the master, which
		// puts the tasks back to pending.
		sctx, cancel := context.WithTimeout(context.Background(), a.cfg.DefaultGrace+10*time.Second)
		defer cancel()
		if err := a.StopAll(sctx, a.cfg.DefaultGrace); err != nil {
			return fmt.Errorf("stopping tasks on exit: %w", err)
		}
	}
	if serveErr != nil {
		return fmt.Errorf("serving the Agent service: %w", serveErr)
	}
	return nil
}

// Advertised turns a listener's address into one others can dial: an
// unspecified host (0.0.0.0, ::) becomes this machine's host name.
func Advertised(addr string) string {
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

// registerLoop registers the machine until a master accepts it, then again
// whenever no master has polled for ReregisterAfter: a master that lost the
// machine (a new cell, a wiped store) learns it again. A follower's refusal
// naming the leader is followed at once; an unreachable master costs a
// backoff and a try at the next.
func (a *Agent) registerLoop(ctx context.Context, addr string) {
	if len(a.cfg.Masters) == 0 {
		return
	}
	backoff := 500 * time.Millisecond
	var registered time.Time
	target, next := a.cfg.Masters[0], 1
	for {
		a.mu.Lock()
		lastPoll := a.lastPoll
		a.mu.Unlock()
		due := registered.IsZero() ||
			(time.Since(registered) > a.cfg.ReregisterAfter && time.Since(lastPoll) > a.cfg.ReregisterAfter)
		wait := a.cfg.ReregisterAfter / 4
		if due {
			reply, leader, err := a.register(ctx, target, addr)
			switch {
			case err == nil:
				a.log.Info("registered", "master", target, "cell", reply.Cell, "epoch", reply.Epoch)
				registered, backoff = time.Now(), 500*time.Millisecond
				a.mu.Lock()
				if reply.Cell != "" && a.cell == "" {
					a.cell = reply.Cell
					a.markDirty()
				}
				a.mu.Unlock()
			case ctx.Err() != nil:
				return
			case leader != "" && leader != target:
				a.log.Info("following the leader", "from", target, "to", leader)
				target, wait = leader, 0
			default:
				a.log.Warn("registering with the master", "master", target, "err", err, "retry_in", backoff)
				target = a.cfg.Masters[next%len(a.cfg.Masters)]
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

// register makes one attempt at target on a connection of its own:
// registering is rare, and a fresh connection does not inherit the backoff
// of one that failed while the master was down. On a follower's refusal it
// returns the leader's address.
func (a *Agent) register(ctx context.Context, target, addr string) (*agentpb.RegisterReply, string, error) {
	opts := a.cfg.MasterDialOptions
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("Config.Masters: %s: %w", target, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var trailer metadata.MD
	reply, err := agentpb.NewMasterClient(conn).Register(ctx, a.MachineInfo(addr), grpc.Trailer(&trailer))
	if err != nil && status.Code(err) == codes.Unavailable {
		if l := trailer.Get(LeaderHeader); len(l) > 0 {
			return nil, l[0], err
		}
	}
	return reply, "", err
}
