package daytona

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/buildinfo"
	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

// Defaults.
const (
	// DefaultAPIURL is Daytona's control plane.
	DefaultAPIURL = "https://app.daytona.io/api"
	// DefaultCreateTimeout bounds how long Create waits for a sandbox to
	// reach started.
	DefaultCreateTimeout = 3 * time.Minute
	// DefaultPollInterval is how often Create, Destroy and snapshot
	// imports poll a state, as Daytona's own clients do.
	DefaultPollInterval = time.Second
	// DefaultCallTimeout bounds each attempt of a short toolbox call.
	DefaultCallTimeout = 30 * time.Second
)

// Option configures a Vendor.
type Option func(*options)

type options struct {
	apiURL        string
	orgID         string
	httpClient    *http.Client
	retry         []vendorhttp.Option
	log           *slog.Logger
	poll          time.Duration
	version       string
	attempts      int
	createTimeout time.Duration
	watch         time.Duration
	callTimeout   time.Duration
	hostAddr      string
}

// WithHostAddress names this machine's address as the sandboxes reach it
// (an emulator's on its Docker network: boxctl emulate prints it), where
// a local model endpoint listens. Default none: Daytona's own sandboxes
// reach no address of the caller's.
func WithHostAddress(addr string) Option { return func(o *options) { o.hostAddr = addr } }

// WithAPIURL sets the control plane URL, path prefix included
// ("https://app.daytona.io/api"). Default DefaultAPIURL.
func WithAPIURL(u string) Option { return func(o *options) { o.apiURL = u } }

// WithOrganization sends X-Daytona-Organization-ID with every call, which
// Daytona needs when the key is a JWT rather than an API key. Default
// none.
func WithOrganization(id string) Option { return func(o *options) { o.orgID = id } }

// WithHTTPClient sets the HTTP client of every request: control plane,
// toolbox and the boxes' endpoints. Default a pooled client with no
// overall timeout: each call is bounded by its ctx. Host names under
// "localhost" reach this machine's loopback whatever the client's
// transport resolves (RFC 6761), as Daytona's own local setup expects of
// its preview URLs (http://{port}-{id}.proxy.localhost:4000).
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithRetry bounds retries of control plane and toolbox calls: at most max
// retries, waiting between waitMin and waitMax (Retry-After and
// Retry-After-<throttler> honoured up to waitMax). Default 4 retries,
// 500ms to 10s.
func WithRetry(max int, waitMin, waitMax time.Duration) Option {
	return func(o *options) { o.retry = append(o.retry, vendorhttp.WithRetry(max, waitMin, waitMax)) }
}

// WithLogger receives debug records of calls and retries (never keys,
// tokens or environment values). Default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithPollInterval sets how often a sandbox's or a snapshot's state is
// polled. Default DefaultPollInterval.
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.poll = d } }

// WithVersion sets the boxctl version label of boxes. Default this
// binary's version.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithCreateAttempts bounds how many times Create asks for a sandbox when
// an answer is lost or a server error leaves the outcome unknown (it looks
// for the sandbox of the earlier attempt first each time). Default 4.
func WithCreateAttempts(n int) Option { return func(o *options) { o.attempts = n } }

// WithCreateTimeout bounds how long Create waits for a new sandbox to be
// started. Default DefaultCreateTimeout.
func WithCreateTimeout(d time.Duration) Option { return func(o *options) { o.createTimeout = d } }

// WithGoneCheckInterval sets how often a box whose endpoint has a
// response in flight is checked for having vanished, so that a stream
// from a deleted box ends with a *vendors.GoneError instead of hanging.
// Default 1s.
func WithGoneCheckInterval(d time.Duration) Option { return func(o *options) { o.watch = d } }

// WithCallTimeout bounds each attempt of the toolbox's short calls
// (sessions, their commands' input and state, file modes), so that a
// toolbox that takes a request and never answers fails the call with a
// *vendorhttp.TimeoutError instead of holding it; an attempt of a call
// that reads state is retried. Commands and streams are bounded by their
// ctx and the box's deadline only. Default DefaultCallTimeout.
func WithCallTimeout(d time.Duration) Option { return func(o *options) { o.callTimeout = d } }

func makeOptions(opts []Option) (options, error) {
	o := options{apiURL: DefaultAPIURL, poll: DefaultPollInterval, version: buildinfo.Get().Version,
		attempts: 4, createTimeout: DefaultCreateTimeout, watch: time.Second, callTimeout: DefaultCallTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if u, err := url.Parse(strings.TrimRight(o.apiURL, "/")); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return o, fmt.Errorf("daytona: bad API URL %q", o.apiURL)
	}
	if err := vendorhttp.CheckCreate(Name, o.poll, o.attempts); err != nil {
		return o, err
	}
	switch {
	case o.createTimeout <= 0:
		return o, fmt.Errorf("daytona: create timeout %v must be positive", o.createTimeout)
	case o.watch <= 0:
		return o, fmt.Errorf("daytona: gone check interval %v must be positive", o.watch)
	case o.callTimeout <= 0:
		return o, fmt.Errorf("daytona: call timeout %v must be positive", o.callTimeout)
	}
	o.httpClient, o.log = vendorhttp.Defaults(o.httpClient, o.log)
	c := *o.httpClient
	c.Transport = localhostTransport(c.Transport)
	o.httpClient = &c
	if o.version == "" {
		return o, errors.New("daytona: empty version")
	}
	o.httpClient = vendorhttp.Traced(o.httpClient, Name)
	return o, nil
}
