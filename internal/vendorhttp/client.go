package vendorhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// Config is what a vendor's client fixes about its API.
type Config struct {
	// Vendor names the vendor in errors ("e2b"). Required.
	Vendor string
	// BaseURL is the control plane's URL, path prefix included; WithBaseURL
	// overrides it. Required (here or by option).
	BaseURL string
	// Header is sent with every request (the credentials). Never logged.
	Header http.Header
	// DecodeError reads the vendor's error body into e.Code and e.Message;
	// it reports false when the body is not the vendor's error shape, and
	// the raw body becomes the message. Nil: the raw body.
	DecodeError func(body []byte, e *APIError) bool
	// RetryAfter reads how long the server asked to wait; nil means
	// RetryAfter (the standard header).
	RetryAfter func(*http.Response) (time.Duration, bool)
}

// Client sends JSON calls to one control plane. It is safe for concurrent
// use.
type Client struct {
	cfg  Config
	base *url.URL
	http *retryablehttp.Client
	std  *http.Client
	log  *slog.Logger
}

// New returns a client for cfg with opts applied.
func New(cfg Config, opts ...Option) (*Client, error) {
	o, err := makeOptions(cfg, opts)
	if err != nil {
		return nil, err
	}
	base, err := url.Parse(strings.TrimRight(o.baseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("%s: bad API URL %q", cfg.Vendor, o.baseURL)
	}
	if cfg.RetryAfter == nil {
		cfg.RetryAfter = RetryAfter
	}
	c := &Client{cfg: cfg, base: base, std: o.httpClient, log: o.log}
	rc := retryablehttp.NewClient()
	rc.HTTPClient = o.httpClient
	rc.Logger = o.log
	rc.RetryMax, rc.RetryWaitMin, rc.RetryWaitMax = o.retryMax, o.waitMin, o.waitMax
	rc.CheckRetry = checkRetry
	rc.Backoff = c.backoff
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	c.http = rc
	return c, nil
}

// BaseURL returns the control plane's URL.
func (c *Client) BaseURL() *url.URL { u := *c.base; return &u }

// HTTPClient returns the plain HTTP client under the retries (its
// transport dials as the options said), for requests that are not JSON
// calls (streams).
func (c *Client) HTTPClient() *http.Client { return c.std }

// Call is one JSON request.
type Call struct {
	// Method is the HTTP method. Required.
	Method string
	// Path is appended to the base URL's path ("/sandboxes").
	Path string
	// Query is the query string; nil means none.
	Query url.Values
	// Header holds extra request headers; nil means none.
	Header http.Header
	// Body is sent JSON-encoded when not nil.
	Body any
	// Want is the success status; zero means any 2xx.
	Want int
	// Out receives the success body, JSON-decoded, when not nil.
	Out any
	// Idempotent lets a method other than GET, HEAD, OPTIONS, PUT and
	// DELETE be retried on 5xx and network errors too.
	Idempotent bool
	// Timeout bounds each attempt, from the dial to the answer's last
	// byte; zero means only ctx bounds the call. An attempt that runs out
	// before its answer's headers is retried when the call is idempotent;
	// one whose answer stalls after them is not. When the last attempt
	// runs out, Do returns a *TimeoutError.
	Timeout time.Duration
}

type idempotentKey struct{}

// Do sends the call, retrying as the package doc says, and returns the
// success answer's headers. A non-success answer is an *APIError.
func (c *Client) Do(ctx context.Context, call Call) (http.Header, error) {
	u := *c.base
	u.Path += call.Path
	u.RawQuery = call.Query.Encode()
	var rd io.Reader
	if call.Body != nil {
		b, err := json.Marshal(call.Body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	if call.Idempotent {
		ctx = context.WithValue(ctx, idempotentKey{}, true)
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, call.Method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range c.cfg.Header {
		req.Header[k] = vs
	}
	for k, vs := range call.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	if call.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rc := c.http
	if call.Timeout > 0 {
		rc = c.bounded(call.Timeout)
	}
	timedOut := func(err error) error {
		if call.Timeout > 0 && ctx.Err() == nil && isTimeout(err) {
			return &TimeoutError{Vendor: c.cfg.Vendor, Method: call.Method, Path: u.Path, After: call.Timeout, Err: err}
		}
		return nil
	}
	resp, err := rc.Do(req)
	if err != nil {
		if te := timedOut(err); te != nil {
			return nil, te
		}
		return nil, fmt.Errorf("%s %s: %w", call.Method, u.Path, err)
	}
	defer resp.Body.Close()
	ok := resp.StatusCode == call.Want || call.Want == 0 && resp.StatusCode/100 == 2
	if !ok {
		return nil, c.NewAPIError(resp)
	}
	if call.Out != nil {
		if err := json.NewDecoder(resp.Body).Decode(call.Out); err != nil {
			if te := timedOut(err); te != nil {
				return nil, te
			}
			return nil, fmt.Errorf("%s %s: decode response: %w", call.Method, u.Path, err)
		}
	}
	return resp.Header, nil
}

// bounded returns a retrying client like c's whose every attempt ends
// after d.
func (c *Client) bounded(d time.Duration) *retryablehttp.Client {
	hc := &http.Client{Transport: c.std.Transport, CheckRedirect: c.std.CheckRedirect, Jar: c.std.Jar, Timeout: d}
	return &retryablehttp.Client{
		HTTPClient:   hc,
		Logger:       c.http.Logger,
		RetryWaitMin: c.http.RetryWaitMin,
		RetryWaitMax: c.http.RetryWaitMax,
		RetryMax:     c.http.RetryMax,
		CheckRetry:   c.http.CheckRetry,
		Backoff:      c.http.Backoff,
		ErrorHandler: c.http.ErrorHandler,
	}
}

// NewAPIError reads a non-success answer (its body up to 64 KiB) into an
// *APIError as the client's Config says. Clients call it for answers they
// got outside Do.
func (c *Client) NewAPIError(resp *http.Response) *APIError {
	e := &APIError{Vendor: c.cfg.Vendor, Status: resp.StatusCode}
	if resp.Request != nil {
		e.Method, e.Path = resp.Request.Method, resp.Request.URL.Path
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if c.cfg.DecodeError == nil || !c.cfg.DecodeError(b, e) {
		e.Message = strings.TrimSpace(string(b))
	}
	e.RetryAfter, _ = c.cfg.RetryAfter(resp)
	return e
}

// checkRetry is the package doc's retry policy.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil && neverConnected(err) {
		return true, nil
	}
	if resp != nil && resp.StatusCode == http.StatusTooManyRequests {
		return true, nil
	}
	if !idempotent(ctx, resp, err) {
		return false, nil
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
}

func idempotent(ctx context.Context, resp *http.Response, err error) bool {
	if v, _ := ctx.Value(idempotentKey{}).(bool); v {
		return true
	}
	var method string
	switch {
	case resp != nil && resp.Request != nil:
		method = resp.Request.Method
	default:
		var ue *url.Error
		if errors.As(err, &ue) {
			method = ue.Op // "Get", "Post", ...
		}
	}
	switch strings.ToUpper(method) {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}
