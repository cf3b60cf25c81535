package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// DebugHandler serves net/http/pprof under /debug/pprof/ and, when level
// is set, LevelHandler at /debug/loglevel.
func DebugHandler(level *slog.LevelVar, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if level != nil {
		mux.Handle("/debug/loglevel", LevelHandler(level, log))
	}
	return mux
}

// CheckLoopback refuses an address a remote machine could reach: the
// debug listener hands out profiles, goroutine dumps and the log level, so
// it listens on 127.0.0.1, [::1] or localhost only.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--debug-addr %q: want host:port on a loopback address, e.g. 127.0.0.1:6060: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--debug-addr %q: the debug listener serves profiles and the log level, so it listens on a loopback address only (127.0.0.1, [::1] or localhost), never %q; reach it remotely through ssh -L", addr, host)
}

// ServeDebug serves DebugHandler on addr, which must be a loopback
// address, until ctx ends. onListen, if set, gets the address listened on.
func ServeDebug(ctx context.Context, addr string, level *slog.LevelVar, log *slog.Logger, onListen func(string)) error {
	if err := CheckLoopback(addr); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--debug-addr %s: %w", addr, err)
	}
	if tcp, ok := lis.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		lis.Close()
		return fmt.Errorf("--debug-addr %s: resolved to %s, not a loopback address", addr, lis.Addr())
	}
	srv := &http.Server{Handler: NewRecovery(log, nil).Handler(DebugHandler(level, log)), ReadHeaderTimeout: 10 * time.Second}
	if log != nil {
		log.Info("debug listener serving pprof and the log level", "addr", lis.Addr().String())
	}
	if onListen != nil {
		onListen(lis.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
