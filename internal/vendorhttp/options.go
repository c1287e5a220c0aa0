package vendorhttp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Option configures a Client.
type Option func(*options)

type options struct {
	baseURL          string
	httpClient       *http.Client
	retryMax         int
	waitMin, waitMax time.Duration
	log              *slog.Logger
}

// WithBaseURL sets the control plane's URL. Default Config.BaseURL.
func WithBaseURL(u string) Option { return func(o *options) { o.baseURL = u } }

// WithHTTPClient sets the HTTP client under the retries. Default a pooled
// client with no overall timeout: each call is bounded by its ctx.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithRetry bounds retries: at most max retries after the first attempt,
// waiting between waitMin and waitMax (a server's Retry-After is honoured
// up to waitMax). Default 4 retries, 500ms to 10s.
func WithRetry(max int, waitMin, waitMax time.Duration) Option {
	return func(o *options) { o.retryMax, o.waitMin, o.waitMax = max, waitMin, waitMax }
}

// WithLogger sets the logger of retries (debug and warn lines, without
// headers). Default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

func makeOptions(cfg Config, opts []Option) (options, error) {
	o := options{baseURL: cfg.BaseURL, retryMax: 4, waitMin: 500 * time.Millisecond, waitMax: 10 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.Vendor == "" {
		return o, errors.New("vendorhttp: Config.Vendor is empty")
	}
	if o.retryMax < 0 || o.waitMin <= 0 || o.waitMax < o.waitMin {
		return o, fmt.Errorf("%s: bad retry bounds %d, %v..%v", cfg.Vendor, o.retryMax, o.waitMin, o.waitMax)
	}
	o.httpClient, o.log = Defaults(o.httpClient, o.log)
	o.httpClient = Traced(o.httpClient, cfg.Vendor)
	return o, nil
}

// Defaults returns c and l, or for either that is nil its default: a
// pooled client with no overall timeout (each call is bounded by its
// ctx), a logger that discards. They are the defaults of a vendor
// client's WithHTTPClient and WithLogger options too.
func Defaults(c *http.Client, l *slog.Logger) (*http.Client, *slog.Logger) {
	if c == nil {
		c = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return c, l
}

// CheckCreate checks a vendor client's poll interval and create attempts:
// the interval positive, at least one attempt.
func CheckCreate(vendor string, poll time.Duration, attempts int) error {
	switch {
	case poll <= 0:
		return fmt.Errorf("%s: poll interval %v must be positive", vendor, poll)
	case attempts < 1:
		return fmt.Errorf("%s: create attempts %d: want at least 1", vendor, attempts)
	}
	return nil
}
