package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/commands/nameservice"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/storeopen"
	"github.com/corralhq/corral/projections"
)

func splitComma(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

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
	explanations := master.NewExplanations()
	schedCfg := master.SchedulerConfig{Explanations: explanations, Metrics: mops.mm}
	var sheet *events.PriceSheetSet
	if o.prices != "" {
		if sheet, err = loadPriceSheet(o.prices); err != nil {
			return fmt.Errorf("--prices: %w", err)
		}
		// Refuse a bad sheet now: the first leader writes it with its
		// election, and a sheet the command refuses would stop every
		// election of a new cell.
		sheet.EffectiveUs = 0
		check := commands.SetPriceSheet{Meta: commands.Meta{Actor: commands.Actor{User: o.name, Admin: true}}, Sheet: sheet}
		if _, err := commands.Decide(projections.New(), check, commands.FixedClock(time.Now())); err != nil {
			return fmt.Errorf("--prices %s: %w", o.prices, err)
		}
	}
	m, err := master.New(ctx, master.Config{
		Name: o.name, Advertise: advertise, Store: store, Admins: o.admins, Logger: log, PriceSheet: sheet,
		OnLeading: []func(context.Context, *master.Master){
			master.SchedulerLoop(schedCfg),
			master.Link(master.LinkConfig{Cell: o.cell, Dial: linkDial, UsageWindow: o.usageWindow, Interval: o.pollInterval, Metrics: mops.mm}),
		},
	})
	if err != nil {
		return err
	}
	if secrets != nil {
		secrets.View = m.View
	}
	svc := api.NewService(m)
	svc.Explain = explanations.Explain
	svc.Cell = o.cell
	svc.Scheduler = master.SchedulerConfig{Pass: schedCfg.Pass} // plans: the same pass, without the loop's hooks
	svc.Logs = api.NewAgentLogs(m, linkDial)                    // logs travel with the link's credentials, on connections of their own
	defer svc.Logs.Close()
	svc.StreamCaps = &auth.StreamCaps{PerUser: o.streams.perUser, Total: o.streams.total}
	var inf *infraProcess
	infraCtx, stopInfra := context.WithCancel(ctx)
	defer stopInfra()
	if o.infrastore != "" {
		if a.env.OpenInfra == nil {
			return fmt.Errorf("--infrastore %s: this corral binary was built without the Infrastore", o.infrastore)
		}
		// User SQL runs in a child process, never in this one.
		inf, err = startInfraProcess(infraCtx, o.infrastore, o.store, o.cell, o.infraLimits, log)
		if err != nil {
			return fmt.Errorf("--infrastore %s: %w", o.infrastore, err)
		}
		defer func() { stopInfra(); inf.wait() }()
		svc.Analytics = inf
	}
	mops.watch(m, inf)
	g := grpc.NewServer(append(mops.mm.ServerOptions(log), authOpts...)...)
	svc.Register(g)
	master.NewAgentRegistry(m, o.cell, o.pollInterval).Attach(g)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, 5)
	if err := a.serveDebug(runCtx, log, errc); err != nil {
		return err
	}
	run := func(name string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil && runCtx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	run("gRPC", func() error { return g.Serve(lis) })
	run("master", func() error { return m.Run(runCtx) })
	rm := &runningMaster{m: m, grpc: lis.Addr().String(), metrics: mops.reg}
	var web *http.Server
	if o.http != "" {
		hl, err := net.Listen("tcp", o.http)
		if err != nil {
			stop()
			g.Stop()
			wg.Wait()
			return fmt.Errorf("--http %s: %w", o.http, err)
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
			stop()
			g.Stop()
			wg.Wait()
			return err
		}
		defer sims.close()
		handler, closeUI := webHandler(svc, m, store, svc, sims.Replay, o.cell, access, rm, log)
		web = &http.Server{Handler: mops.handler(m, access.tokens, handler, log), ReadHeaderTimeout: 10 * time.Second}
		web.RegisterOnShutdown(closeUI)
		run("HTTP", func() error {
			if err := web.Serve(hl); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	if o.dns != "" {
		ns, err := nameservice.New(m, nameservice.Config{Cell: o.cell, Logger: log})
		if err != nil {
			return err
		}
		dnsReady := make(chan string, 1)
		run("DNS", func() error { return ns.Serve(runCtx, o.dns, func(addr string) { dnsReady <- addr }) })
		select {
		case rm.dns = <-dnsReady:
		case err := <-errc:
			if !o.dnsOptional {
				stop()
				g.Stop()
				wg.Wait()
				return fmt.Errorf("--dns %s: %w", o.dns, err)
			}
			log.Warn("no name service: its address is taken; give --dns another address", "dns", o.dns, "err", err)
		}
	}
	log.Info("master serving", "name", o.name, "grpc", rm.grpc, "advertise", advertise, "http", rm.http, "dns", rm.dns, "store", redactURL(o.store))
	if ready != nil {
		ready(rm)
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	stop()
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(3 * time.Second):
		g.Stop()
	}
	if web != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = web.Shutdown(sctx)
		cancel()
	}
	wg.Wait()
	return err
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

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "corral"
	}
	if i := strings.IndexByte(h, '.'); i > 0 {
		h = h[:i]
	}
	return strings.ToLower(h)
}

func (a *app) masterCommand() *cobra.Command {
	o := masterOptions{}
	var admins, certs string
	var insecureMode bool
	var infra infraFlags
	var sim simFlags
	c := &cobra.Command{
		Use:   "master",
		Short: "run one master replica of a cell",
		Long: `Run a master replica: it applies the log's migrations, campaigns for the
leader lease (one replica leads; the others follow, serve reads and name the
leader to writers), and serves the Cell API and agent registration over gRPC.
The leader schedules and polls the agents.

With --certs (a cell directory from ` + "`corral certs init`" + `, holding the CA,
masters/NAME.crt and .key, the tokens file and the secrets key) the API is
TLS: people prove who they are with a certificate or a token, agents with
theirs, and the master polls agents over mutual TLS. --insecure serves
plaintext and believes whatever user a client names: a trusted machine only.`,
		Example: `  corral master --store postgres://corral@db/corral --name master1 --listen 0.0.0.0:7070 --advertise master1:7070 --http 0.0.0.0:8080
  corral master --store ./events.db --infrastore ./infrastore.duckdb --dns 127.0.0.1:5353`,
		Args: args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.store == "" {
				o.store = a.getenv("CORRAL_STORE")
			}
			if o.store == "" {
				return usageErr("--store: give the event log: postgres://..., cockroachdb://... or a SQLite file (or set CORRAL_STORE)")
			}
			if o.name == "" {
				o.name = hostname()
			}
			if o.cell == "" {
				o.cell = a.cellName()
			}
			for _, ad := range splitComma(admins) {
				if ad != "" {
					o.admins = append(o.admins, ad)
				}
			}
			log, err := a.serverLogger(a.stderr())
			if err != nil {
				return err
			}
			o.log = log
			switch {
			case certs != "" && insecureMode:
				return usageErr("--certs and --insecure: give one")
			case certs != "":
				if o.auth, err = loadMasterAuth(certs, o.name); err != nil {
					return err
				}
				if !cmd.Flags().Changed("cell") && a.getenv("CORRAL_CELL") == "" {
					o.cell = o.auth.creds.Cell
				}
				if o.cell != o.auth.creds.Cell {
					return usageErr("--cell %s: the certificates in %s are cell %s's", o.cell, certs, o.auth.creds.Cell)
				}
				if o.auth.sealer == nil {
					log.Warn("no secrets key in the cell directory: specs that give secret values are refused", "certs", certs)
				}
			case insecureMode:
				log.Warn("INSECURE: the API is plaintext and believes any user a client names in x-corral-user; anyone who reaches this address can act as anyone, admins included, and register machines. Use --certs DIR on any network but a trusted machine.")
			default:
				return usageErr("give --certs DIR (a cell directory from `corral certs init`) to serve TLS, or --insecure for plaintext on a trusted machine")
			}
			if o.infraLimits, err = infra.resolve(); err != nil {
				return err
			}
			if o.simLimits, err = sim.resolve(); err != nil {
				return err
			}
			if err := o.streams.check(); err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			return a.serveMaster(ctx, o, nil)
		},
	}
	f := c.Flags()
	infra.add(f)
	sim.add(f)
	o.streams.add(f)
	f.StringVar(&o.store, "store", "", "the event log: postgres://..., cockroachdb://... or a SQLite file (default $CORRAL_STORE)")
	f.StringVar(&o.name, "name", "", "this replica's name (default the host name)")
	f.StringVar(&o.listen, "listen", DefaultMaster, "gRPC address to listen on")
	f.StringVar(&o.advertise, "advertise", "", "gRPC address clients and agents reach this replica at (default the listener's)")
	f.StringVar(&o.http, "http", "", "HTTP address for the web UI, /metrics, /healthz and /readyz (default none)")
	f.StringArrayVar(&o.httpHosts, "http-host", nil, "a name the web UI is served as (repeatable); requests naming another Host than these, an IP address or localhost are refused")
	f.BoolVar(&o.webAnonymous, "web-anonymous", false, "serve the web UI without a login (by default it asks for one of the cell's tokens when the master has --certs)")
	f.StringVar(&o.dns, "dns", "", "DNS address for the name service (default none), e.g. 127.0.0.1:5353")
	f.StringVar(&o.cell, "cell", "", "the cell's name, used in DNS names (default $CORRAL_CELL or "+DefaultCell+")")
	f.StringVar(&admins, "admins", "", "users with the admin capability, comma-separated")
	f.StringVar(&o.infrastore, "infrastore", "", "Infrastore (DuckDB) `FILE` to keep and serve corral sql and corral bill from (default none)")
	f.StringVar(&o.prices, "prices", "", "price sheet `FILE` (JSON or YAML, as corral price set reads) a new cell starts with (default the built-in sheet)")
	f.DurationVar(&o.usageWindow, "usage-window", 0, "how often each machine's usage becomes an event (default 5m)")
	f.StringVar(&certs, "certs", "", "the cell directory (corral certs init): serve TLS with masters/NAME.crt, tokens and secrets")
	f.BoolVar(&insecureMode, "insecure", false, "serve plaintext and trust the user clients name (development on a trusted machine only)")
	return c
}

func (a *app) migrateCommand() *cobra.Command {
	var store string
	c := &cobra.Command{Use: "migrate", Short: "apply the event log's schema migrations"}
	up := &cobra.Command{
		Use:   "up",
		Short: "apply every migration not yet applied (masters do this when they start)",
		Args:  args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if store == "" {
				store = a.getenv("CORRAL_STORE")
			}
			if store == "" {
				return usageErr("--store: give the event log: postgres://..., cockroachdb://... or a SQLite file (or set CORRAL_STORE)")
			}
			s, err := storeopen.Open(cmd.Context(), store, storeopen.Options{})
			if err != nil {
				return err
			}
			defer s.Close()
			head, err := s.Head(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "%s: migrations applied; the log holds %d events\n", redactURL(store), head)
			return nil
		},
	}
	up.Flags().StringVar(&store, "store", "", "the event log: postgres://..., cockroachdb://... or a SQLite file (default $CORRAL_STORE)")
	c.AddCommand(up)
	return c
}

// redactURL hides a password in a store URL.
func redactURL(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	at := strings.Index(rest, "@")
	if at < 0 {
		return s
	}
	if c := strings.Index(rest[:at], ":"); c >= 0 {
		return s[:i+3] + rest[:c] + ":***" + rest[at:]
	}
	return s
}

// streamFlags are the caps on long calls (log streams, event watches) open
// at once: per user and over the cell (auth.StreamCaps).
type streamFlags struct{ perUser, total int }

func (s *streamFlags) add(f *pflag.FlagSet) {
	f.IntVar(&s.perUser, "max-streams-per-user", auth.DefaultMaxStreamsPerUser, "streams (task logs, event watches, the web UI's live logs and events) one user may have open at once; 0: no cap")
	f.IntVar(&s.total, "max-streams", auth.DefaultMaxStreams, "streams (task logs, event watches) the cell serves at once over all users; 0: no cap")
}

func (s streamFlags) check() error {
	if s.perUser < 0 {
		return usageErr("--max-streams-per-user %d: want 0 (no cap) or more", s.perUser)
	}
	if s.total < 0 {
		return usageErr("--max-streams %d: want 0 (no cap) or more", s.total)
	}
	return nil
}
