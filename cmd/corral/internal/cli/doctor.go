package cli

import (
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/commands/ops"
)

func (a *app) doctorCommand() *cobra.Command {
	cfg := ops.DoctorConfig{}
	var data string
	c := &cobra.Command{
		Use:   "doctor",
		Short: "check the cell and say what is wrong, with the fix for each problem",
		Long: `Check the cell: the masters answer; the event log is reachable and its
schema migrations current; who leads and since when; every agent up and
polled recently; the agents' clocks agree with the master's; whether agents
enforce limits with cgroups; the Infrastore's lag; free space in the data
directory. Each problem is said in plain words with its fix. The exit code
is 1 when anything is wrong (warnings do not count), 0 otherwise.

The event log is read directly (never written) with --store, by default
$CORRAL_STORE, or the SQLite log of a ` + "`corral up`" + ` data directory.`,
		Example: `  corral doctor
  corral doctor --master master1:7070,master2:7070 --store postgres://corral@db/corral --data /var/lib/corral`,
		Args: args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Masters = splitList(a.masterAddr())
			cfg.User = a.caller()
			if cfg.Timeout <= 0 {
				cfg.Timeout = min(a.timeout, 10*time.Second)
			}
			dir := a.dataDir(data)
			if _, err := os.Stat(dir); err == nil {
				cfg.DataDir = dir
			} else if data != "" {
				return usageErr("--data %s: %v", data, err)
			}
			if cfg.Store == "" {
				cfg.Store = a.getenv("CORRAL_STORE")
			}
			if cfg.Store == "" && cfg.DataDir != "" {
				if p := filepath.Join(cfg.DataDir, "events.db"); fileExists(p) {
					cfg.Store = p
				}
			}
			dial, err := a.dialOptions(cfg.User, data)
			if err != nil {
				return err
			}
			cfg.DialOptions = dial
			rep := ops.Doctor(cmd.Context(), cfg)
			if a.output == "json" || a.output == "yaml" {
				if err := a.show(nil, rep); err != nil {
					return err
				}
			} else {
				rep.Write(a.stdout())
			}
			if !rep.OK() {
				return &silentErr{code: ExitFailed}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Store, "store", "", "the event log to read: postgres://..., cockroachdb://... or a SQLite file (default $CORRAL_STORE, or DATA/events.db)")
	f.StringVar(&data, "data", "", "the data directory whose free space to check (default $CORRAL_DATA or "+DefaultData+" when it exists)")
	f.DurationVar(&cfg.MaxSkew, "max-skew", time.Second, "largest clock difference between the master and an agent that passes")
	f.DurationVar(&cfg.MaxPollAge, "max-poll-age", 30*time.Second, "an agent not polled for longer is reported")
	f.Int64Var(&cfg.MaxInfraLag, "max-infrastore-lag", 10_000, "events the Infrastore may trail the log by")
	f.DurationVar(&cfg.Timeout, "check-timeout", 0, "time limit of each remote call (default the smaller of --rpc-timeout and 10s)")
	return c
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
