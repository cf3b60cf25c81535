package webui

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/commands/auth"
)

// sessionCookie names the browser's session: a random id the UI maps to
// the user who logged in. The cookie is HttpOnly and SameSite=Strict.
const sessionCookie = "corral_session"

const (
	sessionTTL  = 12 * time.Hour
	maxSessions = 10_000 // past this, the oldest session ends first
)

type session struct {
	who     auth.Identity // as the token named it: the user and their role
	expires time.Time
}

// sessions are the UI's logged-in browsers, in memory: a restart of the
// master logs everyone out.
type sessions struct {
	mu sync.Mutex
	by map[string]session
}

func (s *sessions) start(who auth.Identity, now time.Time) string {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	id := base64.RawURLEncoding.EncodeToString(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]session{}
	}
	if len(s.by) >= maxSessions {
		var oldest string
		var at time.Time
		for k, v := range s.by {
			if v.expires.Before(now) {
				delete(s.by, k)
				continue
			}
			if oldest == "" || v.expires.Before(at) {
				oldest, at = k, v.expires
			}
		}
		if len(s.by) >= maxSessions {
			delete(s.by, oldest)
		}
	}
	s.by[id] = session{who: who, expires: now.Add(sessionTTL)}
	return id
}

func (s *sessions) user(id string, now time.Time) (auth.Identity, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.by[id]
	if !ok {
		return auth.Identity{}, false
	}
	if v.expires.Before(now) {
		delete(s.by, id)
		return auth.Identity{}, false
	}
	return v.who, true
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by, id)
}

type userKey struct{}

// userOf is the user a request's session names, "" for none.
func userOf(r *http.Request) string { return identityOf(r).Name }

// identityOf is who a request's session is for: the zero Identity for
// none.
func identityOf(r *http.Request) auth.Identity {
	id, _ := r.Context().Value(userKey{}).(auth.Identity)
	return id
}

// loginRequired reports whether the UI asks for a login: it does when it
// can check one (Config.Login) and was not told to serve anyone.
func (h *Handler) loginRequired() bool { return h.cfg.Login != nil && !h.cfg.Anonymous }

// authenticate attaches the session's user to the request, or, when a
// login is required and the request has none, sends the browser to the
// login page (a GET) or refuses it (anything else). It reports whether the
// request goes on.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if u, ok := h.sessions.user(c.Value, h.cfg.Clock()); ok {
			return r.WithContext(context.WithValue(r.Context(), userKey{}, u)), true
		}
	}
	if !h.loginRequired() || r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/") {
		return r, true
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		http.Redirect(w, r, "/login?"+url.Values{"next": {r.URL.RequestURI()}}.Encode(), http.StatusSeeOther)
		return r, false
	}
	http.Error(w, "log in first: this cell's web UI takes the API's tokens (GET /login)", http.StatusUnauthorized)
	return r, false
}

type loginData struct {
	Next, Error, CSRF string
}

// safeNext keeps a post-login redirect on this site: a path, not a URL
// another site could put in a link.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, `/\`) {
		return "/"
	}
	return next
}

func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	d := loginData{Next: safeNext(r.URL.Query().Get("next")), CSRF: h.csrfToken(w, r)}
	h.render(w, r, "login", page{Title: "Log in", Data: d})
}

// login checks a token as the API does and starts a session for its user.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, &badParam{"token", "the form does not parse: " + err.Error()})
		return
	}
	if !h.csrfValid(r) {
		h.fail(w, r, http.StatusForbidden, &badParam{"csrf", "the form's token does not match this browser's: reload the page and log in again"})
		return
	}
	d := loginData{Next: safeNext(r.PostForm.Get("next")), CSRF: h.csrfToken(w, r)}
	if h.cfg.Login == nil {
		http.Redirect(w, r, d.Next, http.StatusSeeOther)
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	who, err := h.cfg.Login(r.Context(), tok)
	if tok == "" || err != nil {
		d.Error = "token: not one this cell knows (issued by `corral token issue`, or a `corral up` cell's certs/admins/NAME.token)"
		if tok == "" {
			d.Error = "token: must be given"
		}
		w.WriteHeader(http.StatusUnauthorized)
		h.render(w, r, "login", page{Title: "Log in", Data: d})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: h.sessions.start(who, h.cfg.Clock()), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(sessionTTL / time.Second)})
	h.cfg.Logger.Info("web UI login", "user", who.Name, "role", who.Role, "remote", r.RemoteAddr)
	http.Redirect(w, r, d.Next, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil || !h.csrfValid(r) {
		h.fail(w, r, http.StatusForbidden, &badParam{"csrf", "the form's token does not match this browser's"})
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		h.sessions.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
