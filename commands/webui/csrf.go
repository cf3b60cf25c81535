package webui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
)

// csrfCookie holds the browser's CSRF token. A form that costs or changes
// something (the SQL console) carries the same token in a field: another
// site can make a browser send the cookie but cannot read it to fill the
// field (double-submit). The cookie is SameSite=Strict too.
const csrfCookie = "corral_csrf"

// maxFormBytes bounds a posted form (a query is at most 1 MiB).
const maxFormBytes = 2 << 20

// csrfToken returns the browser's token, setting a new one when it has
// none.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	tok := base64.RawURLEncoding.EncodeToString(raw)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return tok
}

// csrfValid reports whether a posted form carries the browser's token.
func (h *Handler) csrfValid(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) < 32 {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostForm.Get("csrf"))) == 1
}

// hostAllowed reports whether the Host header names the UI: an IP
// literal, localhost, or one of Config.Hosts.
func (h *Handler) hostAllowed(host string) bool {
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "" || name == "localhost" || net.ParseIP(name) != nil {
		return true
	}
	for _, a := range h.cfg.Hosts {
		if strings.EqualFold(strings.TrimSuffix(a, "."), name) {
			return true
		}
	}
	return false
}
