package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net/http"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/commands/webui"
	"github.com/corralhq/corral/fauxmaster"
	"github.com/corralhq/corral/projections"
)

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

// webAccess is who may read the web UI: with tokens (a master with
// --certs), a login with one of them unless anonymous (--web-anonymous).
type webAccess struct {
	hosts     []string
	tokens    *auth.Tokens // nil: no login (an insecure master)
	anonymous bool
}

func (a webAccess) login() func(context.Context, string) (auth.Identity, error) {
	if a.tokens == nil {
		return nil
	}
	return func(_ context.Context, tok string) (auth.Identity, error) {
		id, err := a.tokens.Lookup(tok)
		if err != nil {
			return auth.Identity{}, err
		}
		if !id.Role.Person() {
			return auth.Identity{}, fmt.Errorf("a %s token cannot log in", id.Role)
		}
		return id, nil
	}
}

// webLog is what the web UI reads of the log: task histories by stream,
// and the window the what-if page replays.
type webLog interface {
	webui.Streams
	projections.Source
}

// webHandler serves the web UI (or, when it cannot start, a status page)
// and /healthz. The returned close ends the UI's live streams.
func webHandler(svc *api.Service, m *master.Master, store webLog, logs webui.Logs, replay func(context.Context, webui.ReplayRequest) (*fauxmaster.Report, error),
	cell string, access webAccess, rm *runningMaster, log *slog.Logger) (http.Handler, func()) {
	mux := http.NewServeMux()
	ui, err := webui.New(webui.Config{API: redactedAPI{svc}, Cell: m, Streams: store, Log: store, Replay: replay, Logs: logs, Logger: log, LossHold: m.LossHold,
		Hosts: access.hosts, Login: access.login(), Anonymous: access.anonymous})
	if err != nil {
		log.Error("the web UI cannot start; serving a status page", "err", err)
	}
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
	if ui != nil {
		mux.Handle("/", ui)
		return mux, ui.Close
	}
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
	return mux, func() {}
}

// redactedAPI is the Service as the web UI reads it in-process, past the
// gRPC interceptors: every reply goes through auth.Redact, so a page shows
// "<redacted>" for a secret as `corral` does, and no sealed value.
type redactedAPI struct{ webui.API }

func (r redactedAPI) List(ctx context.Context, req *apipb.ListRequest) (*apipb.JobList, error) {
	rep, err := r.API.List(ctx, req)
	auth.Redact(rep)
	return rep, err
}

func (r redactedAPI) Get(ctx context.Context, req *apipb.GetRequest) (*apipb.JobView, error) {
	rep, err := r.API.Get(ctx, req)
	auth.Redact(rep)
	return rep, err
}

func (r redactedAPI) Events(ctx context.Context, req *apipb.EventsRequest) (*apipb.EventList, error) {
	rep, err := r.API.Events(ctx, req)
	auth.Redact(rep)
	return rep, err
}

func (r redactedAPI) Watch(req *apipb.EventsRequest, stream apipb.Cell_WatchServer) error {
	return r.API.Watch(req, redactedWatch{stream})
}

type redactedWatch struct{ apipb.Cell_WatchServer }

func (w redactedWatch) Send(ev *apipb.EventView) error {
	auth.Redact(ev)
	return w.Cell_WatchServer.Send(ev)
}
