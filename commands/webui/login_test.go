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
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	get := func(path string) (int, string, string) {
		t.Helper()
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Request.URL.Path, string(b)
	}
	csrfOf := func(body string) string {
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no CSRF token in the page:\n%s", body)
		}
		return m[1]
	}
	post := func(path string, form url.Values) (int, string, string) {
		t.Helper()
		resp, err := client.PostForm(srv.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Request.URL.Path, string(b)
	}

	for _, path := range []string{"/", "/jobs", "/jobs/alice/web", "/events", "/sql"} {
		code, at, body := get(path)
		if code != 200 || at != "/login" || !strings.Contains(body, `name="token"`) {
			t.Errorf("GET %s without a session: %d at %s, want the login page", path, code, at)
		}
	}
	if resp, err := client.PostForm(srv.URL+"/sql", url.Values{"q": {"SELECT 1"}}); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /sql without a session: %v %v", resp.StatusCode, err)
	}
	_, _, page := get("/login?next=/jobs")
	csrf := csrfOf(page)
	if code, _, body := post("/login", url.Values{"token": {"corral_bad"}, "csrf": {csrf}, "next": {"/jobs"}}); code != http.StatusUnauthorized || !strings.Contains(body, "token: not one this cell knows") {
		t.Errorf("a wrong token: %d\n%s", code, body)
	}
	if code, _, _ := post("/login", url.Values{"token": {"corral_good"}, "csrf": {"forged-forged-forged-forged-forged-forged"}}); code != http.StatusForbidden {
		t.Errorf("a login form with a forged CSRF token: %d", code)
	}
	if code, at, body := post("/login", url.Values{"token": {"corral_good"}, "csrf": {csrf}, "next": {"//evil.example/"}}); code != 200 || at != "/" || !strings.Contains(body, `<span id="user">alice</span>`) {
		t.Errorf("login with an off-site next: %d at %s", code, at)
	}
	if code, at, body := get("/jobs"); code != 200 || at != "/jobs" || !strings.Contains(body, `<span id="user">alice</span>`) {
		t.Errorf("GET /jobs logged in: %d at %s", code, at)
	}
	_, _, page = get("/jobs")
	if code, at, _ := post("/logout", url.Values{"csrf": {csrfOf(page)}}); code != 200 || at != "/login" {
		t.Errorf("log out: %d at %s", code, at)
	}
	if _, at, _ := get("/jobs"); at != "/login" {
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
