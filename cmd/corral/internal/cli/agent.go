package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/corralhq/corral/agent"
	"github.com/spf13/cobra"
)

// agentFlags are `corral agent`'s flags: most set the agent's Config.
type agentFlags struct {
	cfg                                         agent.Config
	rf                                          resourceFlags
	ports, portFirst                            int32
	attrs                                       []string
	stopTasks                                   bool
	httpAddr, certs, taskUIDs, metricsTokenFile string
}

func (a *app) agentCommand() *cobra.Command {
	var f agentFlags
	c := &cobra.Command{
		Use:   "agent",
		Short: "run the agent of one machine: it runs the tasks the master places here",
		Long: `Run a machine's agent (the Borglet): it registers the machine with the
cell's master (--master, several separated by commas: it finds the leader),
runs the tasks placed on it as processes in resource containers, restarts
them, checks their health and reports their usage when polled. What the
machine offers is detected unless given. Tasks keep running when the agent
stops; the next agent on the same --data adopts them.`,
		Example: "  corral agent --master master1:7070,master2:7070 --name m1 --listen 0.0.0.0:7071 --advertise m1:7071 --attr rack=r1",
		Args:    args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.agent(cmd.Context(), &f)
		},
	}
	fs := c.Flags()
	fs.StringVar(&f.cfg.Name, "name", "", "the machine's name in the cell (default the host name)")
	fs.StringVar(&f.cfg.ListenAddr, "listen", "0.0.0.0:7071", "address the Agent service listens on")
	fs.StringVar(&f.cfg.AdvertiseAddr, "advertise", "", "address the master polls (default the listener's)")
	fs.StringVar(&f.cfg.DataDir, "data", "corral-agent", "directory for sandboxes, logs and the agent's state")
	f.rf.add(c, "offered")
	fs.Int32Var(&f.ports, "ports", 0, "how many ports tasks may be given (default: the whole range)")
	fs.Int32Var(&f.portFirst, "port-first", 0, "first port given to tasks (default 20000)")
	fs.StringArrayVar(&f.attrs, "attr", nil, "machine attribute key=value for constraints (repeat the flag); arch and os are detected")
	fs.StringVar(&f.cfg.Cgroups, "cgroups", "auto", "containers: auto, v2, v1 or sampling (no cgroups)")
	fs.IntVar(&f.cfg.MaxLogStreams, "max-log-streams", agent.DefaultMaxLogStreams, "log streams this agent serves at once; past it a stream is refused")
	fs.StringVar(&f.httpAddr, "http", "", "HTTP address for /metrics, /healthz and /readyz (default none)")
	fs.StringVar(&f.metricsTokenFile, "metrics-token-file", "", "with --certs and --http: a `FILE` holding the bearer token /metrics asks of its scraper (its series name users and jobs)")
	fs.StringVar(&f.certs, "certs", "", "directory holding ca.crt and agents/NAME.crt and .key (corral certs issue --role agent NAME): mutual TLS with the masters")
	fs.StringVar(&f.taskUIDs, "task-uids", "", "FIRST:COUNT: run each task as a uid of its own from this range (agent running as root)")
	fs.BoolVar(&f.stopTasks, "stop-tasks-on-exit", false, "stop every task when the agent stops, rather than leave them for the next agent to adopt")
	return c
}

// agent runs the machine's agent the flags describe until ctx ends or a
// signal comes.
func (a *app) agent(ctx context.Context, f *agentFlags) error {
	if err := f.config(); err != nil {
		return err
	}
	cfg := &f.cfg
	log, err := a.serverLogger(a.stderr())
	if err != nil {
		return err
	}
	legacyID := pathHash(cfg.DataDir)
	if f.certs != "" {
		cr, err := loadAgentCredentials(f.certs, cfg.Name)
		if err != nil {
			return err
		}
		secureAgent(cfg, cr, log)
		legacyID = cr.CAID
	} else {
		log.Warn("INSECURE: no --certs: the Agent service is plaintext and obeys anyone who reaches it; give --certs DIR with agents/" + cfg.Name + ".crt and .key")
		cfg.Cell = "insecure"
	}
	// The id is the agent's data directory's own: a machine's agent
	// restarted on it finds its containers again, and no other agent on
	// this machine names its containers alike.
	if cfg.CellID, err = cellID(cfg.DataDir, agent.HasState(cfg.DataDir), legacyID); err != nil {
		return fmt.Errorf("--data %s: %w", cfg.DataDir, err)
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	if err := a.serveDebug(ctx, log, nil); err != nil {
		return err
	}
	r := &agentRun{cfg: *cfg, masters: splitList(a.masterAddr()), stopTasks: f.stopTasks, log: log, http: f.httpAddr}
	if f.metricsTokenFile != "" && (f.certs == "" || f.httpAddr == "") {
		return usageErr("--metrics-token-file guards the /metrics of --http in a cell with --certs: give both (an agent without --certs obeys anyone, and serves /metrics to anyone)")
	}
	if f.httpAddr != "" && f.certs != "" {
		// A cell with certificates keeps its task names to those it
		// trusts: the agent's series name users and jobs.
		r.guardMetrics = true
		if r.metricsToken, err = readScrapeToken(f.metricsTokenFile); err != nil {
			return err
		}
		if r.metricsToken == "" {
			log.Warn("/metrics answers no one: its series name users and jobs; give --metrics-token-file FILE and scrape with that token", "http", f.httpAddr)
		}
	}
	return r.run(ctx)
}

// config completes and checks the agent's Config from the flags that are
// not its fields.
func (f *agentFlags) config() error {
	cfg := &f.cfg
	if cfg.Name == "" {
		cfg.Name = hostname()
	}
	res, err := f.rf.resources(f.ports)
	if err != nil {
		return err
	}
	cfg.Capacity = res
	if cfg.MaxLogStreams < 1 {
		return usageErr("--max-log-streams %d: want 1 or more", cfg.MaxLogStreams)
	}
	if f.portFirst > 0 {
		n := f.ports
		if n == 0 {
			n = 10000
		}
		cfg.PortFirst, cfg.PortLast = f.portFirst, min(f.portFirst+n-1, 65535)
	}
	cfg.Attributes = map[string]string{}
	for _, kv := range f.attrs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErr("--attr %q: want key=value", kv)
		}
		cfg.Attributes[k] = v
	}
	if f.taskUIDs != "" {
		if cfg.TaskUIDs, err = parseUIDRange(f.taskUIDs); err != nil {
			return err
		}
	}
	return nil
}
