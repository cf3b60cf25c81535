package ops

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// NewLogger returns a logger writing to w in format "text" (for a
// terminal) or "json" (one object per line, for a log pipeline), at the
// level level holds; changing level changes what is logged from then on.
func NewLogger(w io.Writer, format string, level *slog.LevelVar) (*slog.Logger, error) {
	if level == nil {
		level = new(slog.LevelVar)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(format) {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// ParseLevel reads debug, info, warn or error (or slog's own forms such as
// "info+2").
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// LevelHandler reads and sets level at run time: GET answers the level;
// PUT or POST with the new level as the body (or ?level=) sets it.
//
//	curl -X PUT --data debug http://127.0.0.1:6060/debug/loglevel
func LevelHandler(level *slog.LevelVar, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
		case http.MethodPut, http.MethodPost:
			want := r.URL.Query().Get("level")
			if want == "" {
				b, _ := io.ReadAll(io.LimitReader(r.Body, 64))
				want = string(b)
			}
			l, err := ParseLevel(want)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			old := level.Level()
			level.Set(l)
			if log != nil {
				log.Info("log level changed", "from", old.String(), "to", l.String(), "by", r.RemoteAddr)
			}
		default:
			w.Header().Set("Allow", "GET, PUT, POST")
			http.Error(w, "use GET to read the level, PUT to set it", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, strings.ToLower(level.Level().String()))
	})
}

// ToggleDebugOnSignal switches level between debug and base on every
// SIGUSR1 until ctx ends: `kill -USR1 <pid>` turns debug logging on, the
// next one off again.
func ToggleDebugOnSignal(ctx context.Context, level *slog.LevelVar, base slog.Level, log *slog.Logger) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				to := slog.LevelDebug
				if level.Level() == slog.LevelDebug {
					to = base
				}
				level.Set(to)
				if log != nil {
					log.Log(ctx, max(to, slog.LevelInfo), "log level changed by SIGUSR1", "to", to.String())
				}
			}
		}
	}()
}
