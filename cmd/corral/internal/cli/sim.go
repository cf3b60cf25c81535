package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events/storeopen"
	"github.com/corralhq/corral/fauxmaster"
	"github.com/corralhq/corral/projections"
)

// replayFlags are `corral sim`'s flags.
type replayFlags struct {
	store, data, infra, from, to, remove, policy, trace string
	share                                               float64
	add, jobChanges, quotas                             []string
	pool, diffs                                         int
	seed                                                uint64
}

// simCommand is the Fauxmaster: a window of the cell's log replayed
// through the cell's own code with a change, recorded against simulated.
func (a *app) simCommand() *cobra.Command {
	var s replayFlags
	c := &cobra.Command{
		Use:   "sim",
		Short: "replay a window of the cell's history with a change (machines, policy) and compare with what happened",
		Long: `sim replays a window of the cell's log through the cell's own commands and
scheduling pass, with a change, and reports recorded against simulated: pending
time per user and band, tasks placed and left pending, evictions, CPU and
memory held, machines used, and each placement that differs and why. It reads
the log directly (the master need not run) and writes nothing.`,
		Example: `  corral sim --from 2026-11-20T00:00:00Z --to 2026-11-27T00:00:00Z --remove 10%
  corral sim --add 200x32c128g --policy best-fit -o json
  corral sim --job 'alice/*:priority=9' --quota bob/batch=50,200Gi
  corral sim --google-trace ~/traces/google-clusterdata-2011-2 --share 0.1`,
		Args: args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Run by the master for its web UI's what-if page, this process
			// joins the cgroup that bounds its memory before it reads
			// anything (simproc.go).
			if err := joinCgroup(); err != nil {
				return err
			}
			if !cmd.Flags().Changed("differences") && a.output == "json" {
				s.diffs = -1 // every one
			}
			change, err := fauxmaster.ParseChange(fauxmaster.ChangeArgs{Remove: s.remove, Add: s.add, Jobs: s.jobChanges, Quotas: s.quotas, Policy: s.policy, Pool: s.pool})
			if err != nil {
				return usageErr("--%v", err)
			}
			var rep *fauxmaster.Report
			if s.trace != "" {
				rep, err = s.replayTrace(change)
			} else {
				rep, err = a.replayLog(cmd, &s, change)
			}
			if err != nil {
				return err
			}
			return a.writeSimReport(rep, s.diffs)
		},
	}
	f := c.Flags()
	f.StringVar(&s.store, "store", "", "the event log: postgres://... or a SQLite file (default $CORRAL_STORE or DATA/events.db)")
	f.StringVar(&s.infra, "infrastore", "", "read the log from an Infrastore file (its events table) instead of the store")
	f.StringVar(&s.data, "data", "", "the data directory `DIR` of a cell run by corral up (default $CORRAL_DATA or "+DefaultData+")")
	f.StringVar(&s.from, "from", "", "the window's start: a log position or an RFC 3339 time (default the log's beginning)")
	f.StringVar(&s.to, "to", "", "the window's end: a log position or an RFC 3339 time (default the log's head)")
	f.StringVar(&s.remove, "remove", "", "remove this share of the machines at the window's start, e.g. 10%")
	f.StringArrayVar(&s.add, "add", nil, "add machines at the window's start: COUNTxCORESc<GiB>g[<N>gpu], e.g. 200x32c128g (repeatable)")
	f.StringArrayVar(&s.jobChanges, "job", nil, "change the jobs USER/JOB selects (patterns allowed): USER/JOB:priority=N or USER/JOB:scale=F for requests (repeatable)")
	f.StringArrayVar(&s.quotas, "quota", nil, "set a quota instead of the recorded one: USER/BAND=CPU,MEMORY, e.g. alice/production=100,400Gi (repeatable)")
	f.StringVar(&s.policy, "policy", "", "the pass's policy: worst-fit, best-fit or hybrid (default the cell's)")
	f.IntVar(&s.pool, "pool", 0, "the pass's pool of feasible machines per class (0: the cell's; -1: every feasible machine)")
	f.Uint64Var(&s.seed, "seed", 1, "draws the machines --remove takes")
	f.IntVar(&s.diffs, "differences", 20, "list at most this many differing placements (-o json lists them all unless this is given)")
	f.StringVar(&s.trace, "google-trace", "", "replay the public Google trace (clusterdata-2011-2's folder) as a cell instead of a log")
	f.Float64Var(&s.share, "share", 1, "with --google-trace: the share of its machines and jobs to replay")
	return c
}

// replayTrace replays --share of the public Google trace as a cell, with
// change.
func (s *replayFlags) replayTrace(change fauxmaster.Change) (*fauxmaster.Report, error) {
	if s.store != "" || s.data != "" || s.infra != "" || s.from != "" || s.to != "" {
		return nil, usageErr("--google-trace replays the trace: drop --store, --data, --infrastore, --from and --to")
	}
	if !(s.share > 0 && s.share <= 1) { // NaN too
		return nil, usageErr("--share %g: want a share in (0, 1]", s.share)
	}
	start, evs, err := fauxmaster.GoogleTrace(s.trace, fauxmaster.GoogleOptions{Share: s.share, Seed: s.seed})
	if err != nil {
		return nil, usageErr("--google-trace: %v", err)
	}
	rec, err := fauxmaster.FromEvents(start, evs)
	if err != nil {
		return nil, err
	}
	debug.SetGCPercent(400)
	rep, err := fauxmaster.Run(rec, fauxmaster.Options{Change: change, Seed: s.seed, PassDelay: time.Second})
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return rep, nil
}

// replayLog replays the window [--from, --to] of the cell's log, with
// change.
func (a *app) replayLog(cmd *cobra.Command, s *replayFlags, change fauxmaster.Change) (*fauxmaster.Report, error) {
	ctx := cmd.Context()
	log, closeLog, err := a.simSource(cmd, s.store, s.data, s.infra)
	if err != nil {
		return nil, err
	}
	defer closeLog()
	head, err := log.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the log's head: %w", err)
	}
	if head == 0 {
		if s.infra != "" {
			return nil, usageErr("--infrastore %s holds no log (a file made by import-google-trace keeps the trace's tables only: replay the trace with --google-trace)", s.infra)
		}
		return nil, usageErr("the log is empty: nothing to replay")
	}
	fromPos, err := logPoint(cmd, log, "from", s.from, 0)
	if err != nil {
		return nil, err
	}
	toPos, err := logPoint(cmd, log, "to", s.to, head)
	if err != nil {
		return nil, err
	}
	// A replay allocates fast and keeps little: collecting less often
	// makes it a fifth faster for memory this command has.
	debug.SetGCPercent(400)
	rep, err := fauxmaster.Replay(ctx, log, fromPos, toPos, fauxmaster.Options{Change: change, Seed: s.seed})
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return rep, nil
}

// simSource opens the log a replay reads: an Infrastore file's events
// table, or the cell's store. Either is only read.
func (a *app) simSource(cmd *cobra.Command, store, data, infra string) (projections.Source, func(), error) {
	ctx := cmd.Context()
	if infra != "" {
		if store != "" || data != "" {
			return nil, nil, usageErr("--infrastore reads the log from the file: drop --store and --data")
		}
		if _, err := os.Stat(infra); err != nil {
			return nil, nil, fmt.Errorf("--infrastore: %w", err)
		}
		inf, err := a.openInfra(ctx, "--infrastore", infra, InfraOptions{ReadOnly: true})
		if err != nil {
			return nil, nil, fmt.Errorf("--infrastore %s: %w", infra, err)
		}
		return inf.Log(), func() { inf.Close() }, nil
	}
	st := store
	if st == "" {
		st = a.getenv("CORRAL_STORE")
	}
	if st == "" {
		st = filepath.Join(a.dataDir(data), "events.db")
	}
	log, err := storeopen.Open(ctx, st, storeopen.Options{NoMigrate: true})
	if err != nil {
		return nil, nil, fmt.Errorf("--store %s: %w", st, err)
	}
	return log, func() { log.Close() }, nil
}

func (a *app) writeSimReport(rep *fauxmaster.Report, diffs int) error {
	if a.output == "json" {
		rep.Placements.KeepDifferences(diffs)
		enc := json.NewEncoder(a.stdout())
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteText(a.stdout(), diffs)
}

// logPoint reads a window end: a position, or a time resolved to the last
// event at or before it.
func logPoint(cmd *cobra.Command, log projections.Source, flag, v string, def int64) (int64, error) {
	if v == "" {
		return def, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, usageErr("--%s %d: a position is not negative", flag, n)
		}
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, usageErr("--%s %q: want a log position or an RFC 3339 time such as 2026-11-20T14:02:00Z", flag, v)
	}
	// The rule every surface keeps for a moment of the log (state --at,
	// the API's times): the past only.
	if err := commands.CheckPastMoment("", t, time.Now()); err != nil {
		return 0, usageErr("--%s: %v", flag, err)
	}
	pos, err := projections.PositionAt(cmd.Context(), log, t)
	if err != nil {
		return 0, fmt.Errorf("--%s: %w", flag, err)
	}
	return pos, nil
}
