package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/projections"
)

// signalContext ends on Ctrl-C or SIGTERM.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

// health is what /healthz reports.
type health struct {
	OK       bool   `json:"ok"`
	Master   string `json:"master"`
	Leader   bool   `json:"leader"`
	LeaderIs string `json:"leader_name"`
	Position int64  `json:"position"`
	Machines int    `json:"machines"`
	Jobs     int    `json:"jobs"`
	Pending  int    `json:"tasks_pending"`
}

// webHandler serves a status page (the web UI comes later) and /healthz.
func webHandler(m *master.Master, cell string, rm *runningMaster) http.Handler {
	mux := http.NewServeMux()
	snapshot := func() health {
		h := health{OK: true, Master: m.Name(), Leader: m.Leading()}
		m.View(func(s *projections.State) {
			h.LeaderIs, h.Position, h.Machines, h.Jobs, h.Pending = s.Leader, s.Position, len(s.Machines), len(s.Jobs), s.PendingCount()
		})
		return h
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(snapshot())
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		h := snapshot()
		role := "follower"
		if h.Leader {
			role = "leader"
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html>
<html><head><title>corral cell %[1]s</title>
<style>body{font-family:system-ui,sans-serif;max-width:50rem;margin:2rem auto;line-height:1.5}code{background:#f3f3f3;padding:0 .3em}</style>
</head><body>
<h1>corral cell <code>%[1]s</code></h1>
<p>Master <b>%[2]s</b> (%[3]s) at log position %[4]d: %[5]d machines, %[6]d jobs, %[7]d tasks pending.</p>
<p>The web UI is on its way. Meanwhile, from a terminal:</p>
<pre>
export CORRAL_MASTER=%[8]s
corral job submit examples/hello.jsonnet --wait
corral job list
corral task list hello
corral events --follow
</pre>
<p><a href="/healthz">/healthz</a></p>
</body></html>
`, html.EscapeString(cell), html.EscapeString(h.Master), role, h.Position, h.Machines, h.Jobs, h.Pending, html.EscapeString(rm.grpc))
	})
	return mux
}
