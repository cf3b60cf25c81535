package webui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/fauxmaster"
	"github.com/corralhq/corral/projections"
)

// API is the part of the Cell API the pages read. *api.Service
// implements it; the UI calls it in-process, so every page shows what
// `corral` shows.
type API interface {
	List(context.Context, *apipb.ListRequest) (*apipb.JobList, error)
	Get(context.Context, *apipb.GetRequest) (*apipb.JobView, error)
	ListTasks(context.Context, *apipb.ListTasksRequest) (*apipb.TaskList, error)
	WhyPending(context.Context, *apipb.WhyPendingRequest) (*apipb.WhyPendingReply, error)
	Events(context.Context, *apipb.EventsRequest) (*apipb.EventList, error)
	Watch(*apipb.EventsRequest, apipb.Cell_WatchServer) error
	Query(context.Context, *apipb.QueryRequest) (*apipb.QueryReply, error)
	Costs(context.Context, *apipb.CostsRequest) (*apipb.CostsReply, error)
	StateDiff(context.Context, *apipb.StateDiffRequest) (*apipb.StateDiffView, error)
	ExportBill(*apipb.BillRequest, apipb.Cell_ExportBillServer) error
}

// Cell gives a consistent read of the cell's state, for what the API does
// not serve (sums per band, one machine, one task). *master.Master
// implements it. fn runs under the state's read lock and must not keep
// references into the state.
type Cell interface {
	View(fn func(s *projections.State))
}

// Streams reads one stream of the log through the store's stream index.
// events.Store implements it. Optional: without it a task's history is
// found by scanning the log from its job's submission (API.Events).
type Streams interface {
	ReadStream(ctx context.Context, stream string) ([]events.Event, error)
}

// Logs reads a task's stdout or stderr from the agent of the machine it
// runs (or last ran) on. *api.Service implements it with the path its
// TaskLogs takes: the same rule of who may read a task's logs
// (commands.MayReadLogs, for the viewer ctx carries) and the same caps on
// streams open at once. Optional: without it the task page says where
// the logs are.
type Logs interface {
	// MayReadLogs refuses (PermissionDenied) a viewer who may not read
	// task's logs.
	MayReadLogs(ctx context.Context, task projections.TaskKey) error
	TailLogs(ctx context.Context, task projections.TaskKey, stream string, maxBytes int) ([]byte, error)
	// FollowLogs sends what the task writes from now on, until ctx ends.
	FollowLogs(ctx context.Context, task projections.TaskKey, stream string, send func([]byte) error) error
	// TaskRunsOf lists the task's runs and where each ran (api.TaskRuns),
	// under the same rule.
	TaskRunsOf(ctx context.Context, task projections.TaskKey) ([]api.TaskRun, error)
	// RunLogs is the end of one run's stdout or stderr, read from the
	// machine where that run ran.
	RunLogs(ctx context.Context, task projections.TaskKey, run int32, stream string, maxBytes int) ([]byte, error)
}

// Config says where the UI reads from.
type Config struct {
	API  API  // required
	Cell Cell // required
	// Streams, when set, reads task histories by stream (pass the master's
	// events.Store).
	Streams Streams
	// Logs, when set, serves the tail of task logs.
	Logs Logs
	// LossHold, when set, says whether the leader's agent link holds
	// machine loss (master.Master.LossHold); the cell page says so.
	LossHold func() (master.LossHold, bool)
	// Log, when set, is the cell's event log, which the what-if page
	// (/sim) replays (pass the master's events.Store).
	Log projections.Source
	// Replay, when set with Log, runs a what-if replay for /sim. The
	// binary's runs each in a child process bounded in time and memory,
	// stopped when the context ends, and caps replays per user and per
	// cell (ResourceExhausted); its errors are gRPC statuses (OutOfRange:
	// past its memory; DeadlineExceeded: past its time).
	Replay func(ctx context.Context, r ReplayRequest) (*fauxmaster.Report, error)
	// User is the identity the UI's API calls carry (the API requires
	// one) without a login; default "webui". The UI is read-only: every
	// user sees every job, as Borg's Sigma shows debugging information to
	// everyone, but a task's logs only its owner and admins
	// (commands.MayReadLogs): a UI without a login shows them to no one
	// unless User is an admin.
	User string
	// Login checks a token as the API does and returns who it names (user
	// and role: an admin's token reads every task's logs). When set
	// (and Anonymous is not), every page but the login page asks for a
	// session; the pages' API calls carry its user. nil: no login.
	Login func(ctx context.Context, token string) (auth.Identity, error)
	// Anonymous serves every page without a login even when Login is set
	// (--web-anonymous), as User.
	Anonymous bool
	// Hosts are the names the UI is served as, besides IP addresses and
	// localhost: a request naming any other Host is refused, so that a
	// page whose name an attacker points at this address (DNS rebinding)
	// cannot read the UI.
	Hosts []string
	// Clock is read for the range of usage charts; default time.Now.
	Clock func() time.Time
	// PageSize is the rows of a paginated table; default 100.
	PageSize int
	// Logger, default slog.Default().
	Logger *slog.Logger
}

// Handler serves the web UI. It is safe for concurrent use.
type Handler struct {
	cfg   Config
	mux   *http.ServeMux
	pages map[string]*template.Template

	sessions sessions

	closeOnce sync.Once
	closed    chan struct{} // closed by Close: live streams end
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New returns the UI's handler, to mount at "/" of the master's HTTP port.
func New(cfg Config) (*Handler, error) {
	if cfg.API == nil {
		return nil, errors.New("webui: config.api: must be set (the master's Cell service)")
	}
	if cfg.Cell == nil {
		return nil, errors.New("webui: config.cell: must be set (the master replica, for View)")
	}
	if cfg.User == "" {
		cfg.User = "webui"
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), pages: map[string]*template.Template{}, closed: make(chan struct{})}
	if err := h.parse(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	fileServer := http.StripPrefix("/static/", http.FileServerFS(static))
	h.mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fileServer.ServeHTTP(w, r)
	}))
	for _, rt := range h.routes() {
		h.mux.HandleFunc(rt.pattern, rt.serve)
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no page at %s", r.URL.Path))
	})
	return h, nil
}

// route is one page or endpoint of the UI and the pattern it is served at.
type route struct {
	pattern string
	serve   http.HandlerFunc
}

// routes are the UI's pages and endpoints, besides /static/ and the
// not-found page. New registers exactly these, and the tests walk this
// list (an http.ServeMux cannot be enumerated), asking each as several
// viewers whether it answers as the API does: a route added here without
// a walk case fails them.
func (h *Handler) routes() []route {
	return []route{
		{"GET /{$}", h.cell},
		{"GET /jobs", h.jobs},
		{"GET /jobs/{user}/{job}", h.job},
		{"GET /jobs/{user}/{job}/tasks/{index}", h.task},
		{"GET /jobs/{user}/{job}/tasks/{index}/logs/{stream}", h.taskLogStream},
		{"GET /jobs/{user}/{job}/tasks/{index}/runs/{run}", h.taskRun},
		{"GET /machines/{name}", h.machine},
		{"GET /events", h.events},
		{"GET /events/stream", h.eventStream},
		{"GET /login", h.loginForm},
		{"POST /login", h.login},
		{"POST /logout", h.logout},
		{"GET /sql", h.sqlForm},
		{"POST /sql", h.sql},
		{"GET /costs", h.costs},
		{"GET /diff", h.diff},
		{"GET /sim", h.sim},
		{"POST /costs/focus", h.costsExport},
	}
}

// Close ends the live event streams, which otherwise last as long as their
// browsers stay: http.Server.Shutdown waits for them. Register it with
// server.RegisterOnShutdown(ui.Close). Pages are still served after Close.
func (h *Handler) Close() {
	h.closeOnce.Do(func() { close(h.closed) })
}

// ServeHTTP serves the UI's pages under "/".
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hostAllowed(r.Host) {
		// A name the UI was not told it is served as: a DNS rebinding
		// page pointing its own name at this address, most likely.
		http.Error(w, fmt.Sprintf("Host %q is not a name this cell's web UI is served as (an IP address, localhost, or one given with --http-host)", r.Host), http.StatusMisdirectedRequest)
		return
	}
	r, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Nothing is fetched from elsewhere: scripts, styles and images come
	// from this handler (charts are inline SVG).
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) parse() error {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return fmt.Errorf("webui: templates/layout.html: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return fmt.Errorf("webui: %s: %w", n, err)
		}
		h.pages[base] = t
	}
	return nil
}

// page is what every template gets: the layout's fields and the page's.
type page struct {
	Title  string
	Nav    string // the navigation entry to mark current
	Script string // a script under /static to load, "" for none
	Data   any
	User   string // the logged-in user, "" for none
	CSRF   string // the browser's CSRF token, for the log-out form
}

// render executes a page into a buffer first, so that a template error
// becomes an error page instead of half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, name string, p page) {
	if p.User = userOf(r); p.User != "" {
		p.CSRF = h.csrfToken(w, r)
	}
	t := h.pages[name]
	var buf bytes.Buffer
	if t == nil {
		h.fail(w, r, http.StatusInternalServerError, fmt.Errorf("template %q is missing", name))
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		h.cfg.Logger.Error("webui: rendering", "page", name, "err", err)
		h.fail(w, r, http.StatusInternalServerError, fmt.Errorf("rendering %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

type errorData struct {
	Code    int
	Status  string
	Message string
}

// fail renders an error page. The message is the API's, which names the
// field and the reason.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	d := errorData{Code: code, Status: http.StatusText(code), Message: err.Error()}
	if t := h.pages["error"]; t != nil {
		if e := t.ExecuteTemplate(w, "layout.html", page{Title: d.Status, Data: d}); e == nil {
			return
		}
	}
	fmt.Fprintf(w, "<!doctype html><title>%d</title><p>%s</p>", code, template.HTMLEscapeString(err.Error()))
}

// failAPI renders an error of the API with the HTTP status matching its
// gRPC code.
func (h *Handler) failAPI(w http.ResponseWriter, r *http.Request, err error) {
	h.fail(w, r, httpStatus(err), errors.New(status.Convert(err).Message()))
}

func httpStatus(err error) int {
	switch status.Code(err) {
	case codes.NotFound:
		return http.StatusNotFound
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.FailedPrecondition:
		return http.StatusConflict
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.Canceled:
		return 499
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// ctx returns the request's context carrying the viewer's identity, as
// the API expects it: the identity the session's token names (its role
// too, so an admin's token reads as an admin's call), else the UI's own
// user, as from a trusted link.
func (h *Handler) ctx(r *http.Request) context.Context {
	if id := identityOf(r); id.Name != "" {
		return auth.NewContext(r.Context(), id)
	}
	return metadata.NewIncomingContext(r.Context(), metadata.Pairs(api.UserHeader, h.cfg.User))
}

// viewerName is who views: the session's user, else the UI's own.
func (h *Handler) viewerName(r *http.Request) string {
	if id := identityOf(r); id.Name != "" {
		return id.Name
	}
	return h.cfg.User
}

// badParam is the error for a query parameter that does not parse.
type badParam struct{ name, reason string }

func (e *badParam) Error() string { return e.name + ": " + e.reason }

// intParam reads a non-negative integer query parameter; missing is def.
func intParam(r *http.Request, name string, def int) (int, error) {
	v := strings.TrimSpace(r.URL.Query().Get(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, &badParam{name, fmt.Sprintf("%q is not a non-negative integer", v)}
	}
	return n, nil
}

// pager is a table's place in its rows.
type pager struct {
	Offset, Limit, Total int
	Prev, Next           string // links, "" when there is none
}

// First and Last number the rows shown, from 1.
func (p pager) First() int {
	if p.Total == 0 {
		return 0
	}
	return p.Offset + 1
}

func (p pager) Last() int { return min(p.Offset+p.Limit, p.Total) }

// newPager builds the links of a table at offset, keeping the request's
// other parameters.
func newPager(r *http.Request, param string, offset, limit, total int) pager {
	p := pager{Offset: offset, Limit: limit, Total: total}
	link := func(o int) string {
		q := r.URL.Query()
		if o == 0 {
			q.Del(param)
		} else {
			q.Set(param, strconv.Itoa(o))
		}
		if len(q) == 0 {
			return r.URL.Path
		}
		return r.URL.Path + "?" + q.Encode()
	}
	if offset > 0 {
		p.Prev = link(max(0, offset-limit))
	}
	if offset+limit < total {
		p.Next = link(offset + limit)
	}
	return p
}
