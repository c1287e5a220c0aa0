package e2b

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
	// DefaultDomain is E2B's domain: the control plane is api.{domain},
	// a sandbox's port P is P-{sandboxID}.{domain}.
	DefaultDomain = "e2b.app"
	// DefaultAPIURL is the control plane of DefaultDomain.
	DefaultAPIURL = "https://api." + DefaultDomain
	// EnvdPort is the port of envd, the daemon in every sandbox.
	EnvdPort = 49983
	// DefaultUser is the sandbox user envd runs processes and writes
	// files as: none named, so envd uses the template's own user (the
	// image's USER), as the official SDK does with envd 0.4 and later.
	DefaultUser = ""
)

// Option configures a Vendor.
type Option func(*options)

type options struct {
	apiURL       string
	domain       string
	dial         string
	scheme       string
	httpClient   *http.Client
	retry        []vendorhttp.Option
	log          *slog.Logger
	poll         time.Duration
	version      string
	user         string
	attempts     int
	readyTimeout time.Duration
	hostAddr     string
}

// WithHostAddress names this machine's address as the sandboxes reach it
// (an emulator's on its Docker network: boxctl emulate prints it), where
// a local model endpoint listens. Default none: E2B's own sandboxes reach
// no address of the caller's.
func WithHostAddress(addr string) Option { return func(o *options) { o.hostAddr = addr } }

// WithAPIURL sets the control plane URL. Default {scheme}://api.{domain}.
func WithAPIURL(u string) Option { return func(o *options) { o.apiURL = u } }

// WithDomain sets the domain sandboxes are reached under
// ({port}-{sandboxID}.{domain}) unless the control plane names another for
// a sandbox. Default DefaultDomain.
func WithDomain(d string) Option { return func(o *options) { o.domain = d } }

// WithDial connects every request for the domain and hosts under it (the
// control plane api.{domain} and every sandbox host) to addr (host:port)
// instead of what the names resolve to, as curl's --resolve does; requests
// keep their URL and Host, so the far end still routes by host name. For
// a local emulator, or a proxy in front of E2B. Default: resolve names.
func WithDial(addr string) Option { return func(o *options) { o.dial = addr } }

// WithScheme sets the scheme of sandbox URLs (and of the default control
// plane URL): "https", or "http" for a server without TLS (an emulator).
// Default "https".
func WithScheme(s string) Option { return func(o *options) { o.scheme = s } }

// WithHTTPClient sets the HTTP client of every request. Its transport must
// be an *http.Transport when WithDial is used. Default a pooled client
// with no overall timeout: each call is bounded by its ctx.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithRetry bounds retries of control plane calls: at most max retries,
// waiting between waitMin and waitMax (Retry-After honoured up to
// waitMax). Default 4 retries, 500ms to 10s.
func WithRetry(max int, waitMin, waitMax time.Duration) Option {
	return func(o *options) { o.retry = append(o.retry, vendorhttp.WithRetry(max, waitMin, waitMax)) }
}

// WithLogger receives debug records of calls and retries (never keys,
// tokens or environment values). Default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithPollInterval sets how often template builds are polled. Default 1s.
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.poll = d } }

// WithVersion sets the boxctl version label of boxes. Default this
// binary's version.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithUser sets the sandbox user processes run and files are written as.
// Default DefaultUser.
func WithUser(u string) Option { return func(o *options) { o.user = u } }

// WithCreateAttempts bounds how many times Create asks for a sandbox
// when an answer is lost or a server error leaves the outcome unknown
// (after looking for the box of the earlier attempt each time). Default 4.
func WithCreateAttempts(n int) Option { return func(o *options) { o.attempts = n } }

// WithReadyTimeout bounds how long Create waits for a new sandbox's envd
// to answer. Default 60s.
func WithReadyTimeout(d time.Duration) Option { return func(o *options) { o.readyTimeout = d } }

func makeOptions(opts []Option) (options, error) {
	o := options{domain: DefaultDomain, scheme: "https", poll: time.Second, version: buildinfo.Get().Version,
		user: DefaultUser, attempts: 4, readyTimeout: 60 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	o.domain = strings.TrimSuffix(strings.ToLower(o.domain), ".")
	if o.domain == "" || strings.ContainsAny(o.domain, "/:@ ") {
		return o, fmt.Errorf("e2b: bad domain %q", o.domain)
	}
	if o.apiURL == "" {
		o.apiURL = o.scheme + "://api." + o.domain
	}
	if u, err := url.Parse(o.apiURL); err != nil || u.Host == "" {
		return o, fmt.Errorf("e2b: bad API URL %q", o.apiURL)
	}
	if o.scheme != "https" && o.scheme != "http" {
		return o, fmt.Errorf("e2b: scheme %q: want https or http", o.scheme)
	}
	if err := vendorhttp.CheckCreate(Name, o.poll, o.attempts); err != nil {
		return o, err
	}
	if o.readyTimeout <= 0 {
		return o, fmt.Errorf("e2b: ready timeout %v must be positive", o.readyTimeout)
	}
	o.httpClient, o.log = vendorhttp.Defaults(o.httpClient, o.log)
	if o.dial != "" {
		t, ok := o.httpClient.Transport.(*http.Transport)
		if !ok {
			return o, errors.New("e2b: WithDial needs an HTTP client whose transport is an *http.Transport")
		}
		t = t.Clone()
		vendorhttp.Resolve(t, o.domain, o.dial)
		c := *o.httpClient
		c.Transport = t
		o.httpClient = &c
	}
	o.httpClient = vendorhttp.Traced(o.httpClient, Name)
	return o, nil
}
