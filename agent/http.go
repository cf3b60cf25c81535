package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Ready reports whether the agent is ready to serve the cell: running, and
// polled by a master within ReregisterAfter (a master that polls knows the
// machine; one that stopped polling is the reason for the error).
func (a *Agent) Ready() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return errors.New("the agent is shutting down")
	}
	if a.lastPoll.IsZero() {
		return fmt.Errorf("no master has polled machine %s since the agent started: is it registered (masters %q)?", a.cfg.Name, a.cfg.Masters)
	}
	if age := a.clock.Now().Sub(a.lastPoll); age > a.cfg.ReregisterAfter {
		return fmt.Errorf("no master has polled machine %s for %s (more than %s): the master may be down or unable to reach %s",
			a.cfg.Name, age.Round(time.Second), a.cfg.ReregisterAfter, a.cfg.ListenAddr)
	}
	return nil
}

// HTTPHandler serves the agent's operations endpoints:
//
//	/metrics  Prometheus: the agent's Collector, Go runtime and process
//	/healthz  200 "ok" while the agent runs, 503 once it is closed
//	/readyz   200 "ok" when Ready, 503 with the reason otherwise
func (a *Agent) HTTPHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		closed := a.closed
		a.mu.Unlock()
		if closed {
			http.Error(w, "the agent is shutting down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := a.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// serveHTTP serves HTTPHandler on addr until the returned stop is called.
func (a *Agent) serveHTTP(addr string) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("Config.HTTPAddr: %w", err)
	}
	h := a.HTTPHandler()
	if a.cfg.HTTPMiddleware != nil {
		h = a.cfg.HTTPMiddleware(h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("serving HTTP", "addr", lis.Addr().String(), "err", err)
		}
	}()
	a.log.Info("agent serving HTTP", "addr", lis.Addr().String())
	if a.cfg.OnHTTPListen != nil {
		a.cfg.OnHTTPListen(lis.Addr().String())
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
