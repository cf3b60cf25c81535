package agent

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Run is the agent's main loop, for the `corral agent` command: it starts
// an Agent on cfg, serves the Agent service on cfg.ListenAddr, registers the
// machine with the master at cfg.MasterAddr (retrying while the master is
// unreachable, and again whenever no poll came for cfg.ReregisterAfter),
// and returns when ctx is done. Tasks keep running after Run returns (the
// next agent on the same data dir adopts them) unless cfg.StopTasksOnExit
// is set: then every task is stopped first.
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
		addr = lis.Addr().String()
	}
	if a.cfg.HTTPAddr != "" {
		stopHTTP, err := a.serveHTTP(a.cfg.HTTPAddr)
		if err != nil {
			lis.Close()
			return err
		}
		defer stopHTTP()
	}
	srv := grpc.NewServer(a.cfg.ServerOptions...)
	agentpb.RegisterAgentServer(srv, a)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	a.log.Info("agent serving", "addr", lis.Addr().String(), "master", a.cfg.MasterAddr)
	if a.cfg.OnListen != nil {
		a.cfg.OnListen(lis.Addr().String())
	}
	if a.cfg.MasterAddr != "" {
		go a.registerLoop(ctx, addr)
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("serving the Agent service: %w", err)
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		srv.Stop()
	}
	if a.cfg.StopTasksOnExit {
		// No poll is served any more: the state saved by Close says KILLED,
		// and the next agent on the data dir reports it to the master.
		sctx, cancel := context.WithTimeout(context.Background(), a.cfg.DefaultGrace+10*time.Second)
		defer cancel()
		if err := a.StopAll(sctx, a.cfg.DefaultGrace); err != nil {
			return fmt.Errorf("stopping tasks on exit: %w", err)
		}
	}
	return nil
}

// registerLoop registers the machine until the master accepts it, then
// again whenever the master has not polled for ReregisterAfter: a master
// that lost the machine (a new cell, a wiped store) learns it again.
func (a *Agent) registerLoop(ctx context.Context, addr string) {
	backoff := time.Second
	registered := time.Time{}
	for {
		a.mu.Lock()
		lastPoll := a.lastPoll
		a.mu.Unlock()
		due := registered.IsZero() ||
			(time.Since(registered) > a.cfg.ReregisterAfter && time.Since(lastPoll) > a.cfg.ReregisterAfter)
		wait := a.cfg.ReregisterAfter / 4
		if due {
			reply, err := a.register(ctx, addr)
			if err != nil {
				a.log.Warn("registering with the master", "master", a.cfg.MasterAddr, "err", err, "retry_in", backoff)
				wait = backoff
				backoff = min(2*backoff, 30*time.Second)
			} else {
				a.log.Info("registered", "master", a.cfg.MasterAddr, "cell", reply.Cell, "epoch", reply.Epoch)
				registered, backoff = time.Now(), time.Second
				a.mu.Lock()
				if reply.Cell != "" && a.cell == "" {
					a.cell = reply.Cell
					a.markDirty()
				}
				a.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// register makes one attempt on a connection of its own: registering is
// rare, and a fresh connection does not inherit the backoff of one that
// failed while the master was down.
func (a *Agent) register(ctx context.Context, addr string) (*agentpb.RegisterReply, error) {
	opts := a.cfg.MasterDialOptions
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(a.cfg.MasterAddr, opts...)
	if err != nil {
		return nil, fmt.Errorf("Config.MasterAddr: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return agentpb.NewMasterClient(conn).Register(ctx, a.MachineInfo(addr))
}
