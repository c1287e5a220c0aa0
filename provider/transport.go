package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/tracing"
)

// Response size limits: control answers are small; an aggregate result
// carries a whole turn's text.
const (
	maxControlBytes = 64 << 10
	maxResultBytes  = 16 << 20
)

var (
	errHeadersTimeout = errors.New("no response headers within the headers timeout")
	errBodyTimeout    = errors.New("no response body data within the body timeout")
)

// client sends requests to one bridge. Besides its options it owns only
// the background work it runs for its Provider.
type client struct {
	opts Options
	bg   *background
}

// send makes one request. The returned body must be closed; closing it
// also releases the request's timers. A failure to get an answer is a
// *TransportError, unless ctx itself ended.
func (c *client) send(ctx context.Context, op, method, path string, body []byte, header http.Header) (*http.Response, error) {
	rctx, cancel := context.WithCancelCause(ctx)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, c.opts.BaseURL+path, rd)
	if err != nil {
		cancel(nil)
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.opts.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.BearerToken)
	}
	tracing.Inject(ctx, req.Header)
	var timer *time.Timer
	if c.opts.HeadersTimeout > 0 {
		timer = time.AfterFunc(c.opts.HeadersTimeout, func() { cancel(errHeadersTimeout) })
	}
	c.opts.Logger.DebugContext(ctx, "bridge request", "op", op, "method", method, "path", path)
	resp, err := c.opts.HTTPClient.Do(req)
	if timer != nil {
		timer.Stop()
	}
	if err != nil {
		defer cancel(nil)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", op, context.Cause(ctx))
		}
		if cause := context.Cause(rctx); cause != nil && errors.Is(cause, errHeadersTimeout) {
			err = cause
		}
		return nil, &TransportError{Op: op, Err: err}
	}
	resp.Body = &guardedBody{rc: resp.Body, cancel: cancel, idle: c.opts.BodyTimeout, ctx: rctx}
	return resp, nil
}

// guardedBody enforces the body idle timeout and ends the request's
// context when closed.
type guardedBody struct {
	rc     io.ReadCloser
	cancel context.CancelCauseFunc
	ctx    context.Context
	idle   time.Duration

	once  sync.Once
	timer *time.Timer
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.idle > 0 {
		b.once.Do(func() { b.timer = time.AfterFunc(b.idle, func() { b.cancel(errBodyTimeout) }) })
		b.timer.Reset(b.idle)
	}
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		if cause := context.Cause(b.ctx); cause != nil {
			err = cause
		}
	}
	return n, err
}

func (b *guardedBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// readBounded reads the whole body, at most max bytes, and closes it.
func readBounded(op string, resp *http.Response, max int64) ([]byte, error) {
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, &TransportError{Op: op, Err: err}
	}
	if int64(len(data)) > max {
		return nil, &ProtocolError{Op: op, Reason: fmt.Sprintf("cli-bridge response exceeded %d bytes", max)}
	}
	return data, nil
}

// call sends a request with an optional JSON body and reads a bounded
// answer. A non-2xx answer becomes a typed error unless okStatus accepts it.
func (c *client) call(ctx context.Context, op, method, path string, in any, max int64, okStatus func(int) bool) (int, http.Header, []byte, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return 0, nil, nil, fmt.Errorf("%s: encode request: %w", op, err)
		}
	}
	resp, err := c.send(ctx, op, method, path, body, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	data, err := readBounded(op, resp, max)
	if err != nil {
		return resp.StatusCode, resp.Header, nil, err
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if okStatus != nil {
		ok = okStatus(resp.StatusCode)
	}
	if !ok {
		return resp.StatusCode, resp.Header, data, errorFor(op, resp.StatusCode, resp.Header, data)
	}
	return resp.StatusCode, resp.Header, data, nil
}

// errorFor maps a non-2xx answer to a typed error by status and error type.
func errorFor(op string, status int, header http.Header, data []byte) error {
	var body wire.ErrorResponse
	_ = json.Unmarshal(data, &body)
	e := body.Error
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	switch {
	case status == http.StatusGone || e.Type == wire.TypeExpiredReplayCursor:
		x := &ExpiredCursorError{Op: op, RunID: e.RunID, Message: e.Message}
		x.Requested, x.FirstAvailable, x.Last = deref(e.RequestedEventID), deref(e.FirstAvailableEventID), deref(e.LastEventID)
		return x
	case status == http.StatusConflict:
		return &ConflictError{Op: op, Type: e.Type, Message: e.Message}
	case status == http.StatusNotFound:
		return &NotFoundError{Op: op, Type: e.Type, Message: e.Message}
	case gatewayStatus(status) && e.Type == "":
		// No bridge answers so without its error envelope: a vendor's
		// gateway or proxy found nothing listening behind it (a bridge
		// restarting). Whether it forwarded the request is unknown.
		return &TransportError{Op: op, Err: &GatewayError{Status: status, Message: e.Message}}
	}
	be := &BridgeError{Op: op, Status: status, Type: e.Type, Message: e.Message}
	if s := header.Get(wire.HeaderRetryAfter); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			be.RetryAfter = time.Duration(n) * time.Second
		}
	}
	return be
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// gatewayStatus reports the statuses a gateway answers for a backend it
// could not reach.
func gatewayStatus(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}
