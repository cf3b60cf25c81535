package cli

import (
	"fmt"
	"strings"

	"github.com/corralhq/corral/agent"
	"github.com/spf13/cobra"
)

func (a *app) agentCommand() *cobra.Command {
	var cfg agent.Config
	var rf resourceFlags
	var ports, portFirst int32
	var attrs []string
	var stopTasks bool
	var httpAddr, certs, taskUIDs, metricsTokenFile string
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
			if cfg.Name == "" {
				cfg.Name = hostname()
			}
			res, err := rf.resources(ports)
			if err != nil {
				return err
			}
			cfg.Capacity = res
			if cfg.MaxLogStreams < 1 {
				return usageErr("--max-log-streams %d: want 1 or more", cfg.MaxLogStreams)
			}
			if portFirst > 0 {
				n := ports
				if n == 0 {
					n = 10000
				}
				cfg.PortFirst, cfg.PortLast = portFirst, min(portFirst+n-1, 65535)
			}
			cfg.Attributes = map[string]string{}
			for _, kv := range attrs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageErr("--attr %q: want key=value", kv)
				}
				cfg.Attributes[k] = v
			}
			masters := splitList(a.masterAddr())
			if taskUIDs != "" {
				if cfg.TaskUIDs, err = parseUIDRange(taskUIDs); err != nil {
					return err
				}
			}
			log, err := a.serverLogger(a.stderr())
			if err != nil {
				return err
			}
			legacyID := pathHash(cfg.DataDir)
			if certs != "" {
				cr, err := loadAgentCredentials(certs, cfg.Name)
				if err != nil {
					return err
				}
				secureAgent(&cfg, cr, log)
				legacyID = cr.CAID
			} else {
				log.Warn("INSECURE: no --certs: the Agent service is plaintext and obeys anyone who reaches it; give --certs DIR with agents/" + cfg.Name + ".crt and .key")
				cfg.Cell = "insecure"
			}
			// The id is the agent's data directory's own: a machine's
			// agent restarted on it finds its containers again, and no
			// other agent on this machine names its containers alike.
			if cfg.CellID, err = cellID(cfg.DataDir, agent.HasState(cfg.DataDir), legacyID); err != nil {
				return fmt.Errorf("--data %s: %w", cfg.DataDir, err)
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			if err := a.serveDebug(ctx, log, nil); err != nil {
				return err
			}
			r := &agentRun{cfg: cfg, masters: masters, stopTasks: stopTasks, log: log, http: httpAddr}
			if metricsTokenFile != "" && (certs == "" || httpAddr == "") {
				return usageErr("--metrics-token-file guards the /metrics of --http in a cell with --certs: give both (an agent without --certs obeys anyone, and serves /metrics to anyone)")
			}
			if httpAddr != "" && certs != "" {
				// A cell with certificates keeps its task names to those it
				// trusts: the agent's series name users and jobs.
				r.guardMetrics = true
				if r.metricsToken, err = readScrapeToken(metricsTokenFile); err != nil {
					return err
				}
				if r.metricsToken == "" {
					log.Warn("/metrics answers no one: its series name users and jobs; give --metrics-token-file FILE and scrape with that token", "http", httpAddr)
				}
			}
			return r.run(ctx)
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Name, "name", "", "the machine's name in the cell (default the host name)")
	f.StringVar(&cfg.ListenAddr, "listen", "0.0.0.0:7071", "address the Agent service listens on")
	f.StringVar(&cfg.AdvertiseAddr, "advertise", "", "address the master polls (default the listener's)")
	f.StringVar(&cfg.DataDir, "data", "corral-agent", "directory for sandboxes, logs and the agent's state")
	rf.add(c, "offered")
	f.Int32Var(&ports, "ports", 0, "how many ports tasks may be given (default: the whole range)")
	f.Int32Var(&portFirst, "port-first", 0, "first port given to tasks (default 20000)")
	f.StringArrayVar(&attrs, "attr", nil, "machine attribute key=value for constraints (repeat the flag); arch and os are detected")
	f.StringVar(&cfg.Cgroups, "cgroups", "auto", "containers: auto, v2, v1 or sampling (no cgroups)")
	f.IntVar(&cfg.MaxLogStreams, "max-log-streams", agent.DefaultMaxLogStreams, "log streams this agent serves at once; past it a stream is refused")
	f.StringVar(&httpAddr, "http", "", "HTTP address for /metrics, /healthz and /readyz (default none)")
	f.StringVar(&metricsTokenFile, "metrics-token-file", "", "with --certs and --http: a `FILE` holding the bearer token /metrics asks of its scraper (its series name users and jobs)")
	f.StringVar(&certs, "certs", "", "directory holding ca.crt and agents/NAME.crt and .key (corral certs issue --role agent NAME): mutual TLS with the masters")
	f.StringVar(&taskUIDs, "task-uids", "", "FIRST:COUNT: run each task as a uid of its own from this range (agent running as root)")
	f.BoolVar(&stopTasks, "stop-tasks-on-exit", false, "stop every task when the agent stops, rather than leave them for the next agent to adopt")
	return c
}
