package inspector

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
)

// CookiePrefix starts the name of the session cookie the URL's token is
// exchanged for; the rest is the server's own, so that inspectors on two
// ports of one host (which share cookies) keep their sessions apart.
const CookiePrefix = "boxctl_inspector_"

// CSRFHeader carries the session's CSRF token on state-changing requests.
const CSRFHeader = "X-CSRF-Token"

// TokenParam is the URL query parameter of the one-time token.
const TokenParam = "token"

// auth is the server's one session: a one-time token, exchanged once for
// a session cookie, and the session's CSRF token.
type auth struct {
	mu      sync.Mutex
	token   string // "" once exchanged
	cookie  string // the session cookie's name
	session string
	csrf    string
	hosts   map[string]bool // hosts besides loopback ones the server answers for
}

func newAuth() *auth {
	return &auth{token: secret(), cookie: CookiePrefix + secret()[:12], session: secret(), csrf: secret(), hosts: map[string]bool{}}
}

func secret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// allowHost adds the host (of a host:port) that the server listens on.
func (a *auth) allowHost(hostport string) {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport
	}
	a.mu.Lock()
	a.hosts[strings.ToLower(h)] = true
	a.mu.Unlock()
}

// hostOK reports whether a Host header names a loopback address,
// localhost, or the listener's host: a page of another name that resolves
// to this server (DNS rebinding) is refused.
func (a *auth) hostOK(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport
	}
	h = strings.ToLower(strings.Trim(h, "[]"))
	if h == "localhost" {
		return true
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hosts[h]
}

// exchange spends the one-time token: true once, for the right token.
func (a *auth) exchange(token string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == "" || !equal(token, a.token) {
		return false
	}
	a.token = ""
	return true
}

// wrap guards next: host, then token exchange or session cookie, then,
// for a state-changing request, origin and CSRF token.
func (a *auth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.hostOK(r.Host) {
			writeError(w, errorf(http.StatusForbidden, TypeBadHost, "this server does not answer for host "+r.Host))
			return
		}
		if tok := r.URL.Query().Get(TokenParam); tok != "" {
			if !a.exchange(tok) {
				writeError(w, errorf(http.StatusUnauthorized, TypeInvalidToken, "the token is wrong or was already used: start `boxctl ui` again for a new one"))
				return
			}
			http.SetCookie(w, &http.Cookie{Name: a.cookie, Value: a.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			u := *r.URL
			q := u.Query()
			q.Del(TokenParam)
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		c, err := r.Cookie(a.cookie)
		if err != nil || !equal(c.Value, a.session) {
			writeError(w, errorf(http.StatusUnauthorized, TypeUnauthenticated, "open the URL `boxctl ui` printed (with its token)"))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if o := r.Header.Get("Origin"); o == "" || o != "http://"+r.Host {
				writeError(w, errorf(http.StatusForbidden, TypeBadOrigin, "a state-changing request must come from the inspector's own page"))
				return
			}
			if !equal(r.Header.Get(CSRFHeader), a.csrf) {
				writeError(w, errorf(http.StatusForbidden, TypeBadCSRF, "a state-changing request needs the session's "+CSRFHeader+" header"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
