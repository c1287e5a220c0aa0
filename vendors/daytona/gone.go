package daytona

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/vendors"
)

// A box's endpoint is reached through Daytona's proxy, which has no way to
// tell a client that the sandbox behind a stream is gone: the stream may
// just stop. So the endpoint's transport checks the sandbox when a request
// fails or the proxy refuses it, and while any response body is open a
// watcher asks the control plane every opts.watch whether the sandbox
// still runs; when it no longer does, every open body fails with a
// *vendors.GoneError.

// goneTransport is the RoundTripper of a box's endpoints.
type goneTransport struct {
	b  *Box
	rt http.RoundTripper
}

func (b *Box) goneTransport() http.RoundTripper {
	rt := b.v.opts.httpClient.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &goneTransport{b: b, rt: rt}
}

// proxyRefusal reports the proxy's answers for a sandbox it cannot reach
// or no longer authorizes: a redirect to its login, 401, and gateway
// errors.
func proxyRefusal(code int) bool {
	switch code {
	case http.StatusTemporaryRedirect, http.StatusUnauthorized, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func (t *goneTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		if ctx.Err() == nil && t.b.gone(ctx) {
			return nil, &vendors.GoneError{Vendor: Name, ID: t.b.id, Op: "request", Err: err}
		}
		return nil, err
	}
	if proxyRefusal(resp.StatusCode) && t.b.gone(ctx) {
		resp.Body.Close()
		return nil, &vendors.GoneError{Vendor: Name, ID: t.b.id, Op: "request",
			Err: errors.New("the preview proxy answered " + resp.Status)}
	}
	resp.Body = t.b.watched(ctx, resp.Body)
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (t *goneTransport) CloseIdleConnections() {
	if c, ok := t.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// watcher fails the open bodies of a box's endpoints when it vanishes.
type watcher struct {
	b      *Box
	mu     sync.Mutex
	bodies map[*watchedBody]struct{}
	on     bool // the polling goroutine runs
}

// watched registers body with the box's watcher until it is closed or
// read to its end.
func (b *Box) watched(ctx context.Context, body io.ReadCloser) io.ReadCloser {
	b.mu.Lock()
	if b.watch == nil {
		b.watch = &watcher{b: b, bodies: map[*watchedBody]struct{}{}}
	}
	w := b.watch
	b.mu.Unlock()
	wb := &watchedBody{rc: body, w: w, ctx: ctx}
	w.mu.Lock()
	w.bodies[wb] = struct{}{}
	if !w.on {
		w.on = true
		go w.run()
	}
	w.mu.Unlock()
	return wb
}

func (w *watcher) remove(wb *watchedBody) {
	w.mu.Lock()
	delete(w.bodies, wb)
	w.mu.Unlock()
}

// run polls while any body is open.
func (w *watcher) run() {
	tick := time.NewTicker(w.b.v.opts.watch)
	defer tick.Stop()
	for range tick.C {
		w.mu.Lock()
		if len(w.bodies) == 0 {
			w.on = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		if !w.b.gone(context.Background()) {
			continue
		}
		w.mu.Lock()
		for wb := range w.bodies {
			wb.fail(&vendors.GoneError{Vendor: Name, ID: w.b.id, Op: "stream", Err: errors.New("the sandbox no longer runs")})
			delete(w.bodies, wb)
		}
		w.on = false
		w.mu.Unlock()
		return
	}
}

// watchedBody is a response body that fails with err once its box is
// gone.
type watchedBody struct {
	rc  io.ReadCloser
	w   *watcher
	ctx context.Context

	mu  sync.Mutex
	err error
}

func (wb *watchedBody) fail(err error) {
	wb.mu.Lock()
	wb.err = err
	wb.mu.Unlock()
	_ = wb.rc.Close()
}

func (wb *watchedBody) Read(p []byte) (int, error) {
	n, err := wb.rc.Read(p)
	if err == nil {
		return n, nil
	}
	wb.w.remove(wb)
	wb.mu.Lock()
	gone := wb.err
	wb.mu.Unlock()
	switch {
	case gone != nil:
		return n, gone
	case errors.Is(err, io.EOF), wb.ctx.Err() != nil:
		return n, err
	case wb.w.b.gone(wb.ctx):
		return n, &vendors.GoneError{Vendor: Name, ID: wb.w.b.id, Op: "stream", Err: err}
	}
	return n, err
}

func (wb *watchedBody) Close() error {
	wb.w.remove(wb)
	return wb.rc.Close()
}
