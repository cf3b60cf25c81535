package cli

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/commands/ops"
	"github.com/corralhq/corral/events"
)

// opsFlags are the global flags of the server verbs' operations: log
// format, the debug listener.
type opsFlags struct {
	logFormat string
	debugAddr string
	level     slog.LevelVar
}

func (o *opsFlags) add(pf *pflag.FlagSet) {
	pf.StringVar(&o.logFormat, "log-format", "text", "log format of the server verbs: text (for a terminal) or json")
	pf.StringVar(&o.debugAddr, "debug-addr", "", "serve pprof and the log level (PUT /debug/loglevel) on this loopback address, e.g. 127.0.0.1:6060 (default off)")
}

// serverLogger returns the logger of a server verb: --log-format to w, at
// info (debug with --verbose); the level changes at run time through the
// debug listener's /debug/loglevel or SIGUSR1. It also refuses a
// --debug-addr that is not loopback, before anything starts.
func (a *app) serverLogger(w io.Writer) (*slog.Logger, error) {
	base := slog.LevelInfo
	if a.verbose {
		base = slog.LevelDebug
	}
	a.ops.level.Set(base)
	log, err := ops.NewLogger(w, a.ops.logFormat, &a.ops.level)
	if err != nil {
		return nil, usageErr("--log-format: %v", err)
	}
	if a.ops.debugAddr != "" {
		if err := ops.CheckLoopback(a.ops.debugAddr); err != nil {
			return nil, usageErr("%v", err)
		}
	}
	return log, nil
}

// serveDebug runs the debug listener of --debug-addr (if given) and the
// SIGUSR1 level toggle until ctx ends. It fails at once for an address
// that is not loopback; a listener that fails later reports to errc (or
// the log when errc is nil).
func (a *app) serveDebug(ctx context.Context, log *slog.Logger, errc chan<- error) error {
	base := a.ops.level.Level()
	ops.ToggleDebugOnSignal(ctx, &a.ops.level, base, log)
	if a.ops.debugAddr == "" {
		return nil
	}
	if err := ops.CheckLoopback(a.ops.debugAddr); err != nil {
		return usageErr("%v", err)
	}
	go func() {
		if err := ops.ServeDebug(ctx, a.ops.debugAddr, &a.ops.level, log, nil); err != nil && ctx.Err() == nil {
			if errc == nil {
				log.Error("the debug listener stopped", "addr", a.ops.debugAddr, "err", err)
				return
			}
			errc <- fmt.Errorf("debug listener: %w", err)
		}
	}()
	return nil
}

// masterOps is what a master serves for its operators: its metrics, and
// /metrics and /readyz on its HTTP port.
type masterOps struct {
	reg *prometheus.Registry
	mm  *ops.Master
}

func newMasterOps() *masterOps {
	reg := ops.NewRegistry()
	return &masterOps{reg: reg, mm: ops.NewMaster(reg)}
}

// store instruments the master's event store.
func (o *masterOps) store(s events.Store) events.Store { return ops.InstrumentStore(s, o.reg) }

// watch reads m (and the Infrastore's position, when one runs) at each
// scrape.
func (o *masterOps) watch(m *master.Master, inf *infraProcess) {
	o.mm.Watch(m)
	if inf != nil {
		o.mm.Consumer("infrastore", inf.Position)
	}
}

// handler serves /metrics and /readyz, and the rest (the web UI and
// /healthz) from next. With tokens (a master with --certs), /metrics
// answers only an admin's bearer token (commands.MayReadMetrics); without
// (an insecure master, where any caller may name itself admin) it is open.
func (o *masterOps) handler(m *master.Master, tokens *auth.Tokens, next http.Handler, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	metrics := ops.MetricsHandler(o.reg)
	if tokens != nil {
		metrics = adminBearer(m, tokens, metrics)
	}
	mux.Handle("GET /metrics", metrics)
	mux.Handle("GET /readyz", ops.Readyz(3*time.Second, ops.MasterChecks(m, ops.DefaultMaxLag)...))
	mux.Handle("/", next)
	return ops.NewRecovery(log, o.reg).Handler(mux)
}

// readScrapeToken reads the token a file holds ("" for no file): at
// least 16 bytes, so it cannot be guessed.
func readScrapeToken(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", usageErr("--metrics-token-file: %v", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 {
		return "", usageErr("--metrics-token-file %s: the token is %d bytes; want at least 16 (e.g. openssl rand -hex 32 > %s)", file, len(tok), file)
	}
	return tok, nil
}

// scrapeTokenGuard serves /metrics of next only to "Authorization: Bearer
// <token>" (compared in constant time; an empty token refuses every
// scrape); /healthz and /readyz, which name no one, stay open.
func scrapeTokenGuard(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			next.ServeHTTP(w, r)
			return
		}
		// The scheme is case-insensitive (RFC 7235).
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer")
		if token == "" || !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="corral-agent"`)
			msg := "authorization: want \"Bearer <token>\" of the file the agent's --metrics-token-file names (its series name users and jobs)"
			if token == "" {
				msg = "this agent serves /metrics to no one: start it with --metrics-token-file FILE and scrape with that token (its series name users and jobs)"
			}
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// adminBearer serves next to a request with "Authorization: Bearer
// <token>" whose identity may read metrics; 401 without a known token,
// 403 for one that may not.
func adminBearer(m *master.Master, tokens *auth.Tokens, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || tok == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="corral"`)
			http.Error(w, "authorization: want \"Bearer <token>\" of an admin (corral token issue --role admin NAME)", http.StatusUnauthorized)
			return
		}
		id, err := tokens.Lookup(tok)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="corral", error="invalid_token"`)
			http.Error(w, "authorization: "+err.Error(), http.StatusUnauthorized)
			return
		}
		if err := commands.MayReadMetrics(m.ActorOf(id)); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
