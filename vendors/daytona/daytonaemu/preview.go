package daytonaemu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// previewTokenHeader carries a sandbox's preview token.
const previewTokenHeader = "X-Daytona-Preview-Token"

// preview proxies a request for {port}-{id}.{domain} to the sandbox's
// port, as Daytona's proxy does: the preview token (header or
// DAYTONA_SANDBOX_AUTH_KEY query parameter) is required unless the
// sandbox is public; without it, or for a sandbox the control plane does
// not know, the proxy sends the client to log in (307). The proxied
// request ends when the sandbox stops.
func (s *Server) preview(w http.ResponseWriter, r *http.Request, port int, id string) {
	s.mu.Lock()
	sb := s.sandboxes[id]
	known := sb != nil && sb.State != stateDestroyed && sb.DesiredState != stateDestroyed
	var ip string
	var public bool
	var token string
	running := false
	if known {
		ip, public, token, running = sb.ip, sb.Public, sb.authToken, sb.State == stateStarted && sb.box != nil
	}
	s.mu.Unlock()
	q := r.URL.Query()
	authorized := known && (public || r.Header.Get(previewTokenHeader) == token || q.Get("DAYTONA_SANDBOX_AUTH_KEY") == token)
	if !authorized {
		http.Redirect(w, r, s.url+"/api/auth/login?returnTo="+url.QueryEscape("http://"+r.Host+r.URL.RequestURI()), http.StatusTemporaryRedirect)
		return
	}
	if !running {
		toolboxError(w, r, http.StatusBadGateway, "BAD_GATEWAY", "sandbox "+id+" is not running")
		return
	}
	if r.Header.Get("X-Daytona-Skip-Last-Activity-Update") != "true" {
		s.touch(sb)
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(sb.ctx, func() { cancel(errStopped) })
	defer stop()
	target := &url.URL{Scheme: "http", Host: net.JoinHostPort(ip, strconv.Itoa(port))}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Del(previewTokenHeader)
			pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
			q := pr.Out.URL.Query()
			if q.Has("DAYTONA_SANDBOX_AUTH_KEY") {
				q.Del("DAYTONA_SANDBOX_AUTH_KEY")
				pr.Out.URL.RawQuery = q.Encode()
			}
		},
		Transport:     s.proxy,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(s.opts.Log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			toolboxError(w, r, http.StatusBadGateway, "BAD_GATEWAY", "failed to proxy request: "+err.Error())
		},
	}
	// The box's server may answer (an event stream's headers) before the
	// request's body is all through: keep reading it after the response
	// starts, or the server would close it under the proxy and cut both.
	_ = http.NewResponseController(w).EnableFullDuplex()
	rp.ServeHTTP(w, r.WithContext(ctx))
	if ctx.Err() != nil {
		s.opts.Log.Debug("daytona preview request ended early", "sandbox", id, "port", port, "path", r.URL.Path,
			"cause", context.Cause(ctx), "client", r.Context().Err())
	}
}

// previewOrigin returns the origin of the sandbox's port: with a proxy
// domain, http://{port}-{id}.{domain}; else a loopback listener of its
// own, made on first use, so that the URL resolves on this machine with
// no name service at all. Call with s.mu.
func (s *Server) previewOrigin(sb *sandbox, port int) (string, error) {
	if s.opts.ProxyDomain != "" {
		return fmt.Sprintf("http://%d-%s.%s", port, sb.ID, s.opts.ProxyDomain), nil
	}
	key := sb.ID + ":" + strconv.Itoa(port)
	if ln := s.previews[key]; ln != nil {
		return "http://" + ln.Addr().String(), nil
	}
	host, _, _ := net.SplitHostPort(s.ln.Addr())
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("preview listener: %w", err)
	}
	s.previews[key] = ln
	id := sb.ID
	srv := &http.Server{ReadHeaderTimeout: 30 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.preview(w, r, port, id) })}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String(), nil
}

// closePreviews closes the preview listeners of sandbox id (every one
// when id is empty). Call with s.mu.
func (s *Server) closePreviews(id string) {
	for key, ln := range s.previews {
		if id == "" || strings.HasPrefix(key, id+":") {
			_ = ln.Close()
			delete(s.previews, key)
		}
	}
}

// errStopped ends the proxied requests of a sandbox that stopped.
var errStopped = errors.New("the sandbox stopped")
