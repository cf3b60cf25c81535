package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// eventsWindow is how many positions of the log the events page scans for
// matching events; eventsShown how many of them it shows.
const (
	eventsWindow = 5000
	eventsShown  = 200
)

type eventsData struct {
	User, Job, Type string
	Stream          string // a stream prefix
	Types           []string
	Rows            []eventRow
	FromPos, ToPos  int64
	Older           string
	Live            string // the live stream's URL
	Err             string
}

type eventRow struct {
	*apipb.EventView
	Href string
}

// eventsFilter reads the page's filters; the error names the field.
func eventsFilter(r *http.Request) (*apipb.EventsRequest, error) {
	q := r.URL.Query()
	req := &apipb.EventsRequest{User: strings.TrimSpace(q.Get("user")), Job: strings.TrimSpace(q.Get("job")), Type: strings.TrimSpace(q.Get("type")),
		StreamPrefix: strings.TrimSpace(q.Get("stream"))}
	if req.Job != "" && req.User == "" {
		if u, j, ok := strings.Cut(req.Job, "/"); ok {
			req.User, req.Job = u, j
		} else {
			return req, errors.New("job: name its user too, in the user field or as user/job")
		}
	}
	return req, nil
}

// href links the page of what an event's stream names.
func href(stream string) string {
	parts := strings.Split(stream, "/")
	switch {
	case len(parts) == 3 && parts[0] == "job":
		return jobURL(parts[1], parts[2])
	case len(parts) == 4 && parts[0] == "task":
		if i, err := strconv.ParseInt(parts[3], 10, 32); err == nil {
			return taskURL(parts[1], parts[2], int32(i))
		}
	case len(parts) == 2 && parts[0] == "machine":
		return machineURL(parts[1])
	}
	return ""
}

func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	req, err := eventsFilter(r)
	d := eventsData{User: req.User, Job: req.Job, Type: req.Type, Stream: req.StreamPrefix, Types: events.Types()}
	if err != nil {
		d.Err = err.Error()
		w.WriteHeader(http.StatusBadRequest)
		h.render(w, r, "events", page{Title: "Events", Nav: "events", Data: d})
		return
	}
	var head int64
	h.cfg.Cell.View(func(st *projections.State) { head = st.Position })
	before, err := intParam(r, "before", int(head))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	to := min(int64(before), head)
	from := max(1, to-eventsWindow+1)
	d.FromPos, d.ToPos = from, to
	if to > 0 {
		req.FromPosition, req.Limit = from, eventsWindow
		list, err := h.cfg.API.Events(h.ctx(r), req)
		if err != nil {
			h.failAPI(w, r, err)
			return
		}
		var rows []eventRow
		for _, e := range list.Events {
			if e.Position <= to {
				rows = append(rows, eventRow{EventView: e, Href: href(e.Stream)})
			}
		}
		if len(rows) > eventsShown {
			rows = rows[len(rows)-eventsShown:]
			d.FromPos = rows[0].Position
		}
		// Newest first.
		for i := len(rows) - 1; i >= 0; i-- {
			d.Rows = append(d.Rows, rows[i])
		}
		if d.FromPos > 1 {
			q := r.URL.Query()
			q.Set("before", strconv.FormatInt(d.FromPos-1, 10))
			d.Older = "/events?" + q.Encode()
		}
	}
	// The live stream starts after the newest position shown, and only
	// when the page shows the head.
	if to == head {
		q := r.URL.Query()
		q.Del("before")
		q.Set("from", strconv.FormatInt(head+1, 10))
		d.Live = "/events/stream?" + q.Encode()
	}
	h.render(w, r, "events", page{Title: "Events", Nav: "events", Script: "events.js", Data: d})
}

// liveEvent is what the stream sends for each event.
type liveEvent struct {
	Position int64  `json:"position"`
	Time     string `json:"time"`
	Type     string `json:"type"`
	Stream   string `json:"stream"`
	Href     string `json:"href,omitempty"`
	Actor    string `json:"actor"`
	Summary  string `json:"summary"`
}

// eventStream serves the live log as server-sent events through the API's
// Watch. A reconnecting browser resumes after the Last-Event-ID it saw.
func (h *Handler) eventStream(w http.ResponseWriter, r *http.Request) {
	req, err := eventsFilter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	from, err := intParam(r, "from", 0)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("Last-Event-ID: %q is not a position", id), http.StatusBadRequest)
			return
		}
		from = int(n + 1)
	}
	if from == 0 {
		var head int64
		h.cfg.Cell.View(func(st *projections.State) { head = st.Position })
		from = int(head + 1)
	}
	req.FromPosition = int64(from)
	rc := startEventStream(w)
	// The stream ends when the browser leaves or the handler is closed.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// The viewer's identity, so the watch counts against their own cap on
	// open streams, not one shared by every browser.
	s := &sseStream{ctx: h.ctx(r.WithContext(ctx)), w: w, rc: rc}
	if err := s.write("retry: 2000\n\n"); err != nil {
		return
	}
	go func() {
		// Comments keep proxies from closing an idle stream.
		tick := time.NewTicker(15 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.closed:
				cancel()
				return
			case <-tick.C:
				if s.write(": ping\n\n") != nil {
					return
				}
			}
		}
	}()
	if err := h.cfg.API.Watch(req, s); err != nil && ctx.Err() == nil {
		msg, _ := json.Marshal(status.Convert(err).Message())
		_ = s.write("event: failure\ndata: " + string(msg) + "\n\n")
	}
}

// sseStream adapts an HTTP response to the API's Watch stream.
// startEventStream answers with a server-sent event stream, which
// outlives any write timeout the server sets for pages.
func startEventStream(w http.ResponseWriter) *http.ResponseController {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return rc
}

type sseStream struct {
	ctx context.Context
	mu  sync.Mutex
	w   io.Writer
	rc  *http.ResponseController
}

func (s *sseStream) write(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := io.WriteString(s.w, text); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseStream) Send(e *apipb.EventView) error {
	b, err := json.Marshal(liveEvent{Position: e.Position, Time: formatUS(e.OccurredAtUs), Type: e.Type, Stream: e.Stream,
		Href: href(e.Stream), Actor: e.Actor, Summary: e.Summary})
	if err != nil {
		return err
	}
	return s.write(fmt.Sprintf("id: %d\ndata: %s\n\n", e.Position, b))
}

func (s *sseStream) SetHeader(metadata.MD) error  { return nil }
func (s *sseStream) SendHeader(metadata.MD) error { return nil }
func (s *sseStream) SetTrailer(metadata.MD)       {}
func (s *sseStream) Context() context.Context     { return s.ctx }
func (s *sseStream) RecvMsg(any) error            { return io.EOF }

func (s *sseStream) SendMsg(m any) error {
	e, ok := m.(*apipb.EventView)
	if !ok {
		return fmt.Errorf("webui: the event stream sends EventView, not %T", m)
	}
	return s.Send(e)
}

var _ apipb.Cell_WatchServer = (*sseStream)(nil)
