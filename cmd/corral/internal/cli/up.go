package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// upOptions are the flags of `corral up`.
type upOptions struct {
	data, store, listen, http, dns, cell, admin, prices string
	agents                                              int
	portBase                                            int
	dnsOptional                                         bool
	infra                                               infraFlags
	sim                                                 simFlags
	httpHosts                                           []string
	webAnonymous                                        bool
	streams                                             streamFlags
	maxLogStreams                                       int // each agent's cap
	// What each machine offers instead of its share of this host ("" keeps
	// the share): overcommitting is the operator's choice.
	machineCPU, machineMemory string
}

func (a *app) upCommand() *cobra.Command {
	o := upOptions{}
	c := &cobra.Command{
		Use:   "up",
		Short: "run a whole cell on this machine: master, scheduler, agents, Infrastore, web UI, DNS",
		Long: `Run a whole cell on this machine in one process: an embedded SQLite log and a
DuckDB Infrastore under --data, a master with its scheduler and agent link, N
agents each offering its share of this machine (or --machine-cpu and
--machine-memory), the gRPC API, the web UI and the DNS name service. Ctrl-C stops everything, tasks too; running it
again resumes from the log with every job back. The local user is the cell's
admin and gets quota to run examples in every band.

Ports: the API on --listen (7070), its machines' agents on the ports after it
(7071-7073 for 3), the web UI on --http (8080), DNS on --dns (5353; without it
when that is taken), and tasks on 1000 ports a machine from --port-base (20000).
A second cell beside the first needs all of them apart, and its own --data:

  corral up --data corral-data-2 --listen 127.0.0.1:7170 --http 127.0.0.1:8180 \
    --dns 127.0.0.1:5453 --port-base 23000

The banner says the line for the cell after the one it starts. Point the corral
command at a cell with CORRAL_MASTER and CORRAL_DATA (the banner says both).`,
		Args: args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The default DNS port is mDNS's too: when it is taken, the
			// cell runs without DNS rather than not at all.
			o.dnsOptional = !cmd.Flags().Changed("dns")
			return a.up(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.data, "data", "", "directory for the log, the Infrastore and the machines (default $CORRAL_DATA or "+DefaultData+")")
	f.StringVar(&o.store, "store", "", "use this event log instead of DATA/events.db: postgres://... or cockroachdb://...")
	f.IntVar(&o.agents, "agents", 3, "how many machines (agents) to run")
	f.StringVar(&o.listen, "listen", DefaultMaster, "gRPC address of the master; its machines' agents listen on the ports after it (+1 to +N, a free port where one is taken)")
	f.StringVar(&o.http, "http", "127.0.0.1:8080", "HTTP address of the web UI and /healthz")
	f.StringArrayVar(&o.httpHosts, "http-host", nil, "a name the web UI is served as (repeatable); requests naming another Host than these, an IP address or localhost are refused")
	f.BoolVar(&o.webAnonymous, "web-anonymous", false, "serve the web UI without a login (by default it asks for one of the cell's tokens, e.g. DATA/certs/admins/NAME.token)")
	f.StringVar(&o.dns, "dns", "127.0.0.1:5353", "DNS address of the name service")
	f.StringVar(&o.cell, "cell", "", "the cell's name, used in DNS names (default $CORRAL_CELL or "+DefaultCell+")")
	f.StringVar(&o.admin, "admin", "", "the cell's admin (default you: $CORRAL_USER or $USER)")
	f.IntVar(&o.portBase, "port-base", 20000, "first port given to tasks; each machine gets 1000 ports from here on. Keep them apart from another cell's and below the kernel's ephemeral ports (/proc/sys/net/ipv4/ip_local_port_range, often from 32768), where an outgoing connection can take a task's port")
	f.StringVar(&o.prices, "prices", "", "price sheet `FILE` (JSON or YAML, as corral price set reads) a new cell starts with (default the built-in sheet)")
	o.infra.add(f)
	o.sim.add(f)
	o.streams.add(f)
	f.IntVar(&o.maxLogStreams, "max-log-streams", agent.DefaultMaxLogStreams, "log streams each machine's agent serves at once")
	f.StringVar(&o.machineCPU, "machine-cpu", "", "CPU each machine offers, e.g. 4 or 500m (default its share of this machine's cores; more overcommits them)")
	f.StringVar(&o.machineMemory, "machine-memory", "", "memory each machine offers, e.g. 16GiB (default its share of this machine's memory; more overcommits it)")
	return c
}

// upCell is what `corral up` checked and made before anything runs: the
// limits its flags resolve to, the data directory it holds, the cell's
// credentials and id, and its log.
type upCell struct {
	simLimits   simLimits
	infraLimits infraLimits
	offer       machineOverride
	data, abs   string // the data directory as given, and absolute
	admin       string
	machines    []string // m1, m2, ...
	local       *auth.Local
	id          string
	store       string
	log         *slog.Logger
}

func (a *app) up(parent context.Context, o upOptions) error {
	cell := &upCell{}
	if err := a.checkUpFlags(&o, cell); err != nil {
		return err
	}
	release, err := a.prepareUpCell(&o, cell)
	if err != nil {
		return err
	}
	defer release()

	ctx, stopSignals := signalContext(parent)
	defer stopSignals()
	// The master and the agents stop in an order of their own: the master
	// first, so it records nothing of the agents stopping their tasks.
	masterCtx, stopMaster := context.WithCancel(context.Background())
	defer stopMaster()
	masterDone := make(chan error, 1)
	rm, err := a.startUpMaster(ctx, masterCtx, stopMaster, o, cell, masterDone)
	if rm == nil {
		return err
	}
	agentsCtx, stopAgents := context.WithCancel(context.Background())
	defer stopAgents()
	agents, agentAddrs := startUpAgents(ctx, agentsCtx, o, cell, rm)
	machines := waitMachines(ctx, rm.m, o.agents, 15*time.Second)
	grantQuota(ctx, rm.m, cell.admin, cell.log)

	_, digErr := exec.LookPath("dig")
	upBanner{
		cell: o.cell, admin: cell.admin, machines: machines, agents: o.agents,
		grpc: rm.grpc, http: rm.http, dns: rm.dns, dnsWanted: o.dns, agentAddrs: agentAddrs, portBase: o.portBase,
		store: cell.store, data: cell.abs, ca: absPath(cell.local.CA), cert: absPath(cell.local.AdminCert), key: absPath(cell.local.AdminKey), tok: absPath(cell.local.AdminToken),
		webAnonymous: o.webAnonymous, haveDig: digErr == nil,
		defaultMasterAndDir: rm.grpc == DefaultMaster && filepath.Clean(cell.data) == filepath.Clean(DefaultData),
	}.write(a.stdout())

	var err2 error
	select {
	case <-ctx.Done():
	case err2 = <-masterDone:
		masterDone <- err2
	}
	fmt.Fprintln(a.stderr(), "\nstopping the cell: master first, then the agents and their tasks...")
	stopMaster()
	if err := <-masterDone; err != nil && err2 == nil {
		err2 = err
	}
	stopAgents()
	agents.Wait()
	fmt.Fprintln(a.stderr(), "stopped. `corral up` with the same --data resumes the cell.")
	return err2
}

// checkUpFlags refuses flags that cannot make a cell, before anything is
// made on disk, and resolves the limits they set into cell.
func (a *app) checkUpFlags(o *upOptions, cell *upCell) error {
	if o.agents < 1 || o.agents > 64 {
		return usageErr("--agents %d: want 1 to 64", o.agents)
	}
	if o.portBase < 1024 || o.portBase+o.agents*1000 > 65535 {
		return usageErr("--port-base %d: want 1024 or more, with room for %d ports below 65536", o.portBase, o.agents*1000)
	}
	if lo, hi, ok := ephemeralPorts(); ok && o.portBase <= hi && o.portBase+o.agents*1000-1 >= lo {
		a.note("warning: task ports %d-%d overlap the kernel's ephemeral ports %d-%d: a task may find its port taken by an outgoing connection. Pick --port-base below %d.",
			o.portBase, o.portBase+o.agents*1000-1, lo, hi, lo-o.agents*1000)
	}
	var err error
	if cell.simLimits, err = o.sim.resolve(); err != nil {
		return err
	}
	if cell.infraLimits, err = o.infra.resolve(); err != nil {
		return err
	}
	if err := o.streams.check(); err != nil {
		return err
	}
	if o.maxLogStreams < 1 {
		return usageErr("--max-log-streams %d: want 1 or more", o.maxLogStreams)
	}
	cell.offer, err = machineOffer(o.machineCPU, o.machineMemory)
	return err
}

// prepareUpCell takes the data directory (one `corral up` at a time), and
// finds or makes the cell's admin, credentials, id and log there. release
// lets the directory go.
func (a *app) prepareUpCell(o *upOptions, cell *upCell) (release func(), err error) {
	cell.data = a.dataDir(o.data)
	lock, err := a.lockUpData(cell)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	if o.cell == "" {
		o.cell = a.cellName()
	}
	cell.admin = o.admin
	if cell.admin == "" {
		cell.admin = a.caller()
	}
	if !commands.ValidName(cell.admin) {
		return nil, fmt.Errorf("the local user %q is not a corral user name (lowercase letters, digits and '-'): set CORRAL_USER, or give --admin", cell.admin)
	}
	if err := upCredentials(o.cell, o.agents, cell); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(cell.data, "corral.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cell.log = a.upLogger(logFile)
	cell.store = o.store
	if cell.store == "" {
		cell.store = filepath.Join(cell.data, "events.db")
	}
	return func() { logFile.Close(); lock.Close() }, nil
}

// lockUpData makes the data directory and locks it for this `corral up`.
func (a *app) lockUpData(cell *upCell) (*os.File, error) {
	if err := os.MkdirAll(cell.data, 0o755); err != nil {
		return nil, fmt.Errorf("--data %s: %w", cell.data, err)
	}
	cell.abs, _ = filepath.Abs(cell.data)
	lock, err := os.OpenFile(filepath.Join(cell.data, "up.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--data %s: %w", cell.data, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("another `corral up` runs on %s: stop it (Ctrl-C in its terminal), or give this one another --data (and other addresses: `corral up --help` shows a second cell)", cell.abs)
	}
	return lock, nil
}

// upCredentials names the cell's machines and finds or makes their
// credentials and the cell's id.
func upCredentials(cellName string, agents int, cell *upCell) error {
	cell.machines = make([]string, agents)
	for i := range cell.machines {
		cell.machines[i] = "m" + strconv.Itoa(i+1)
	}
	// Every connection of the cell is authenticated: its credentials are
	// made on the first run and reused after.
	local, err := auth.SetUpLocal(certsDir(cell.data), cellName, "master", cell.admin, cell.machines...)
	if err != nil {
		return fmt.Errorf("the cell's credentials in %s: %w", certsDir(cell.abs), err)
	}
	cell.local = local
	// The cell's id is its data directory's own, not its CA's: a second
	// cell made with a copy of this one's certs names its containers apart.
	hadState := false
	for _, name := range cell.machines {
		hadState = hadState || agent.HasState(filepath.Join(cell.data, "machines", name))
	}
	if cell.id, err = cellID(cell.data, hadState, local.Master.CAID); err != nil {
		return fmt.Errorf("--data %s: %w", cell.abs, err)
	}
	return nil
}

// upLogger logs to the cell's file at the chosen level, and warnings to
// stderr too.
func (a *app) upLogger(file io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if a.verbose {
		level = slog.LevelDebug
	}
	a.ops.level.Set(level)
	return slog.New(slog.NewMultiHandler(
		slog.NewTextHandler(file, &slog.HandlerOptions{Level: &a.ops.level}),
		slog.NewTextHandler(a.stderr(), &slog.HandlerOptions{Level: slog.LevelWarn}),
	))
}

// startUpMaster runs the cell's master on masterCtx until it listens, and
// returns it; its end is sent on masterDone. A nil master comes with the
// error that stopped it first, or, when ctx ends first, with the end of the
// master stopped by stopMaster.
func (a *app) startUpMaster(ctx, masterCtx context.Context, stopMaster func(), o upOptions, cell *upCell, masterDone chan error) (*runningMaster, error) {
	readyc := make(chan *runningMaster, 1)
	go func() {
		masterDone <- a.serveMaster(masterCtx, masterOptions{
			store: cell.store, name: "master", listen: o.listen, http: o.http, dns: o.dns, dnsOptional: o.dnsOptional, cell: o.cell, prices: o.prices,
			admins: []string{cell.admin}, infrastore: filepath.Join(cell.data, "infrastore.duckdb"), infraLimits: cell.infraLimits, simLimits: cell.simLimits, httpHosts: o.httpHosts, webAnonymous: o.webAnonymous,
			usageWindow: 5 * time.Second, pollInterval: time.Second, log: cell.log, streams: o.streams,
			auth: &masterAuth{creds: cell.local.Master, tokens: cell.local.Tokens, sealer: cell.local.Sealer},
		}, func(rm *runningMaster) { readyc <- rm })
	}()
	select {
	case rm := <-readyc:
		return rm, nil
	case err := <-masterDone:
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%w\n(another cell or program uses that address: stop it, or give `corral up` other --listen, --http and --dns addresses and --port-base, as `corral up --help` shows for a second cell)", err)
		}
		return nil, err
	case <-ctx.Done():
		stopMaster()
		return nil, <-masterDone
	}
}

// startUpAgents runs the cell's machines' agents on agentsCtx, once the
// master leads (agents register with the leader), and says where they
// listen.
func startUpAgents(ctx, agentsCtx context.Context, o upOptions, cell *upCell, rm *runningMaster) (*sync.WaitGroup, []string) {
	for deadline := time.Now().Add(15 * time.Second); !rm.m.Leading() && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(50 * time.Millisecond)
	}
	var agents sync.WaitGroup
	share := cell.offer.fill(machineShare(cell.data, o.agents))
	agentAddrs := make([]string, o.agents)
	for i := 1; i <= o.agents; i++ {
		name := cell.machines[i-1]
		first := int32(o.portBase + (i-1)*1000)
		agentAddrs[i-1] = agentAddr(rm.grpc, i)
		offer := proto.Clone(share).(*events.Resources)
		offer.Ports = 1000
		r := &agentRun{
			cfg: agent.Config{Name: name, ListenAddr: agentAddrs[i-1], DataDir: filepath.Join(cell.data, "machines", name),
				Capacity: offer, PortFirst: first, PortLast: first + 999, Attributes: map[string]string{"rack": "r" + strconv.Itoa((i-1)%2+1)},
				ReregisterAfter: 10 * time.Second, MaxLogStreams: o.maxLogStreams},
			masters: []string{rm.grpc}, stopTasks: true, log: cell.log, metrics: rm.metrics,
		}
		secureAgent(&r.cfg, cell.local.Agents[name], cell.log)
		r.cfg.CellID = cell.id
		agents.Add(1)
		go func() {
			defer agents.Done()
			if err := r.run(agentsCtx); err != nil {
				cell.log.Error("agent stopped", "machine", name, "err", err)
			}
		}()
	}
	return &agents, agentAddrs
}

// waitMachines waits until n machines are up in the master's state.
func waitMachines(ctx context.Context, m *master.Master, n int, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		up := 0
		m.View(func(s *projections.State) {
			for _, mach := range s.Machines {
				if mach.State == projections.MachineUp {
					up++
				}
			}
		})
		if up >= n || time.Now().After(deadline) || ctx.Err() != nil {
			return up
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// grantQuota gives the admin quota in the production and batch bands, the
// first time a cell comes up: production up to the cell's capacity (the
// most the cell admits), batch twice that.
func grantQuota(ctx context.Context, m *master.Master, user string, log *slog.Logger) {
	var capacity projections.Resources
	has := false
	m.View(func(s *projections.State) {
		capacity = s.CellCapacity()
		for k := range s.Quotas {
			if k.User == user {
				has = true
			}
		}
	})
	if has || capacity.CPUMilli == 0 {
		return
	}
	for _, g := range []struct {
		band  string
		scale int64
	}{{"production", 1}, {"batch", 2}} {
		cmd := commands.SetQuota{Meta: commands.Meta{Actor: commands.Actor{User: user, Admin: true}, RequestID: "corral-up-quota-" + g.band + "-" + user},
			User: user, Band: g.band, Resources: capacity.Scale(g.scale)}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := m.Do(cctx, cmd)
		cancel()
		if err != nil {
			log.Warn("granting quota", "user", user, "band", g.band, "err", err)
		} else {
			log.Info("quota granted", "user", user, "band", g.band, "resources", capacity.Scale(g.scale).String())
		}
	}
}

// agentAddr is where the i-th agent of `corral up` listens: the ports after
// the master's, so that a cell started again finds its machines where the
// log says they are; any free port when that one is taken.
func agentAddr(masterAddr string, i int) string {
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		return "127.0.0.1:0"
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 || p+i > 65535 {
		return net.JoinHostPort(host, "0")
	}
	addr := net.JoinHostPort(host, strconv.Itoa(p+i))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return net.JoinHostPort(host, "0")
	}
	l.Close()
	return addr
}

// ephemeralPorts is the kernel's range of ports for outgoing connections.
func ephemeralPorts() (lo, hi int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	return lo, hi, err1 == nil && err2 == nil
}

// absPath is p made absolute, p when it cannot be.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
