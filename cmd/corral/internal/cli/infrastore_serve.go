package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/ops"
	"github.com/corralhq/corral/events/storeopen"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

// infrastoreServeCommand is the Infrastore process a master runs: it holds
// the DuckDB file, ingests the log into it and answers the master's Query
// and Bill on a unix socket. The master starts it (see infraProcess); it is
// not meant to be run by hand.
func (a *app) infrastoreServeCommand() *cobra.Command {
	var db, store, sock string
	var opts InfraOptions
	c := &cobra.Command{
		Use:    "serve",
		Short:  "run the Infrastore process of a master (started by the master)",
		Hidden: true,
		Args:   args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if store == "" {
				store = a.getenv("CORRAL_STORE") // from its master: a password in argv would show in ps
			}
			if db == "" || store == "" || sock == "" {
				return usageErr("--db, --store (or CORRAL_STORE) and --socket are required")
			}
			if err := joinCgroup(); err != nil {
				return err
			}
			return a.serveInfrastore(cmd.Context(), db, store, sock, opts)
		},
	}
	f := c.Flags()
	f.StringVar(&db, "db", "", "the Infrastore file")
	f.StringVar(&store, "store", "", "the event log (default $CORRAL_STORE)")
	f.StringVar(&sock, "socket", "", "the unix socket to answer on")
	f.StringVar(&opts.Cell, "cell", "", "the cell's name, in FOCUS exports")
	f.StringVar(&opts.MemoryLimit, "memory-limit", "", "DuckDB's memory_limit")
	f.IntVar(&opts.Threads, "threads", 0, "DuckDB's threads")
	f.IntVar(&opts.MaxRows, "max-rows", 0, "rows per result")
	f.Int64Var(&opts.MaxResultBytes, "max-result-bytes", 0, "bytes of values per result")
	f.DurationVar(&opts.QueryTimeout, "query-timeout", 0, "default and longest query")
	f.Int64Var(&opts.MemoryBudget, "memory-budget", 0, "bytes this process may hold (its cgroup's limit): queries are interrupted as it nears them")
	return c
}

// serveInfrastore ingests the log of store into the file db and answers
// on the unix socket sock until ctx ends or the master that started this
// process is gone.
func (a *app) serveInfrastore(ctx context.Context, db, store, sock string, opts InfraOptions) error {
	log, err := a.serverLogger(a.stderr())
	if err != nil {
		return err
	}
	log = log.With("process", "infrastore")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go cancelWhenOrphaned(ctx, cancel, os.Getppid())
	st, err := storeopen.Open(ctx, store, storeopen.Options{NoMigrate: true})
	if err != nil {
		return fmt.Errorf("--store %s: %w", store, err)
	}
	defer st.Close()
	inf, err := a.openInfra(ctx, "--db", db, opts)
	if err != nil {
		return fmt.Errorf("--db %s: %w", db, err)
	}
	defer inf.Close()
	lis, err := listenPrivateSocket(sock)
	if err != nil {
		return err
	}
	defer lis.Close()
	timeout := opts.QueryTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	g := grpc.NewServer(ops.NewRecovery(log, nil).ServerOptions()...)
	apipb.RegisterCellServer(g, &infraServer{inf: inf, timeout: timeout + 10*time.Second, log: log})
	go func() {
		// Ingestion stopping is logged; queries answer from what the
		// file holds.
		if err := inf.Run(ctx, st); err != nil && ctx.Err() == nil {
			log.Error("Infrastore ingestion stopped; `corral sql` answers from what it holds", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	log.Info("Infrastore serving", "db", db, "socket", sock, "memory_limit", opts.MemoryLimit, "threads", opts.Threads,
		"max_rows", opts.MaxRows, "max_result_bytes", opts.MaxResultBytes, "query_timeout", timeout, "memory_budget", opts.MemoryBudget)
	if err := g.Serve(lis); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// cancelWhenOrphaned cancels ctx once this process's parent is no longer
// parent. The
// master may die without a word (SIGKILL): the kernel's parent-death
// signal ends this process then, and this check covers a parent that
// exits another way.
func cancelWhenOrphaned(ctx context.Context, cancel context.CancelFunc, parent int) {
	for ctx.Err() == nil && os.Getppid() == parent {
		time.Sleep(time.Second)
	}
	cancel()
}

// listenPrivateSocket listens on the unix socket path, which only this
// user may connect to.
func listenPrivateSocket(path string) (net.Listener, error) {
	_ = os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("--socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, err
	}
	return lis, nil
}
