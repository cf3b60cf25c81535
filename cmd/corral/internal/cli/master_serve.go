package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/commands/nameservice"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/storeopen"
	"github.com/corralhq/corral/projections"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// masterOptions describe one master replica and what it serves.
type masterOptions struct {
	store     string // URL of the log
	name      string
	listen    string // gRPC
	advertise string
	http      string // "" serves no HTTP
	// httpHosts are the names the web UI is served as, besides IP
	// addresses and localhost (--http-host).
	httpHosts []string
	// webAnonymous serves the web UI without a login (--web-anonymous).
	webAnonymous bool
	dns          string // "" serves no DNS
	// dnsOptional runs on without DNS when its address is taken.
	dnsOptional bool
	cell        string
	admins      []string
	infrastore  string // "" runs no Infrastore
	prices      string // the price sheet file a new cell starts with
	infraLimits infraLimits
	// simLimits bound the web UI's what-if replays (--sim-*).
	simLimits simLimits
	// usageWindow is how often machines' usage becomes an event; 0 is the
	// link's default (5 minutes).
	usageWindow time.Duration
	// pollInterval is how often the link polls each agent; 0: its default.
	pollInterval time.Duration
	log          *slog.Logger
	// auth is how the API is served; nil: insecure (plaintext, the user
	// header trusted).
	auth *masterAuth
	// streams caps the log streams open at once (--max-streams-per-user,
	// --max-streams).
	streams streamFlags
}

// runningMaster is what a started master tells its caller.
type runningMaster struct {
	m               *master.Master
	grpc, http, dns string
	metrics         prometheus.Registerer // what /metrics serves; agents in the same process join it
}

// serveMaster runs a master replica with its gRPC API (Cell and agent
// registration), the leader's scheduler and agent link, and optionally the
// Infrastore's ingestion, HTTP and DNS, until ctx ends. ready is called once
// everything listens.
func (a *app) serveMaster(ctx context.Context, o masterOptions, ready func(*runningMaster)) error {
	log := o.log
	if !nameRE(o.cell) {
		return usageErr("--cell %q: want a DNS label (lowercase letters, digits and '-')", o.cell)
	}
	store, err := storeopen.Open(ctx, o.store, storeopen.Options{})
	if err != nil {
		return fmt.Errorf("opening the event log %s: %w", o.store, err)
	}
	defer store.Close()
	mops := newMasterOps()
	store = mops.store(store)

	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.listen, err)
	}
	defer lis.Close()
	advertise := o.advertise
	if advertise == "" {
		advertise = agent.Advertised(lis.Addr().String())
	}
	authOpts, secrets, linkDial := o.auth.serverOptions(log)
	m, svc, err := newMasterService(ctx, o, store, advertise, linkDial, mops)
	if err != nil {
		return err
	}
	defer svc.Logs.Close()
	if secrets != nil {
		secrets.View = m.View
	}
	inf, stopInfra, err := a.startMasterInfra(ctx, o)
	if err != nil {
		return err
	}
	defer stopInfra()
	if inf != nil {
		svc.Analytics = inf
	}
	mops.watch(m, inf)
	g := grpc.NewServer(append(mops.mm.ServerOptions(log), authOpts...)...)
	svc.Register(g)
	master.NewAgentRegistry(m, o.cell, o.pollInterval).Attach(g)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	srv := &masterServers{ctx: runCtx, stop: stop, grpc: g, errc: make(chan error, 5)}
	if err := a.serveDebug(runCtx, log, srv.errc); err != nil {
		return err
	}
	srv.run("gRPC", func() error { return g.Serve(lis) })
	srv.run("master", func() error { return m.Run(runCtx) })
	rm := &runningMaster{m: m, grpc: lis.Addr().String(), metrics: mops.reg}
	if o.http != "" {
		closeSims, err := srv.startWeb(o, svc, m, store, mops, rm)
		if err != nil {
			return err
		}
		defer closeSims()
	}
	if o.dns != "" {
		if err := srv.startDNS(o, m, rm); err != nil {
			return err
		}
	}
	log.Info("master serving", "name", o.name, "grpc", rm.grpc, "advertise", advertise, "http", rm.http, "dns", rm.dns, "store", redactURL(o.store))
	if ready != nil {
		ready(rm)
	}
	select {
	case <-ctx.Done():
	case err = <-srv.errc:
	}
	srv.shutdown()
	return err
}

// newMasterService makes the master replica, whose leader schedules and
// polls the agents through linkDial, and the API service over it.
func newMasterService(ctx context.Context, o masterOptions, store events.Store, advertise string, linkDial func(string) (*agent.Client, error), mops *masterOps) (*master.Master, *api.Service, error) {
	explanations := master.NewExplanations()
	schedCfg := master.SchedulerConfig{Explanations: explanations, Metrics: mops.mm}
	sheet, err := startingPriceSheet(o)
	if err != nil {
		return nil, nil, err
	}
	m, err := master.New(ctx, master.Config{
		Name: o.name, Advertise: advertise, Store: store, Admins: o.admins, Logger: o.log, PriceSheet: sheet,
		OnLeading: []func(context.Context, *master.Master){
			master.SchedulerLoop(schedCfg),
			master.Link(master.LinkConfig{Cell: o.cell, Dial: linkDial, UsageWindow: o.usageWindow, Interval: o.pollInterval, Metrics: mops.mm}),
		},
	})
	if err != nil {
		return nil, nil, err
	}
	svc := api.NewService(m)
	svc.Explain = explanations.Explain
	svc.Cell = o.cell
	svc.Scheduler = master.SchedulerConfig{Pass: schedCfg.Pass} // plans: the same pass, without the loop's hooks
	svc.Logs = api.NewAgentLogs(m, linkDial)                    // logs travel with the link's credentials, on connections of their own
	svc.StreamCaps = &auth.StreamCaps{PerUser: o.streams.perUser, Total: o.streams.total}
	return m, svc, nil
}

// startingPriceSheet is the sheet of --prices a new cell starts with, nil
// without the flag. A bad sheet is refused now: the first leader writes it
// with its election, and a sheet the command refuses would stop every
// election of a new cell.
func startingPriceSheet(o masterOptions) (*events.PriceSheetSet, error) {
	if o.prices == "" {
		return nil, nil
	}
	sheet, err := loadPriceSheet(o.prices)
	if err != nil {
		return nil, fmt.Errorf("--prices: %w", err)
	}
	sheet.EffectiveUs = 0
	check := commands.SetPriceSheet{Meta: commands.Meta{Actor: commands.Actor{User: o.name, Admin: true}}, Sheet: sheet}
	if _, err := commands.Decide(projections.New(), check, commands.FixedClock(time.Now())); err != nil {
		return nil, fmt.Errorf("--prices %s: %w", o.prices, err)
	}
	return sheet, nil
}

// startMasterInfra starts the Infrastore's process of --infrastore, none
// without it; stop ends it and waits for it.
func (a *app) startMasterInfra(ctx context.Context, o masterOptions) (inf *infraProcess, stop func(), err error) {
	infraCtx, stopInfra := context.WithCancel(ctx)
	if o.infrastore == "" {
		return nil, stopInfra, nil
	}
	if a.env.OpenInfra == nil {
		stopInfra()
		return nil, nil, fmt.Errorf("--infrastore %s: this corral binary was built without the Infrastore", o.infrastore)
	}
	// User SQL runs in a child process, never in this one.
	inf, err = startInfraProcess(infraCtx, o.infrastore, o.store, o.cell, o.infraLimits, o.log)
	if err != nil {
		stopInfra()
		return nil, nil, fmt.Errorf("--infrastore %s: %w", o.infrastore, err)
	}
	return inf, func() { stopInfra(); inf.wait() }, nil
}

// masterServers are the servers of a master replica running together: the
// first to fail ends them all.
type masterServers struct {
	ctx  context.Context // ends when they stop
	stop context.CancelFunc
	grpc *grpc.Server
	web  *http.Server // nil without --http
	wg   sync.WaitGroup
	errc chan error
}

// run runs fn, a server's loop, until it returns; its error, unless the
// servers are stopping, ends them.
func (s *masterServers) run(name string, fn func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := fn(); err != nil && s.ctx.Err() == nil {
			s.errc <- fmt.Errorf("%s: %w", name, err)
		}
	}()
}

// abort stops the servers at once, when the master cannot start.
func (s *masterServers) abort() {
	s.stop()
	s.grpc.Stop()
	s.wg.Wait()
}

// shutdown stops the servers, giving calls in flight a moment to end.
func (s *masterServers) shutdown() {
	s.stop()
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(3 * time.Second):
		s.grpc.Stop()
	}
	if s.web != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.web.Shutdown(sctx)
		cancel()
	}
	s.wg.Wait()
}

// startWeb serves the web UI, /metrics, /healthz and /readyz on --http;
// closeSims ends the what-if replays' process.
func (s *masterServers) startWeb(o masterOptions, svc *api.Service, m *master.Master, store events.Store, mops *masterOps, rm *runningMaster) (closeSims func(), err error) {
	log := o.log
	hl, err := net.Listen("tcp", o.http)
	if err != nil {
		s.abort()
		return nil, fmt.Errorf("--http %s: %w", o.http, err)
	}
	rm.http = hl.Addr().String()
	access := webAccess{hosts: o.httpHosts, anonymous: o.webAnonymous}
	if o.auth != nil {
		access.tokens = o.auth.tokens
	}
	if access.tokens == nil || o.webAnonymous {
		log.Warn("the web UI asks for no login: anyone who reaches it reads the whole cell", "http", o.http)
	}
	sims, err := newSimProcess(o.store, o.simLimits, log)
	if err != nil {
		s.abort()
		return nil, err
	}
	handler, closeUI := webHandler(svc, m, store, svc, sims.Replay, o.cell, access, rm, log)
	s.web = &http.Server{Handler: mops.handler(m, access.tokens, handler, log), ReadHeaderTimeout: 10 * time.Second}
	s.web.RegisterOnShutdown(closeUI)
	s.run("HTTP", func() error {
		if err := s.web.Serve(hl); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return sims.close, nil
}

// startDNS serves the cell's names on --dns; with dnsOptional a taken
// address leaves the master without DNS rather than stopping it.
func (s *masterServers) startDNS(o masterOptions, m *master.Master, rm *runningMaster) error {
	ns, err := nameservice.New(m, nameservice.Config{Cell: o.cell, Logger: o.log})
	if err != nil {
		return err
	}
	dnsReady := make(chan string, 1)
	s.run("DNS", func() error { return ns.Serve(s.ctx, o.dns, func(addr string) { dnsReady <- addr }) })
	select {
	case rm.dns = <-dnsReady:
	case err := <-s.errc:
		if !o.dnsOptional {
			s.abort()
			return fmt.Errorf("--dns %s: %w", o.dns, err)
		}
		o.log.Warn("no name service: its address is taken; give --dns another address", "dns", o.dns, "err", err)
	}
	return nil
}

// nameRE reports whether s is a lowercase DNS label.
func nameRE(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}
