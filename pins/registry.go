package pins

import (
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

// DefaultRegistry is the public npm registry.
const DefaultRegistry = "https://registry.npmjs.org/"

// RegistryFromEnv returns the registry npm itself would use as far as the
// environment says: $NPM_CONFIG_REGISTRY, then $npm_config_registry, then
// DefaultRegistry. getenv is os.Getenv outside tests.
func RegistryFromEnv(getenv func(string) string) string {
	for _, k := range []string{"NPM_CONFIG_REGISTRY", "npm_config_registry"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
	}
	return DefaultRegistry
}

// Registry reads package manifests from an npm registry's JSON API.
// It is safe for concurrent use.
type Registry struct {
	base   *url.URL
	client *retryablehttp.Client
}

// RegistryOption configures a Registry.
type RegistryOption func(*registryOptions)

type registryOptions struct {
	httpClient *http.Client
	log        *slog.Logger
	retries    int
	maxWait    time.Duration
}

// WithHTTPClient sets the HTTP client under the retries.
// Default: a client from go-cleanhttp's pooled transport.
func WithHTTPClient(c *http.Client) RegistryOption {
	return func(o *registryOptions) { o.httpClient = c }
}

// WithLogger logs retries at debug level. Default: no logging.
func WithLogger(l *slog.Logger) RegistryOption {
	return func(o *registryOptions) { o.log = l }
}

// WithRetries sets how many times a request is retried after a connection
// error, 429 or 5xx, and the longest wait between tries. Default: 4 and 10s.
func WithRetries(n int, maxWait time.Duration) RegistryOption {
	return func(o *registryOptions) { o.retries, o.maxWait = n, maxWait }
}

// NewRegistry returns a client of the registry at rawURL.
func NewRegistry(rawURL string, opts ...RegistryOption) (*Registry, error) {
	o := registryOptions{retries: 4, maxWait: 10 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("npm registry %q: want an http(s) URL", rawURL)
	}
	if o.retries < 0 || o.maxWait <= 0 {
		return nil, fmt.Errorf("npm registry: retries %d and wait %v must not be negative", o.retries, o.maxWait)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/"
	c := retryablehttp.NewClient()
	if o.httpClient != nil {
		c.HTTPClient = o.httpClient
	}
	c.RetryMax, c.RetryWaitMax = o.retries, o.maxWait
	c.RetryWaitMin = min(250*time.Millisecond, o.maxWait)
	c.Logger = nil
	// After the last try, hand back the registry's answer so the error
	// carries its status rather than only "giving up".
	c.ErrorHandler = retryablehttp.PassthroughErrorHandler
	if o.log != nil {
		c.Logger = slogLeveled{o.log}
	}
	return &Registry{base: u, client: c}, nil
}

// URL returns the registry's base URL, with a trailing slash.
func (r *Registry) URL() string { return r.base.String() }

// Manifest is the part of a registry version document ("packument version")
// that pinning uses.
type Manifest struct {
	// Name is the package name.
	Name string `json:"name"`
	// Version is the exact version the registry resolved.
	Version string `json:"version"`
	// Dist locates and hashes the tarball.
	Dist Dist `json:"dist"`
	// Dependencies are the package's runtime dependencies.
	Dependencies map[string]string `json:"dependencies,omitempty"`
	// OptionalDependencies hold the platform packages of native CLIs.
	OptionalDependencies map[string]string `json:"optionalDependencies,omitempty"`
	// Bin maps command names to files.
	Bin map[string]string `json:"bin,omitempty"`
}

// Dist is a manifest's tarball description.
type Dist struct {
	// Integrity is the tarball's SRI hash.
	Integrity string `json:"integrity"`
	// Shasum is the tarball's hex sha1.
	Shasum string `json:"shasum,omitempty"`
	// Tarball is the tarball URL.
	Tarball string `json:"tarball"`
}

// ErrNotFound means the registry has no such package or version.
var ErrNotFound = errors.New("not found in the npm registry")

// RegistryError is an unexpected answer from the registry.
type RegistryError struct {
	// Package and Version are what was asked for.
	Package, Version string
	// Status is the HTTP status code.
	Status int
	// Body is the start of the response body.
	Body string
}

func (e *RegistryError) Error() string {
	return fmt.Sprintf("npm registry: %s@%s: status %d: %s", e.Package, e.Version, e.Status, e.Body)
}

// Is makes a 404 match ErrNotFound.
func (e *RegistryError) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound
}

// Manifest fetches name at version, which may also be a dist-tag ("latest").
func (r *Registry) Manifest(ctx context.Context, name, version string) (*Manifest, error) {
	if !npmNameRE.MatchString(name) || version == "" || strings.ContainsAny(version, "/?# ") {
		return nil, fmt.Errorf("npm registry: bad package %q or version %q", name, version)
	}
	u := r.base.String() + escapeName(name) + "/" + url.PathEscape(version)
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("npm registry: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("npm registry: get %s@%s: %w", name, version, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, &RegistryError{Package: name, Version: version, Status: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&m); err != nil {
		return nil, fmt.Errorf("npm registry: decode %s@%s: %w", name, version, err)
	}
	if m.Name != name || m.Version == "" {
		return nil, fmt.Errorf("npm registry: asked for %s@%s, got %q@%q", name, version, m.Name, m.Version)
	}
	return &m, nil
}

// escapeName encodes a scoped name the way npm does: @scope%2fname. The
// name has been checked against npmNameRE, so nothing else needs escaping.
func escapeName(name string) string {
	return strings.Replace(name, "/", "%2f", 1)
}

// slogLeveled adapts *slog.Logger to retryablehttp.LeveledLogger, demoting
// retry chatter to debug.
type slogLeveled struct{ l *slog.Logger }

func (s slogLeveled) Error(msg string, kv ...any) { s.l.Warn(msg, kv...) }
func (s slogLeveled) Info(msg string, kv ...any)  { s.l.Debug(msg, kv...) }
func (s slogLeveled) Debug(msg string, kv ...any) { s.l.Debug(msg, kv...) }
func (s slogLeveled) Warn(msg string, kv ...any)  { s.l.Debug(msg, kv...) }
