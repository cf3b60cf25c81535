package webui_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/commands/webui"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// fakeAnalytics answers queries from a fixed result and records them;
// it describes a schema of one table.
type fakeAnalytics struct {
	queries   []string
	describes []*apipb.DescribeRequest
}

func (f *fakeAnalytics) Query(_ context.Context, r *apipb.QueryRequest) (*apipb.QueryReply, error) {
	if r.Describe != nil {
		f.describes = append(f.describes, r.Describe)
		row := func(v ...string) *apipb.QueryRow { return &apipb.QueryRow{Values: v, Null: make([]bool, len(v))} }
		if r.Describe.Columns {
			return &apipb.QueryReply{Columns: []string{"table", "column", "type", "description"}, Rows: []*apipb.QueryRow{
				row("events", "position", "BIGINT", "the event's position <in> the log"), row("events", "payload", "JSON", "the event as JSON"),
			}}, nil
		}
		return &apipb.QueryReply{Columns: []string{"name", "kind", "description"}, Rows: []*apipb.QueryRow{
			row("events", "table", "the event log itself"), row("tasks_at(ts)", "table macro", "tasks at ts"),
		}}, nil
	}
	f.queries = append(f.queries, r.Sql)
	if strings.HasPrefix(r.Sql, "DELETE") {
		return nil, status.Error(codes.InvalidArgument, "infrastore: query refused: DELETE is not a read-only query")
	}
	if strings.Contains(r.Sql, "list(") {
		// What the Infrastore answers a query past its memory.
		return nil, status.Error(codes.ResourceExhausted, "infrastore: query too big: stopped when the Infrastore process held 1800 MiB of its 2048 MiB memory budget; narrow the query")
	}
	return &apipb.QueryReply{Columns: []string{"job", "n", "note"}, Position: 29, Truncated: strings.Contains(r.Sql, "range("),
		TruncatedBy: map[bool]string{true: "the 16777216-byte limit"}[strings.Contains(r.Sql, "range(")], Rows: []*apipb.QueryRow{
			{Values: []string{"web", "3", "a, \"quoted\" note"}, Null: []bool{false, false, false}},
			{Values: []string{"huge", "2", "NULL"}, Null: []bool{false, false, true}},
		}}, nil
}

func (f *fakeAnalytics) ExportBill(context.Context, *apipb.BillRequest, func([]byte) error) error {
	return errors.New("no bills here")
}

func (f *fakeAnalytics) Bill(context.Context, *apipb.BillRequest) (*apipb.BillReply, error) {
	return nil, errors.New("no bills here")
}

func (f *fakeAnalytics) Costs(context.Context, *apipb.CostsRequest) (*apipb.CostsReply, error) {
	return nil, errors.New("no costs here")
}

// fakeCosts answers Costs with a fixed month and exports a fixed file,
// recording what was asked.
type fakeCosts struct {
	fakeAnalytics
	asked   []*apipb.CostsRequest
	exports []*apipb.BillRequest
}

func (f *fakeCosts) Costs(_ context.Context, r *apipb.CostsRequest) (*apipb.CostsReply, error) {
	f.asked = append(f.asked, r)
	days := make([]int64, 30)
	for i := range days {
		days[i] = r.FromUs + int64(i)*24*3600*1e6
	}
	flat := func(v float64) []float64 {
		out := make([]float64, len(days))
		for i := range out {
			out[i] = v
		}
		return out
	}
	return &apipb.CostsReply{Currency: "EUR", StepUs: 24 * 3600 * 1e6, BucketUs: days, Label: r.Label,
		Users: []*apipb.CostSeries{{Name: "alice", Costs: flat(2), Total: "60.000000000000000000"}, {Name: "bob", Costs: flat(1), Total: "30.000000000000000000"}},
		Teams: []*apipb.CostSeries{{Name: "ads", Costs: flat(3), Total: "90.000000000000000000"}},
		Bands: []*apipb.CostSeries{{Name: "production", Costs: flat(3), Total: "90.000000000000000000"}},
		Idle:  &apipb.CostSeries{Name: "idle", Costs: flat(7), Total: "210.000000000000000000"}, Corrections: "0.5", Total: "300.500000000000000000",
		TopJobs: []*apipb.JobCost{{User: "alice", Job: "web", Team: "ads", Total: "60.000000000000000000"}}}, nil
}

func (f *fakeCosts) ExportBill(_ context.Context, r *apipb.BillRequest, send func([]byte) error) error {
	f.exports = append(f.exports, r)
	if err := send([]byte("BilledCost,BillingAccountId\n")); err != nil {
		return err
	}
	return send([]byte("1.5,cell\n"))
}

// tinyIdle is a month where idle capacity is a fraction of a cent of the
// total: 10.004 = 10.000 + 0.004.
type tinyIdle struct{ fakeCosts }

func (f *tinyIdle) Costs(ctx context.Context, r *apipb.CostsRequest) (*apipb.CostsReply, error) {
	c, _ := f.fakeCosts.Costs(ctx, r)
	c.Total, c.Idle.Total, c.Corrections = "10.004000000", "0.004000000", "0"
	c.TopJobs = []*apipb.JobCost{{User: "alice", Job: "web", Team: "ads", Total: "9.5"}}
	return c, nil
}

// The summary's figures add up as shown: one precision for the total and
// its parts, not a total rounded to the cent beside parts to the millionth.
func TestCostsFiguresAddUp(t *testing.T) {
	c := openCell(t, smallCell())
	c.svc.Analytics = &tinyIdle{}
	code, body := c.get(t, "/costs?month=2026-02")
	if code != http.StatusOK {
		t.Fatalf("status %d\n%s", code, body)
	}
	mustContain(t, "costs", body, `id="cost-total">10.004 EUR`, `id="cost-usage">10.000 EUR`, `id="cost-idle">0.004 EUR (0.04% of the total)`,
		`<td class="num">9.500 EUR</td>`)
}

func TestCostsPage(t *testing.T) {
	c := openCell(t, smallCell())
	fc := &fakeCosts{}
	c.svc.Analytics = fc
	code, body := c.get(t, "/costs?month=2026-02&label=tier")
	if code != http.StatusOK {
		t.Fatalf("status %d\n%s", code, body)
	}
	mustContain(t, "costs", body, "Costs of 2026-02", `id="cost-total">300.50 EUR`, `id="cost-idle">210.00 EUR (69.9% of the total)`,
		`id="cost-usage">90.00 EUR`, `id="cost-corrections">0.50 EUR`, `<figure class="chart" aria-labelledby="by-user-cap">`,
		"Spend per day by the label tier", `class="line s0"`, `class="line idle"`, `<a href="/jobs/alice/web">alice/web</a>`,
		`action="/costs/focus"`, `name="month" value="2026-02"`, `name="csrf" value="`, `href="/costs?month=2026-01&amp;label=tier"`,
		`href="/costs?month=2026-03&amp;label=tier"`)
	checkAccessible(t, "costs", body)
	if len(fc.asked) != 1 || fc.asked[0].FromUs != time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).UnixMicro() ||
		fc.asked[0].ToUs != time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMicro() || fc.asked[0].Label != "tier" {
		t.Errorf("asked %v", fc.asked)
	}
	for _, bad := range []struct{ path, field string }{
		{"/costs?month=2026-13", "month"}, {"/costs?month=next", "month"}, {"/costs?label=%27%29%3B+DROP", "label"},
	} {
		t.Run(bad.path, func(t *testing.T) {
			if code, body := c.get(t, bad.path); code != http.StatusBadRequest || !strings.Contains(body, bad.field+":") {
				t.Errorf("%s: %d, want 400 naming %s\n%s", bad.path, code, bad.field, body)
			}
		})
	}
	if len(fc.asked) != 1 {
		t.Errorf("bad requests reached the Infrastore: %d asks", len(fc.asked))
	}

	post := func(form url.Values, cookie string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/costs/focus", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: "corral_csrf", Value: cookie})
		rec := httptest.NewRecorder()
		c.ui.ServeHTTP(rec, req)
		return rec
	}
	const tok = "0123456789abcdef0123456789abcdef-token"
	rec := post(url.Values{"month": {"2026-02"}, "csrf": {"forged-forged-forged-forged-forged-forged"}}, tok)
	if rec.Code != http.StatusForbidden || len(fc.exports) != 0 {
		t.Errorf("a download with a forged token: %d, %d exports", rec.Code, len(fc.exports))
	}
	rec = post(url.Values{"month": {"2026-02"}, "csrf": {tok}, "format": {"csv"}}, tok)
	if rec.Code != http.StatusOK || rec.Body.String() != "BilledCost,BillingAccountId\n1.5,cell\n" ||
		rec.Header().Get("Content-Disposition") != `attachment; filename="corral-focus-2026-02.csv"` {
		t.Errorf("download: %d %q %v", rec.Code, rec.Body.String(), rec.Header())
	}
	if len(fc.exports) != 1 || fc.exports[0].Format != "focus" || fc.exports[0].Granularity != "job" ||
		fc.exports[0].FromUs != time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).UnixMicro() {
		t.Errorf("exports %v", fc.exports)
	}
	if rec = post(url.Values{"month": {"2026-02"}, "csrf": {tok}, "format": {"xlsx"}}, tok); rec.Code != http.StatusBadRequest {
		t.Errorf("format xlsx: %d", rec.Code)
	}
	// Without an Infrastore the page says so.
	c.svc.Analytics = nil
	if code, body = c.get(t, "/costs"); code != http.StatusNotImplemented || !strings.Contains(body, "runs no Infrastore") {
		t.Errorf("no Infrastore: %d\n%s", code, body)
	}
}

// TestSQLConsoleSchemaPanel: the console lists the tables the Infrastore
// describes, each opening to its columns with type and description, with
// buttons that insert names; a CSV download asks for no schema, and a
// schema that cannot be read leaves the console usable and says why.
func TestSQLConsoleSchemaPanel(t *testing.T) {
	c := openCell(t, smallCell())
	fa := &fakeAnalytics{}
	c.svc.Analytics = fa
	// A viewer who is no admin is refused the console as the API refuses
	// the query, naming the rule (commands.MayQueryCell), and nothing
	// reaches the Infrastore.
	code, body := c.get(t, "/sql")
	if code != http.StatusForbidden || !strings.Contains(body, "admin capability") || len(fa.describes) != 0 {
		t.Fatalf("a user's console: status %d, %d describes, want the rule named\n%s", code, len(fa.describes), body)
	}
	ui, err := webui.New(webui.Config{API: c.svc, Cell: c.m, User: "root", Hosts: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	c.ui = ui
	code, body = c.get(t, "/sql")
	if code != http.StatusOK {
		t.Fatalf("status %d\n%s", code, body)
	}
	mustContain(t, "schema panel", body, `id="schema"`, `<details data-table="events">`, `data-insert="events"`,
		`<details data-table="tasks_at">`, `data-insert="tasks_at(ts)"`, "table macro", `data-insert="position"`,
		"<code>BIGINT</code>", "the event&#39;s position &lt;in&gt; the log", `<script src="/static/sql.js" defer>`)
	checkAccessible(t, "sql schema", body)
	if len(fa.describes) != 2 || fa.describes[0].Columns || !fa.describes[1].Columns || len(fa.queries) != 0 {
		t.Errorf("describes %v, queries %q", fa.describes, fa.queries)
	}
	if _, body := c.postSQL(t, "SELECT 1", ""); !strings.Contains(body, `id="schema"`) || !strings.Contains(body, `id="result"`) {
		t.Errorf("a query's result page has no schema panel:\n%s", body)
	}
	n := len(fa.describes)
	if code, _ := c.postSQL(t, "SELECT 1", "csv"); code != http.StatusOK || len(fa.describes) != n {
		t.Errorf("a CSV download: %d, asked for the schema %d times", code, len(fa.describes)-n)
	}
	// The master asks describe for a user, as it does a query.
	n = len(fa.describes)
	if _, err := c.svc.Query(context.Background(), &apipb.QueryRequest{Describe: &apipb.DescribeRequest{}}); status.Code(err) != codes.Unauthenticated || len(fa.describes) != n {
		t.Errorf("a describe naming no user: %v, reached the Infrastore %d times", err, len(fa.describes)-n)
	}
	c.svc.Analytics = &failingDescribe{}
	code, body = c.get(t, "/sql")
	if code != http.StatusOK || !strings.Contains(body, `id="schema-err"`) || !strings.Contains(body, "the Infrastore process is not answering") ||
		!strings.Contains(body, `id="q"`) {
		t.Errorf("a schema that cannot be read: %d\n%s", code, body)
	}
}

// failingDescribe answers queries but not the schema.
type failingDescribe struct{ fakeAnalytics }

func (f *failingDescribe) Query(ctx context.Context, r *apipb.QueryRequest) (*apipb.QueryReply, error) {
	if r.Describe != nil {
		return nil, status.Error(codes.Unavailable, "the Infrastore process is not answering")
	}
	return f.fakeAnalytics.Query(ctx, r)
}

func TestSQLConsoleTableAndCSV(t *testing.T) {
	c := openCell(t, smallCell())
	fa := &fakeAnalytics{}
	c.svc.Analytics = fa
	// SQL reads every user's usage: a viewer who is no admin is refused
	// (commands.MayQueryCell), and nothing runs.
	code, body := c.postSQL(t, "SELECT 1", "")
	if code != http.StatusForbidden || len(fa.queries) != 0 || !strings.Contains(body, "admin capability") {
		t.Fatalf("a user's query: status %d, %d queries run, want 403 naming the admin capability\n%s", code, len(fa.queries), body)
	}
	ui, err := webui.New(webui.Config{API: c.svc, Cell: c.m, User: "root", Hosts: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	c.ui = ui
	// A link fills the form in and runs nothing.
	code, body = c.get(t, "/sql?q=SELECT+job%2C+count%28*%29+FROM+task_events+GROUP+BY+job")
	if code != http.StatusOK || len(fa.queries) != 0 {
		t.Fatalf("GET with a query: status %d, %d queries run\n%s", code, len(fa.queries), body)
	}
	mustContain(t, "sql form", body, `<form method="post" action="/sql"`, `name="csrf" value="`, "SELECT job, count(*) FROM task_events GROUP BY job")
	code, body = c.postSQL(t, "SELECT job, count(*) FROM task_events GROUP BY job", "")
	if code != http.StatusOK {
		t.Fatalf("status %d\n%s", code, body)
	}
	mustContain(t, "sql", body, `<th scope="col">job</th>`, "<td>web</td>", `<td class="null">NULL</td>`, "a, &#34;quoted&#34; note",
		`id="csv" name="format" value="csv"`, "Infrastore position 29")
	checkAccessible(t, "sql", body)
	if len(fa.queries) != 1 || fa.queries[0] != "SELECT job, count(*) FROM task_events GROUP BY job" {
		t.Errorf("queries %q", fa.queries)
	}
	code, body = c.postSQL(t, "SELECT 1", "csv")
	want := "job,n,note\nweb,3,\"a, \"\"quoted\"\" note\"\nhuge,2,\n"
	if code != http.StatusOK || body != want {
		t.Errorf("csv: %d %q, want %q", code, body, want)
	}
	// Without the browser's token (another site's form), nothing runs.
	req := httptest.NewRequest(http.MethodPost, "/sql", strings.NewReader("q=SELECT+1&csrf=forged-forged-forged-forged-forged-forged"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "corral_csrf", Value: "0123456789abcdef0123456789abcdef-other"})
	rec := httptest.NewRecorder()
	c.ui.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || len(fa.queries) != 2 {
		t.Errorf("a POST with a forged token: %d, %d queries run", rec.Code, len(fa.queries))
	}
	// A name the UI is not served as (DNS rebinding) is refused.
	req = httptest.NewRequest(http.MethodGet, "/jobs", nil)
	req.Host = "attacker.example:8080"
	rec = httptest.NewRecorder()
	c.ui.ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("Host attacker.example: %d, want 421", rec.Code)
	}
	// A result the Infrastore cut says so in the download too.
	req = httptest.NewRequest(http.MethodPost, "/sql", strings.NewReader(url.Values{"q": {"SELECT repeat('x', 1000000) FROM range(1000)"},
		"csrf": {"0123456789abcdef0123456789abcdef-token"}, "format": {"csv"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "corral_csrf", Value: "0123456789abcdef0123456789abcdef-token"})
	rec = httptest.NewRecorder()
	c.ui.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get(webui.TruncatedHeader) != "cut at the 16777216-byte limit" ||
		!strings.Contains(rec.Header().Get("Content-Disposition"), "truncated") {
		t.Errorf("a cut CSV: %d, %s %q, disposition %q", rec.Code, webui.TruncatedHeader, rec.Header().Get(webui.TruncatedHeader), rec.Header().Get("Content-Disposition"))
	}
	// A query past the Infrastore's memory is the query's doing: 422
	// with the reason, on the page and as a download.
	for _, format := range []string{"", "csv"} {
		code, body = c.postSQL(t, "SELECT list(repeat('x', 1000)) FROM range(100000000)", format)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "memory budget") {
			t.Errorf("a query past the memory (format %q): %d\n%.300s", format, code, body)
		}
	}
	code, body = c.postSQL(t, "DELETE FROM events", "")
	if code != http.StatusBadRequest || !strings.Contains(body, "DELETE is not a read-only query") || !strings.Contains(body, `aria-invalid="true"`) {
		t.Errorf("refused query: %d\n%s", code, body)
	}
}

// fakeLogs serves a fixed tail to anyone (the rule of who may read is
// the Service's: see logs_access_test.go).
type fakeLogs struct{ asked []string }

func (f *fakeLogs) MayReadLogs(context.Context, projections.TaskKey) error { return nil }

func (f *fakeLogs) TaskRunsOf(context.Context, projections.TaskKey) ([]api.TaskRun, error) {
	return nil, errors.New("no runs here")
}

func (f *fakeLogs) RunLogs(context.Context, projections.TaskKey, int32, string, int) ([]byte, error) {
	return nil, errors.New("no runs here")
}

func (f *fakeLogs) TailLogs(_ context.Context, task projections.TaskKey, stream string, maxBytes int) ([]byte, error) {
	f.asked = append(f.asked, fmt.Sprintf("%s %s %d", task, stream, maxBytes))
	if stream == "stderr" {
		return nil, errors.New("agent m0 unreachable")
	}
	return []byte("hello <world>\n"), nil
}

// FollowLogs sends two writes, then waits for the reader to leave.
func (f *fakeLogs) FollowLogs(ctx context.Context, task projections.TaskKey, stream string, send func([]byte) error) error {
	f.asked = append(f.asked, fmt.Sprintf("follow %s %s", task, stream))
	for _, s := range []string{"later <line>\n", "and \"another\"\n"} {
		if err := send([]byte(s)); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

func TestTaskLogsFromTheAgent(t *testing.T) {
	c := openCell(t, smallCell())
	logs := &fakeLogs{}
	ui, err := webui.New(webui.Config{API: c.svc, Cell: c.m, Logs: logs, Hosts: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	c.ui = ui
	code, body := c.get(t, "/jobs/alice/web/tasks/0")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	mustContain(t, "task", body, "hello &lt;world&gt;", "(stderr is unavailable: agent m0 unreachable)")
	if strings.Contains(body, "reads no logs") {
		t.Error("the page says there is no log RPC while one is configured")
	}
	if len(logs.asked) != 2 || logs.asked[0] != "alice/web/0 stdout 16384" {
		t.Errorf("asked %q", logs.asked)
	}
	mustContain(t, "task", body, `data-follow="/jobs/alice/web/tasks/0/logs/stdout"`, `src="/static/logs.js"`)
	// A task never placed has no logs to ask for.
	_, body = c.get(t, "/jobs/bob/huge/tasks/0")
	mustContain(t, "pending task", body, "never been placed")

	// The live stream: what the task writes, as server-sent events of
	// JSON strings, until the reader leaves.
	srv := httptest.NewServer(c.ui)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/jobs/alice/web/tasks/0/logs/stdout", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("follow: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	var got strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && strings.Count(got.String(), "data: ") < 2 {
		got.WriteString(sc.Text() + "\n")
	}
	cancel()
	resp.Body.Close()
	mustContain(t, "followed stdout", got.String(), `data: "later \u003cline\u003e\n"`, `data: "and \"another\"\n"`)
	for path, want := range map[string]int{
		"/jobs/alice/web/tasks/0/logs/secrets": http.StatusBadRequest,
		"/jobs/alice/web/tasks/-1/logs/stdout": http.StatusBadRequest,
		"/jobs/bob/huge/tasks/0/logs/stdout":   http.StatusNotFound,
	} {
		if code, _ := c.get(t, path); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
}

// Without the store's stream index the history comes from a scan of the
// log, filtered to the task's own stream (task 1's prefix matches 10-19).
func TestTaskHistoryWithoutStreams(t *testing.T) {
	h := &history{}
	h.machine("m0")
	h.job("alice", "many", 4, 12, res(10, 8<<20), nil)
	for i := int32(0); i < 12; i++ {
		h.run("alice", "many", i, "m0")
	}
	c := openCell(t, h.evs)
	ui, err := webui.New(webui.Config{API: c.svc, Cell: c.m, Hosts: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	c.ui = ui
	code, body := c.get(t, "/jobs/alice/many/tasks/1")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	mustContain(t, "task 1", body, "task alice/many/1 pending", "task alice/many/1 scheduled on m0", "task alice/many/1 running on m0")
	if strings.Contains(body, "alice/many/10") || strings.Contains(body, "alice/many/11") {
		t.Error("task 1's history shows events of tasks 10 and 11")
	}
}

func TestRollingUpdateProgress(t *testing.T) {
	evs := smallCell()
	h := &history{now: evs[len(evs)-1].OccurredAt, evs: evs}
	spec := &events.JobSpec{User: "alice", Name: "web", Priority: 9, TaskCount: 3, Command: "/bin/sh", Args: []string{"-c", "exec sleep 600"},
		Resources: res(500, 256<<20), Labels: map[string]string{"team": "web"}, Update: &events.UpdatePolicy{MaxDisruptions: 1}}
	h.add(events.JobStream("alice", "web"), &events.JobUpdated{Spec: spec, SpecVersion: 2, PreviousVersion: 1, RestartNeeded: true})
	h.add(events.TaskStream("alice", "web", 0), &events.TaskUpdated{User: "alice", Job: "web", Index: 0, SpecVersion: 2, Running: true, RestartNeeded: true})
	c := openCell(t, h.evs)
	code, body := c.get(t, "/jobs/alice/web")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	mustContain(t, "job", body, "Rolling update", `<progress id="update-progress" max="3" value="1">`, "1 of 3 tasks at version 2",
		"at most 1 at once", "exec sleep 600")
	checkAccessible(t, "job in update", body)
	_, body = c.get(t, "/jobs")
	mustContain(t, "jobs", body, "updating")
}

// The diff page, from the cell page's form: what changed between two
// positions of the small cell, by the master's replay of its log.
func TestDiffPage(t *testing.T) {
	c := openCell(t, smallCell())
	code, body := c.get(t, "/")
	if code != http.StatusOK {
		t.Fatalf("cell page: %d", code)
	}
	mustContain(t, "cell", body, `action="/diff"`, `id="c-from" name="from"`)
	head := c.m.Position()
	code, body = c.get(t, fmt.Sprintf("/diff?from=13&to=%d", head))
	if code != http.StatusOK {
		t.Fatalf("status %d\n%s", code, body)
	}
	mustContain(t, "diff", body, "What changed", "From log position 13", fmt.Sprintf("to log position %d", head),
		`<a href="/jobs/bob/huge">bob/huge</a>`, `<a href="/jobs/alice/web/tasks/1">alice/web/1</a>`, "task pending again: 1",
		`<a href="/machines/m2">m2</a>`, "missed 3 polls", "job submitted: 2", `value="13"`)
	checkAccessible(t, "diff", body)
	// Times as the browser's datetime-local sends them (UTC), and RFC 3339:
	// from before the first event to just after the last (the head), which
	// the log stamped a moment ago: a moment in the future is refused.
	to := url.QueryEscape(time.Now().UTC().Add(2 * time.Second).Format(time.RFC3339))
	for _, q := range []string{"from=2001-01-01T00:00&to=" + to, "from=2001-01-01T00%3A00%3A00Z&to=" + to} {
		code, body := c.get(t, "/diff?"+q)
		if code != http.StatusOK || !strings.Contains(body, "From the empty log") || !strings.Contains(body, "machine added: 3") {
			t.Errorf("/diff?%s: %d\n%s", q, code, body)
		}
	}
	// The same point twice: nothing changed.
	if code, body := c.get(t, "/diff?from=5&to=5"); code != http.StatusOK || !strings.Contains(body, `id="diff-empty"`) {
		t.Errorf("from 5 to 5: %d\n%s", code, body)
	}
	for _, bad := range []struct{ path, field string }{
		{"/diff", "from"}, {"/diff?from=0", "from"}, {"/diff?from=yesterday-ish", "from"}, {"/diff?from=3&to=%3Cscript%3E", "to"},
		{"/diff?from=1999-01-01T00:00", "from"}, {"/diff?from=2001-01-01T00:00&to=2099-01-01T00:00", "to"}, {fmt.Sprintf("/diff?from=%d&to=2", head), "after"},
	} {
		t.Run(bad.path, func(t *testing.T) {
			if code, body := c.get(t, bad.path); code != http.StatusBadRequest || !strings.Contains(body, bad.field) {
				t.Errorf("%s: %d, want 400 naming %s\n%s", bad.path, code, bad.field, body)
			}
		})
	}
}

func TestWhatIfPage(t *testing.T) {
	c := openCell(t, smallCell())
	if code, body := c.get(t, "/"); code != http.StatusOK || !strings.Contains(body, `<a href="/sim">What if</a>`) {
		t.Fatalf("the cell page links no what-if page: %d", code)
	}
	code, body := c.get(t, "/sim")
	if code != http.StatusOK {
		t.Fatalf("/sim: %d\n%s", code, body)
	}
	mustContain(t, "sim form", body, `action="/sim"`, `id="s-remove" name="remove"`)
	checkAccessible(t, "sim form", body)
	code, body = c.get(t, "/sim?run=1")
	if code != http.StatusOK {
		t.Fatalf("/sim?run=1: %d\n%s", code, body)
	}
	mustContain(t, "sim", body, `id="sim-summary"`, "change: none", `id="pending-cap"`, `<td>alice</td>`)
	checkAccessible(t, "sim", body)
	head := c.m.Position()
	// Without its machines, nothing the window submits runs.
	code, body = c.get(t, fmt.Sprintf("/sim?run=1&from=1&to=%d&remove=100%%25&policy=best-fit", head))
	if code != http.StatusOK {
		t.Fatalf("/sim remove 100%%: %d\n%s", code, body)
	}
	mustContain(t, "sim remove", body, "change: --remove 100% --policy best-fit", "not placed in the simulation by the window&#39;s end; its machine was removed by the change",
		// The handmade log admitted jobs asking for 100 ports; the real
		// command, replayed, does not, and the page says why in its words.
		"requests the simulated cell refused", "SubmitJob", "<li>SubmitJob 3, such as: resources.ports: must be between 0 and 64</li>")
	for q, field := range map[string]string{
		"remove=150%25": "remove", "add=3x0c1g": "add", "policy=fastest": "policy", "from=yesterday": "from",
		"from=-4": "from", "to=2999-01-01T00:00:00Z": "to",
		// A shape whose cores or memory round to nothing, and a
		// percentage in Go's digit separators.
		"add=1x0.0001c1g": "add", "add=1x1c0.0000000001g": "add", "remove=1_0": "remove",
		"add=1x1c1g&add=--store=/etc/passwd": "add", "policy=--help": "policy",
	} {
		code, body := c.get(t, "/sim?run=1&"+q)
		if code != http.StatusBadRequest || !strings.Contains(body, field+":") {
			t.Errorf("/sim?%s: %d, want 400 naming %s\n%s", q, code, field, body)
		}
	}
}

// The cell page says when the leader's link holds machine loss, and says
// nothing of it otherwise.
func TestCellPageShowsALossHold(t *testing.T) {
	c := openCell(t, smallCell())
	var held bool
	since := time.Date(2026, 11, 28, 11, 30, 5, 0, time.UTC)
	ui, err := webui.New(webui.Config{API: c.svc, Cell: c.m, Hosts: []string{"example.com"},
		LossHold: func() (master.LossHold, bool) { return master.LossHold{Since: since, Missing: 5, Machines: 8}, held }})
	if err != nil {
		t.Fatal(err)
	}
	c.ui = ui
	if _, body := c.get(t, "/"); strings.Contains(body, "Machine loss held") {
		t.Error("the cell page shows a loss hold while there is none")
	}
	held = true
	code, body := c.get(t, "/")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	mustContain(t, "cell", body, "Machine loss held since 11:30:05", "5 of 8 machines missed their polls at once", "marks none down")
	checkAccessible(t, "cell with a loss hold", body)
}
