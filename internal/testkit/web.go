package testkit

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"testing"
	"time"
)

// NewBrowser is an HTTP client that keeps cookies, as a browser keeps the
// web UI's session; followRedirects false stops at a redirect so a test
// can see where it points.
func NewBrowser(timeout time.Duration, followRedirects bool) *http.Client {
	jar, _ := cookiejar.New(nil) // New never fails without options
	b := &http.Client{Jar: jar, Timeout: timeout}
	if !followRedirects {
		b.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return b
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// LoginCSRF opens the web UI's login page at base as b and returns the CSRF
// token its form carries (b's jar keeps the cookie that goes with it).
func LoginCSRF(tb testing.TB, b *http.Client, base string) string {
	tb.Helper()
	resp, err := b.Get(base + "/login")
	if err != nil {
		tb.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(page)
	if m == nil {
		tb.Fatalf("the login page at %s has no CSRF token:\n%s", base, page)
	}
	return string(m[1])
}

// WebLogin posts token and csrf to the login form at base as b and returns
// the answer's status and body.
func WebLogin(tb testing.TB, b *http.Client, base, token, csrf string) (int, string) {
	tb.Helper()
	resp, err := b.PostForm(base+"/login", url.Values{"token": {token}, "csrf": {csrf}})
	if err != nil {
		tb.Fatalf("logging in at %s: %v", base, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body)
}
