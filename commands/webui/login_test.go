package webui_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/webui"
)

// With a login configured, every page asks for one; a token the cell
// knows starts a session whose user the pages show and act as; a wrong
// token, a forged form or a redirect off the site get nowhere; log out
// ends the session. --web-anonymous serves every page without one.
func TestLoginGuardsEveryPage(t *testing.T) {
	c := openCell(t, smallCell())
	login := func(_ context.Context, tok string) (auth.Identity, error) {
		if tok == "corral_good" {
			return auth.Identity{Name: "alice", Role: auth.RoleUser, Via: "token"}, nil
		}
		return auth.Identity{}, errors.New("unknown token")
	}
	ui, err := webui.New(webui.Config{API: c.svc, Cell: c.m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Login: login})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui)
	defer srv.Close()
	b := newBrowser(t, srv.URL)
	for _, path := range []string{"/", "/jobs", "/jobs/alice/web", "/events", "/sql"} {
		code, at, body := b.get(path)
		if code != 200 || at != "/login" || !strings.Contains(body, `name="token"`) {
			t.Errorf("GET %s without a session: %d at %s, want the login page", path, code, at)
		}
	}
	if resp, err := b.client.PostForm(srv.URL+"/sql", url.Values{"q": {"SELECT 1"}}); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /sql without a session: %v %v", resp.StatusCode, err)
	}
	_, _, page := b.get("/login?next=/jobs")
	csrf := b.csrfOf(page)
	if code, _, body := b.post("/login", url.Values{"token": {"corral_bad"}, "csrf": {csrf}, "next": {"/jobs"}}); code != http.StatusUnauthorized || !strings.Contains(body, "token: not one this cell knows") {
		t.Errorf("a wrong token: %d\n%s", code, body)
	}
	if code, _, _ := b.post("/login", url.Values{"token": {"corral_good"}, "csrf": {"forged-forged-forged-forged-forged-forged"}}); code != http.StatusForbidden {
		t.Errorf("a login form with a forged CSRF token: %d", code)
	}
	if code, at, body := b.post("/login", url.Values{"token": {"corral_good"}, "csrf": {csrf}, "next": {"//evil.example/"}}); code != 200 || at != "/" || !strings.Contains(body, `<span id="user">alice</span>`) {
		t.Errorf("login with an off-site next: %d at %s", code, at)
	}
	if code, at, body := b.get("/jobs"); code != 200 || at != "/jobs" || !strings.Contains(body, `<span id="user">alice</span>`) {
		t.Errorf("GET /jobs logged in: %d at %s", code, at)
	}
	_, _, page = b.get("/jobs")
	if code, at, _ := b.post("/logout", url.Values{"csrf": {b.csrfOf(page)}}); code != 200 || at != "/login" {
		t.Errorf("log out: %d at %s", code, at)
	}
	if _, at, _ := b.get("/jobs"); at != "/login" {
		t.Errorf("after log out, GET /jobs lands at %s", at)
	}

	anon, err := webui.New(webui.Config{API: c.svc, Cell: c.m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Login: login, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	anon.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/jobs", nil))
	if rec.Code != 200 {
		t.Errorf("anonymous UI: GET /jobs %d", rec.Code)
	}
}

// browser is a client that keeps its cookies, as a browser does.
type browser struct {
	t      *testing.T
	base   string
	client *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, client: &http.Client{Jar: jar}}
}

// get returns the status, the path it lands at after redirects, and the
// body.
func (b *browser) get(path string) (int, string, string) {
	b.t.Helper()
	resp, err := b.client.Get(b.base + path)
	return b.read(resp, err)
}

// post posts form as a browser does, and answers as get.
func (b *browser) post(path string, form url.Values) (int, string, string) {
	b.t.Helper()
	resp, err := b.client.PostForm(b.base+path, form)
	return b.read(resp, err)
}

func (b *browser) read(resp *http.Response, err error) (int, string, string) {
	b.t.Helper()
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Request.URL.Path, string(body)
}

// csrfOf is the CSRF token of a page's form.
func (b *browser) csrfOf(body string) string {
	b.t.Helper()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	return m[1]
}
