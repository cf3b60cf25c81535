package cli

import (
	"context"
	"log/slog"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands/ops"
)

// agentRun is one machine's agent as the corral command runs it:
// agent.Run, the one loop, with the command's choices filled in (the
// masters given, panic recovery on every request, the metrics registry).
type agentRun struct {
	cfg     agent.Config
	masters []string
	// stopTasks stops every task when the agent stops (corral up);
	// otherwise they keep running for the next agent to adopt.
	stopTasks bool
	// ready is called with the address the agent serves on.
	ready func(addr string)
	log   *slog.Logger
	// http, when set, serves /metrics, /healthz and /readyz.
	http string
	// metricsToken, when set, is the bearer token /metrics asks of its
	// scraper; guardMetrics, when set without it, refuses every scrape.
	metricsToken string
	guardMetrics bool
	// metrics, when set, gets the agent's series under a machine label
	// (corral up: the master's /metrics shows every agent's).
	metrics prometheus.Registerer
}

func (r *agentRun) run(ctx context.Context) error {
	if r.log == nil {
		r.log = slog.Default()
	}
	cfg := r.cfg
	cfg.Logger = r.log.With("machine", cfg.Name)
	cfg.Masters, cfg.StopTasksOnExit, cfg.OnListen = r.masters, r.stopTasks, r.ready
	cfg.HTTPAddr, cfg.Metrics = r.http, r.metrics
	// Recovery outermost: a panic in a poll or a page answers Internal, and
	// the tasks' agent serves on.
	rec := ops.NewRecovery(r.log, nil)
	cfg.ServerOptions = append(rec.ServerOptions(), cfg.ServerOptions...)
	cfg.HTTPMiddleware = rec.Handler
	if r.metricsToken != "" || r.guardMetrics {
		cfg.HTTPMiddleware = func(h http.Handler) http.Handler { return rec.Handler(scrapeTokenGuard(r.metricsToken, h)) }
	}
	return agent.Run(ctx, cfg)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, x := range splitComma(s) {
		if x != "" && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
