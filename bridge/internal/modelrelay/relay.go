// Package modelrelay is the bridge's model endpoint on the box's
// loopback. Harnesses are pointed at it with a fixed placeholder key, so
// that no harness process holds the box's model token (the broker's
// token) and one can start before the box has one: a pooled box starts
// its harness ahead of any claim, and the claim gives the relay the
// upstream and token (Set). The relay replaces the placeholder with the
// token wherever the harness presented it and forwards the request as it
// came, streaming the answer back unchanged.
package modelrelay

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/internal/modelapi"
)

// Placeholder is the key harnesses present to the relay: not a secret.
const Placeholder = "boxctl-relay"

// MaxBodyBytes bounds a request body: the relay reads it whole before
// forwarding (a proxy that streams a body the server has closed can cut
// the answer: golang/go#40747).
const MaxBodyBytes = 32 << 20

// upstream is where the relay forwards, and the key it presents there.
type upstream struct {
	base *url.URL
	key  string
}

// Relay is a model endpoint on loopback. Close ends it.
type Relay struct {
	ln  net.Listener
	srv *http.Server
	log *slog.Logger

	mu  sync.Mutex
	up  *upstream
	set chan struct{} // closed by the first Set
	// client reaches the upstream on the bridge's own behalf (Call).
	client *http.Client
}

// Start listens on 127.0.0.1 at a port of the kernel's choice. ca are PEM
// certificates it trusts for an https upstream beside the system's (none:
// the system's only).
func Start(log *slog.Logger, ca []byte) (*Relay, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if len(ca) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("model relay: the trusted certificates hold no PEM certificate")
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("model relay: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Relay{ln: ln, log: log, set: make(chan struct{}), client: &http.Client{Transport: transport, Timeout: 30 * time.Second}}
	proxy := &httputil.ReverseProxy{Rewrite: r.rewrite, FlushInterval: -1, ErrorHandler: r.failed, Transport: transport,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	r.srv = &http.Server{Handler: r.handler(proxy), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("model relay", "err", err)
		}
	}()
	return r, nil
}

// URL is the relay's base URL, the harnesses' model endpoint.
func (r *Relay) URL() string { return "http://" + r.ln.Addr().String() }

// Set points the relay at upstream (the broker's URL), presenting key
// there. A later Set replaces both (a token rotated on resume).
func (r *Relay) Set(rawURL, key string) error {
	base, err := url.Parse(rawURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("model relay: upstream %q is not an http(s) URL", rawURL)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.up == nil
	r.up = &upstream{base: base, key: key}
	if first {
		close(r.set)
	}
	return nil
}

// current waits for an upstream until ctx ends.
func (r *Relay) current(ctx context.Context) (*upstream, error) {
	select {
	case <-r.set:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.up, nil
}

// upstreamWait bounds how long a request waits for the relay's first
// upstream (a harness started ahead that calls before the claim).
const upstreamWait = 30 * time.Second

type upKey struct{}

// handler reads the body, waits for an upstream and hands the request to
// proxy.
func (r *Relay) handler(proxy http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), upstreamWait)
		up, err := r.current(ctx)
		cancel()
		if err != nil {
			http.Error(w, "the box has no model endpoint yet", http.StatusServiceUnavailable)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxBodyBytes))
		if err != nil {
			status := http.StatusBadRequest
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				status = http.StatusRequestEntityTooLarge
			}
			http.Error(w, "request body: "+err.Error(), status)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), upKey{}, up)))
	})
}

// rewrite forwards to the upstream with its key where the harness
// presented the placeholder.
func (r *Relay) rewrite(pr *httputil.ProxyRequest) {
	up := pr.In.Context().Value(upKey{}).(*upstream)
	out := pr.Out
	out.URL.Scheme, out.URL.Host = up.base.Scheme, up.base.Host
	out.URL.Path = strings.TrimSuffix(up.base.Path, "/") + pr.In.URL.Path
	out.URL.RawPath = ""
	out.Host = up.base.Host
	if kind, _ := modelapi.PresentedKey(pr.In); kind != modelapi.AuthNone {
		modelapi.ReplaceKey(out, kind, up.key)
	}
}

// failed answers a request the upstream did not answer.
func (r *Relay) failed(w http.ResponseWriter, req *http.Request, err error) {
	if req.Context().Err() == nil {
		r.log.Warn("model relay: upstream failed", "err", err)
	}
	http.Error(w, "the model endpoint did not answer", http.StatusBadGateway)
}

// Close stops the relay, ending the requests in flight.
func (r *Relay) Close() error { return r.srv.Close() }

// Call sends a request of the bridge's own (not a harness's) to path at
// the upstream, once there is one, presenting the key as a Bearer token,
// with body as JSON when not nil; it returns the answer's status and body
// (at most 1 MiB). It waits for an upstream until ctx ends.
func (r *Relay) Call(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	up, err := r.current(ctx)
	if err != nil {
		return 0, nil, err
	}
	u := *up.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+up.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("model relay: %s %s: %w", method, path, redactKey(err, up.key))
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, out, err
}

// redactKey keeps key out of err's text.
func redactKey(err error, key string) error {
	if key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), key, "[token]"))
}
