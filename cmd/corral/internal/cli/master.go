package cli

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// masterFlags are `corral master`'s flags that are not masterOptions'.
type masterFlags struct {
	admins, certs string
	insecureMode  bool
	infra         infraFlags
	sim           simFlags
}

func (a *app) masterCommand() *cobra.Command {
	o := masterOptions{}
	var mf masterFlags
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
			if err := a.completeMasterOptions(cmd, &o, mf); err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			return a.serveMaster(ctx, o, nil)
		},
	}
	f := c.Flags()
	mf.infra.add(f)
	mf.sim.add(f)
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
	f.StringVar(&mf.admins, "admins", "", "users with the admin capability, comma-separated")
	f.StringVar(&o.infrastore, "infrastore", "", "Infrastore (DuckDB) `FILE` to keep and serve corral sql and corral bill from (default none)")
	f.StringVar(&o.prices, "prices", "", "price sheet `FILE` (JSON or YAML, as corral price set reads) a new cell starts with (default the built-in sheet)")
	f.DurationVar(&o.usageWindow, "usage-window", 0, "how often each machine's usage becomes an event (default 5m)")
	f.StringVar(&mf.certs, "certs", "", "the cell directory (corral certs init): serve TLS with masters/NAME.crt, tokens and secrets")
	f.BoolVar(&mf.insecureMode, "insecure", false, "serve plaintext and trust the user clients name (development on a trusted machine only)")
	return c
}

// completeMasterOptions completes o from the environment and the flags that are
// not its fields, and checks them.
func (a *app) completeMasterOptions(cmd *cobra.Command, o *masterOptions, mf masterFlags) error {
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
	for _, ad := range splitComma(mf.admins) {
		if ad != "" {
			o.admins = append(o.admins, ad)
		}
	}
	log, err := a.serverLogger(a.stderr())
	if err != nil {
		return err
	}
	o.log = log
	if err := a.masterSecurity(cmd, o, mf); err != nil {
		return err
	}
	if o.infraLimits, err = mf.infra.resolve(); err != nil {
		return err
	}
	if o.simLimits, err = mf.sim.resolve(); err != nil {
		return err
	}
	return o.streams.check()
}

// masterSecurity sets how the master serves its API: TLS with the
// certificates of --certs, or plaintext with --insecure; one of them.
func (a *app) masterSecurity(cmd *cobra.Command, o *masterOptions, mf masterFlags) error {
	var err error
	switch {
	case mf.certs != "" && mf.insecureMode:
		return usageErr("--certs and --insecure: give one")
	case mf.certs != "":
		if o.auth, err = loadMasterAuth(mf.certs, o.name); err != nil {
			return err
		}
		if !cmd.Flags().Changed("cell") && a.getenv("CORRAL_CELL") == "" {
			o.cell = o.auth.creds.Cell
		}
		if o.cell != o.auth.creds.Cell {
			return usageErr("--cell %s: the certificates in %s are cell %s's", o.cell, mf.certs, o.auth.creds.Cell)
		}
		if o.auth.sealer == nil {
			o.log.Warn("no secrets key in the cell directory: specs that give secret values are refused", "certs", mf.certs)
		}
	case mf.insecureMode:
		o.log.Warn("INSECURE: the API is plaintext and believes any user a client names in x-corral-user; anyone who reaches this address can act as anyone, admins included, and register machines. Use --certs DIR on any network but a trusted machine.")
	default:
		return usageErr("give --certs DIR (a cell directory from `corral certs init`) to serve TLS, or --insecure for plaintext on a trusted machine")
	}
	return nil
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

func splitComma(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}
