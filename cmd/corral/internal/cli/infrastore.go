package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/corralhq/corral/events/storeopen"
	"github.com/spf13/cobra"
)

func (a *app) infrastoreCommand() *cobra.Command {
	c := &cobra.Command{Use: "infrastore", Short: "rebuild the Infrastore from the log, or load the public Google trace into it"}
	var p infrastorePaths
	rebuild, imp := a.infrastoreRebuildCommand(&p), a.infrastoreImportCommand(&p)
	for _, x := range []*cobra.Command{rebuild, imp} {
		x.Flags().StringVar(&p.db, "db", "", "the Infrastore file (default DATA/infrastore.duckdb)")
		x.Flags().StringVar(&p.data, "data", "", "the data directory `DIR` of a cell run by corral up (default $CORRAL_DATA or "+DefaultData+")")
	}
	rebuild.Flags().StringVar(&p.store, "store", "", "the event log: postgres://... or a SQLite file (default $CORRAL_STORE or DATA/events.db)")
	c.AddCommand(rebuild, imp, a.infrastoreServeCommand())
	return c
}

// infrastorePaths are the --db, --store and --data of the infrastore verbs.
type infrastorePaths struct{ db, store, data string }

// resolve is the Infrastore file and the log, by default those of the
// data directory.
func (p *infrastorePaths) resolve(a *app) (db, store string) {
	d := a.dataDir(p.data)
	db, store = p.db, p.store
	if db == "" {
		db = filepath.Join(d, "infrastore.duckdb")
	}
	if store == "" {
		store = a.getenv("CORRAL_STORE")
	}
	if store == "" {
		store = filepath.Join(d, "events.db")
	}
	return db, store
}

func (a *app) infrastoreRebuildCommand(p *infrastorePaths) *cobra.Command {
	return &cobra.Command{
		Use:   "rebuild",
		Short: "re-derive every Infrastore table from the log (stop the master holding the file first)",
		Args:  args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			dbp, st := p.resolve(a)
			log, err := storeopen.Open(ctx, st, storeopen.Options{NoMigrate: true})
			if err != nil {
				return fmt.Errorf("--store %s: %w", st, err)
			}
			defer log.Close()
			inf, err := a.openInfra(ctx, "--db", dbp, InfraOptions{})
			if err != nil {
				return err
			}
			defer inf.Close()
			head, err := log.Head(ctx)
			if err != nil {
				return fmt.Errorf("--store %s: %w", st, err)
			}
			start := time.Now()
			showing, stop := context.WithCancel(ctx)
			shown := make(chan struct{})
			go func() {
				defer close(shown)
				showProgress(showing, a.stderr(), isTerminal(a.stderr()), head, func() (int64, error) { return inf.Position(showing) })
			}()
			pos, err := inf.Rebuild(ctx, log)
			stop()
			<-shown
			if err != nil {
				return err
			}
			took := time.Since(start)
			fmt.Fprintf(a.stdout(), "%s rebuilt from %s up to position %d in %s (%s events/s)\n", dbp, st, pos,
				took.Truncate(time.Millisecond), groupDigits(int64(float64(pos)/max(took.Seconds(), 1e-9))))
			return nil
		},
	}
}

func (a *app) infrastoreImportCommand(p *infrastorePaths) *cobra.Command {
	return &cobra.Command{
		Use:     "import-google-trace DIR",
		Short:   "load the public Google cluster trace (clusterdata-2011-2 task_events and job_events) as a cell's history",
		Example: "  corral infrastore import-google-trace --db trace.duckdb ~/traces/google-clusterdata-2011-2",
		Args:    args(1, 1, "the trace directory"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			dbp, _ := p.resolve(a)
			inf, err := a.openInfra(cmd.Context(), "--db", dbp, InfraOptions{})
			if err != nil {
				return err
			}
			defer inf.Close()
			msg, err := inf.ImportGoogleTrace(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "%s: %s\n", dbp, msg)
			a.note("next: corral sql --db %s \"SELECT event_type, count(*) FROM task_events GROUP BY ALL ORDER BY 1\"", dbp)
			return nil
		},
	}
}
