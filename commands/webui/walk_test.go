package webui_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/webui"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
)

// The viewers of the walk: the owner of alice/web, another user, an admin
// by the master's Admins list (as the cell's root is), an admin by its
// token's role, and someone with no credentials.
const (
	owner   = "alice"
	other   = "bob"
	admin   = "root"
	roleAdm = "ops"
	anon    = "anonymous"
)

var viewers = []string{owner, other, admin, roleAdm, anon}

// walkTokens are the tokens the walk's cell knows, on both surfaces.
var walkTokens = map[string]auth.Identity{
	"tok-" + owner:   {Name: owner, Role: auth.RoleUser, Via: "token"},
	"tok-" + other:   {Name: other, Role: auth.RoleUser, Via: "token"},
	"tok-" + admin:   {Name: admin, Role: auth.RoleUser, Via: "token"},
	"tok-" + roleAdm: {Name: roleAdm, Role: auth.RoleAdmin, Via: "token"},
	"tok-" + webUser: {Name: webUser, Role: auth.RoleUser, Via: "token"},
}

// webUser is the user a UI served without a login acts as (Config.User's
// default).
const webUser = "webui"

func walkLogin(_ context.Context, tok string) (auth.Identity, error) {
	if id, ok := walkTokens[tok]; ok {
		return id, nil
	}
	return auth.Identity{}, errors.New("unknown token")
}

// readPair is one read served on both surfaces: a web request and the
// RPC that reads the same thing. refused are the viewers the rule in
// commands refuses; both surfaces must refuse exactly them.
type readPair struct {
	method  string        // GET or POST
	path    string        // a path of the fixture matching the route
	form    url.Values    // a POST's form, besides its CSRF token
	rpc     string        // the Cell method's name
	req     proto.Message // its request
	refused []string
}

// webReads pairs every route of the UI (by its pattern) with the RPC that
// reads the same: a route the UI registers and this table lacks fails the
// walk. Routes that read nothing of the cell are in webNotReads.
var webReads = map[string]readPair{
	"GET /{$}":               {path: "/", rpc: "Status", req: &apipb.StatusRequest{}, refused: []string{anon}},
	"GET /jobs":              {path: "/jobs", rpc: "List", req: &apipb.ListRequest{}, refused: []string{anon}},
	"GET /jobs/{user}/{job}": {path: "/jobs/alice/web", rpc: "Get", req: &apipb.GetRequest{User: owner, Job: "web"}, refused: []string{anon}},
	"GET /jobs/{user}/{job}/tasks/{index}": {path: "/jobs/alice/web/tasks/0", rpc: "ListTasks",
		req: &apipb.ListTasksRequest{User: owner, Job: "web"}, refused: []string{anon}},
	"GET /jobs/{user}/{job}/tasks/{index}/logs/{stream}": {path: "/jobs/alice/web/tasks/0/logs/stdout", rpc: "TaskLogs",
		req: &apipb.TaskLogsRequest{User: owner, Job: "web", Index: 0}, refused: []string{other, anon}},
	"GET /jobs/{user}/{job}/tasks/{index}/runs/{run}": {path: "/jobs/alice/web/tasks/0/runs/0", rpc: "TaskLogs",
		req: &apipb.TaskLogsRequest{User: owner, Job: "web", Index: 0, Run: proto.Int32(0)}, refused: []string{other, anon}},
	"GET /machines/{name}": {path: "/machines/m0", rpc: "ListMachines", req: &apipb.ListMachinesRequest{}, refused: []string{anon}},
	"GET /events":          {path: "/events", rpc: "Events", req: &apipb.EventsRequest{}, refused: []string{anon}},
	"GET /events/stream":   {path: "/events/stream", rpc: "Watch", req: &apipb.EventsRequest{}, refused: []string{anon}},
	"GET /sql": {path: "/sql", rpc: "Query", req: &apipb.QueryRequest{Describe: &apipb.DescribeRequest{}},
		refused: []string{owner, other, anon}},
	"POST /sql": {method: http.MethodPost, path: "/sql", form: url.Values{"q": {"select 1"}}, rpc: "Query",
		req: &apipb.QueryRequest{Sql: "select 1"}, refused: []string{owner, other, anon}},
	"GET /costs": {path: "/costs", rpc: "Costs", req: &apipb.CostsRequest{}, refused: []string{anon}},
	"POST /costs/focus": {method: http.MethodPost, path: "/costs/focus", form: url.Values{"month": {"2026-03"}}, rpc: "ExportBill",
		req: &apipb.BillRequest{}, refused: []string{anon}},
	"GET /diff": {path: "/diff?from=1&to=10", rpc: "StateDiff", req: &apipb.StateDiffRequest{FromPosition: 1, ToPosition: 10}, refused: []string{anon}},
	"GET /sim":  {path: "/sim", rpc: "StateAt", req: &apipb.StateAtRequest{Position: 1}, refused: []string{anon}},
}

// webNotReads are the routes that read nothing of the cell: a session's
// start and end.
var webNotReads = []string{"GET /login", "POST /login", "POST /logout"}

// rpcOnlyReads are the reads the web UI does not ask, by what they read,
// with whom their rule refuses.
var rpcOnlyReads = map[string]readPair{
	"WhyPending":            {rpc: "WhyPending", req: &apipb.WhyPendingRequest{User: owner, Job: "web"}, refused: []string{anon}},
	"JobHistory":            {rpc: "JobHistory", req: &apipb.JobHistoryRequest{User: owner, Job: "web"}, refused: []string{anon}},
	"GetQuota":              {rpc: "GetQuota", req: &apipb.GetQuotaRequest{User: owner}, refused: []string{anon}},
	"GetPriceSheets":        {rpc: "GetPriceSheets", req: &apipb.GetPriceSheetsRequest{}, refused: []string{anon}},
	"WhoAmI":                {rpc: "WhoAmI", req: &apipb.WhoAmIRequest{}, refused: []string{anon}},
	"Bill":                  {rpc: "Bill", req: &apipb.BillRequest{}, refused: []string{anon}},
	"PlanUpdate":            {rpc: "PlanUpdate", req: &apipb.UpdateRequest{User: owner, Job: "web", RevertTo: 1}, refused: []string{other, anon}},
	"alice's costs":         {rpc: "Costs", req: &apipb.CostsRequest{User: owner}, refused: []string{other, anon}},
	"alice's bill":          {rpc: "Bill", req: &apipb.BillRequest{User: owner}, refused: []string{other, anon}},
	"alice's FOCUS export":  {rpc: "ExportBill", req: &apipb.BillRequest{User: owner}, refused: []string{other, anon}},
	"alice's previous logs": {rpc: "TaskLogs", req: &apipb.TaskLogsRequest{User: owner, Job: "web", Previous: true}, refused: []string{other, anon}},
}

// writeCase is one write of the API, asked of a fresh cell; refused are
// the viewers its rule refuses. setup, when set, prepares the cell as the
// owner.
type writeCase struct {
	req     proto.Message
	refused []string
	setup   func(t *testing.T, c *walkCell)
}

// walkRes are resources a write may ask for.
func walkRes() *events.Resources {
	return &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 20, DiskBytes: 1 << 30, Ports: 1}
}

// aliceSpec is a job's spec naming alice: Submit takes its user from the
// caller, whatever the spec says.
func aliceSpec(name string) *events.JobSpec {
	return &events.JobSpec{User: owner, Name: name, Priority: 1, TaskCount: 1, Command: "/bin/sh",
		Args: []string{"-c", "while true; do sleep 1; done"}, Resources: walkRes()}
}

// rpcWrites are the methods that change the cell. A job's writes are the
// owner's (and an admin's), the cell's settings an admin's; Submit and
// CreateAllocSet write under the caller's own name, so every user may.
var rpcWrites = map[string]writeCase{
	"Submit":         {req: &apipb.SubmitRequest{Spec: aliceSpec("new")}, refused: []string{anon}},
	"CreateAllocSet": {req: &apipb.CreateAllocSetRequest{Name: "pool", Count: 1, Resources: walkRes()}, refused: []string{anon}},
	"RemoveAllocSet": {req: &apipb.JobRequest{User: owner, Job: "pool"}, refused: []string{other, anon},
		setup: func(t *testing.T, c *walkCell) {
			if a := c.rpc(t, owner, "CreateAllocSet", &apipb.CreateAllocSetRequest{Name: "pool", Count: 1, Resources: walkRes()}); a.said != "OK" {
				t.Fatalf("alice's alloc set: %s", a.said)
			}
		}},
	"Update":             {req: &apipb.UpdateRequest{User: owner, Job: "web", RevertTo: 1}, refused: []string{other, anon}},
	"Kill":               {req: &apipb.KillRequest{User: owner, Job: "web"}, refused: []string{other, anon}},
	"KillTask":           {req: &apipb.KillTaskRequest{User: owner, Job: "web", Index: 0}, refused: []string{other, anon}},
	"CommitUpdate":       {req: &apipb.JobRequest{User: owner, Job: "web"}, refused: []string{other, anon}},
	"RollbackUpdate":     {req: &apipb.JobRequest{User: owner, Job: "web"}, refused: []string{other, anon}},
	"PromoteUpdate":      {req: &apipb.JobRequest{User: owner, Job: "web"}, refused: []string{other, anon}},
	"SetQuota":           {req: &apipb.SetQuotaRequest{User: owner, Band: "production", Resources: walkRes()}, refused: []string{owner, other, anon}},
	"SetPriceSheet":      {req: &apipb.SetPriceSheetRequest{}, refused: []string{owner, other, anon}},
	"CloseBillingPeriod": {req: &apipb.CloseBillingPeriodRequest{PeriodStartUs: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).UnixMicro()}, refused: []string{owner, other, anon}},
	"DrainMachine":       {req: &apipb.DrainMachineRequest{Machine: "m0"}, refused: []string{owner, other, anon}},
	"RemoveMachine":      {req: &apipb.RemoveMachineRequest{Machine: "m2"}, refused: []string{owner, other, anon}},
}

// walkCell is the fixture's cell behind both surfaces: the UI on an HTTP
// server with a login, and the Service on a gRPC server that takes the
// same tokens (as the master's Authenticator does; a call without one is
// refused by the Authenticator's own code).
type walkCell struct {
	*testCell
	srv  *httptest.Server
	conn *grpc.ClientConn
}

func openWalkCell(t *testing.T) *walkCell { return openWalkCellAs(t, false) }

// openWalkCellAs opens the walk's cell; with anonymous the UI serves
// every page without a login, as its own user (--web-anonymous).
func openWalkCellAs(t *testing.T, anonymous bool) *walkCell {
	t.Helper()
	c := openCell(t, smallCell())
	c.svc.Analytics = &fakeCosts{}
	c.svc.Logs = api.NewAgentLogs(c.m, nil)
	t.Cleanup(c.svc.Logs.Close)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ui, err := webui.New(webui.Config{API: c.svc, Cell: c.m, Streams: c.store, Log: c.store, Replay: replayHere(c.store), Logs: c.svc, Logger: quiet,
		Login: walkLogin, Anonymous: anonymous, Clock: func() time.Time { return t0.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	c.ui = ui
	web := httptest.NewServer(ui)
	t.Cleanup(web.Close)
	t.Cleanup(ui.Close)

	identify := func(ctx context.Context, method string) (context.Context, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if vals := md.Get("authorization"); len(vals) > 0 {
			id, err := walkLogin(ctx, strings.TrimPrefix(vals[0], "Bearer "))
			if err != nil {
				return nil, status.Error(codes.Unauthenticated, err.Error())
			}
			return auth.NewContext(ctx, id), nil
		}
		_, err := (&auth.Authenticator{Cell: "walk", Logger: quiet}).Authenticate(ctx, method)
		return nil, err
	}
	g := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
			ctx, err := identify(ctx, info.FullMethod)
			if err != nil {
				return nil, err
			}
			return next(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
			ctx, err := identify(ss.Context(), info.FullMethod)
			if err != nil {
				return err
			}
			return next(srv, &ctxStream{ServerStream: ss, ctx: ctx})
		}))
	c.svc.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &walkCell{testCell: c, srv: web, conn: conn}
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// browser is a logged-in browser for viewer (none for anonymous), and the
// CSRF token of its forms.
func (c *walkCell) browser(t *testing.T, viewer string) (*http.Client, string) {
	t.Helper()
	b := testkit.NewBrowser(10*time.Second, false)
	csrf := testkit.LoginCSRF(t, b, c.srv.URL)
	if viewer == anon {
		return b, csrf
	}
	if status, body := testkit.WebLogin(t, b, c.srv.URL, "tok-"+viewer, csrf); status != http.StatusSeeOther {
		t.Fatalf("login as %s: %d\n%s", viewer, status, body)
	}
	return b, csrf
}

// answer is what a surface said to a read, reduced to whether it was
// refused (the rule said no: 401, 403, a redirect to the login page;
// Unauthenticated, PermissionDenied) and what it said.
type answer struct {
	refused bool
	said    string
}

// web asks the UI, reading no more than the status of a live stream.
func (c *walkCell) web(t *testing.T, b *http.Client, csrf string, p readPair) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var req *http.Request
	if p.method == http.MethodPost {
		form := url.Values{"csrf": {csrf}}
		for k, v := range p.form {
			form[k] = v
		}
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, c.srv.URL+p.path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, c.srv.URL+p.path, nil)
	}
	resp, err := b.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, p.path, err)
	}
	defer resp.Body.Close()
	said := resp.Status
	if loc := resp.Header.Get("Location"); loc != "" {
		said += " to " + loc
	}
	login := resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/login")
	return answer{refused: login || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden, said: said}
}

// rpc calls method of the Cell service as viewer; a stream answers with
// its first message, or is taken as open when none arrives in a second
// (a live stream that waits for news).
func (c *walkCell) rpc(t *testing.T, viewer, method string, req proto.Message) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if viewer != anon {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-"+viewer)
	}
	full := "/" + apipb.Cell_ServiceDesc.ServiceName + "/" + method
	var err error
	if isStream(method) {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		var s grpc.ClientStream
		if s, err = c.conn.NewStream(sctx, &grpc.StreamDesc{ServerStreams: true}, full); err == nil {
			if err = s.SendMsg(req); err == nil {
				_ = s.CloseSend()
				err = s.RecvMsg(&emptypb.Empty{})
				if errors.Is(err, io.EOF) || (status.Code(err) == codes.DeadlineExceeded && sctx.Err() != nil) {
					err = nil
				}
			}
		}
	} else {
		err = c.conn.Invoke(ctx, full, req, &emptypb.Empty{})
	}
	code := status.Code(err)
	said := code.String()
	if err != nil {
		said += ": " + status.Convert(err).Message()
	}
	return answer{refused: code == codes.Unauthenticated || code == codes.PermissionDenied, said: said}
}

func isStream(method string) bool {
	for _, s := range apipb.Cell_ServiceDesc.Streams {
		if s.StreamName == method {
			return true
		}
	}
	return false
}

// Every route of the web UI and every method of the API, walked as the
// owner of a job, another user, an admin (by the Admins list and by
// role) and anonymous: a read the rules
// in commands refuse is refused on both surfaces, a read they allow is
// allowed on both; a write is refused to anonymous and to another user.
func TestEveryReadAnswersAlikeOnEverySurface(t *testing.T) {
	c := openWalkCell(t)

	// The tables cover exactly the router and the service descriptor.
	routes := c.ui.RoutePatterns()
	for _, pat := range routes {
		if _, ok := webReads[pat]; !ok && !slices.Contains(webNotReads, pat) {
			t.Errorf("route %q is not walked: add it to webReads with the RPC that reads the same (or to webNotReads)", pat)
		}
	}
	for pat := range webReads {
		if !slices.Contains(routes, pat) {
			t.Errorf("webReads lists %q, which the UI does not serve", pat)
		}
	}
	var methods []string
	for _, m := range apipb.Cell_ServiceDesc.Methods {
		methods = append(methods, m.MethodName)
	}
	for _, s := range apipb.Cell_ServiceDesc.Streams {
		methods = append(methods, s.StreamName)
	}
	paired := map[string]bool{}
	for _, p := range webReads {
		paired[p.rpc] = true
	}
	for _, p := range rpcOnlyReads {
		paired[p.rpc] = true
	}
	for _, m := range methods {
		if _, write := rpcWrites[m]; !paired[m] && !write {
			t.Errorf("method %s of the Cell service is not walked: pair it with a route in webReads, or add it to rpcOnlyReads or rpcWrites", m)
		}
	}

	browsers := map[string]*http.Client{}
	csrfs := map[string]string{}
	for _, v := range viewers {
		browsers[v], csrfs[v] = c.browser(t, v)
	}

	for pat, p := range webReads {
		for _, v := range viewers {
			w := c.web(t, browsers[v], csrfs[v], p)
			a := c.rpc(t, v, p.rpc, p.req)
			want := slices.Contains(p.refused, v)
			t.Logf("%s as %s: web %s; %s %s", pat, v, w.said, p.rpc, a.said)
			if w.refused != a.refused {
				t.Errorf("%s as %s: the web says %s, %s says %s: one surface refuses what the other allows", pat, v, w.said, p.rpc, a.said)
				continue
			}
			if w.refused != want {
				t.Errorf("%s and %s as %s: refused=%v (web %s, API %s), want refused=%v", pat, p.rpc, v, w.refused, w.said, a.said, want)
			}
		}
	}
	for what, p := range rpcOnlyReads {
		for _, v := range viewers {
			a := c.rpc(t, v, p.rpc, p.req)
			if want := slices.Contains(p.refused, v); a.refused != want {
				t.Errorf("%s (%s) as %s: %s, want refused=%v", what, p.rpc, v, a.said, want)
			}
			t.Logf("%s (%s) as %s: %s", what, p.rpc, v, a.said)
		}
	}
}

// Every write of the API, asked of a leading master, each of a fresh
// cell, as anonymous, another user, the owner and an admin in that order:
// the viewers its rule refuses are refused, the others pass the rule (the
// request may still fail later: the walk asks who may, not what).
func TestEveryWriteIsRefusedToOthers(t *testing.T) {
	names := make([]string, 0, len(rpcWrites))
	for m := range rpcWrites {
		names = append(names, m)
	}
	slices.Sort(names)
	for _, m := range names {
		t.Run(m, func(t *testing.T) {
			w := rpcWrites[m]
			c := openWalkCell(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.m.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			testkit.Eventually(t, 10*time.Second, "the master leads", func() (bool, string) { return c.m.Leading(), "not leading" })
			if w.setup != nil {
				w.setup(t, c)
			}
			for _, v := range []string{anon, other, owner, admin, roleAdm} {
				a := c.rpc(t, v, m, w.req)
				if want := slices.Contains(w.refused, v); a.refused != want {
					t.Errorf("%s as %s: %s, want refused=%v", m, v, a.said, want)
				}
				t.Logf("%s as %s: %s", m, v, a.said)
			}
		})
	}
}

// A UI served without a login (--web-anonymous) acts as its own user on
// every page: each read answers as the API answers that user.
func TestAnonymousWebAnswersAsItsUser(t *testing.T) {
	c := openWalkCellAs(t, true)
	b, csrf := c.browser(t, anon)
	for pat, p := range webReads {
		w := c.web(t, b, csrf, p)
		a := c.rpc(t, webUser, p.rpc, p.req)
		t.Logf("%s: web %s; %s as %s %s", pat, w.said, p.rpc, webUser, a.said)
		if w.refused != a.refused {
			t.Errorf("%s without a login: the web says %s, %s as %s says %s", pat, w.said, p.rpc, webUser, a.said)
		}
		// The UI's user owns nothing and is no admin: it is refused what
		// another user is.
		if want := slices.Contains(p.refused, other); w.refused != want {
			t.Errorf("%s without a login: %s, want refused=%v", pat, w.said, want)
		}
	}
}
