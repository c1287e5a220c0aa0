package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// DefaultAPIURL is Daytona's control plane.
const DefaultAPIURL = "https://app.daytona.io/api"

// SnapshotClient publishes box images to Daytona: it gets push access to
// Daytona's registry, creates a snapshot from a pushed image and follows it
// until it is active. It is safe for concurrent use.
type SnapshotClient struct {
	base  *url.URL
	key   string
	orgID string
	http  *retryablehttp.Client
	poll  time.Duration
}

// SnapshotOption configures a SnapshotClient.
type SnapshotOption func(*snapshotOptions)

type snapshotOptions struct {
	baseURL          string
	orgID            string
	httpClient       *http.Client
	retryMax         int
	waitMin, waitMax time.Duration
	poll             time.Duration
	log              *slog.Logger
}

// WithSnapshotBaseURL sets the control plane URL. Default DefaultAPIURL.
func WithSnapshotBaseURL(u string) SnapshotOption {
	return func(o *snapshotOptions) { o.baseURL = u }
}

// WithSnapshotOrganization sends X-Daytona-Organization-ID (needed with a
// JWT instead of an API key). Default none.
func WithSnapshotOrganization(id string) SnapshotOption {
	return func(o *snapshotOptions) { o.orgID = id }
}

// WithSnapshotHTTPClient sets the HTTP client under the retries. Default a
// pooled client; each call is bounded by its ctx.
func WithSnapshotHTTPClient(c *http.Client) SnapshotOption {
	return func(o *snapshotOptions) { o.httpClient = c }
}

// WithSnapshotRetry bounds retries of throttled or failed calls: at most
// max retries, waiting between waitMin and waitMax (Retry-After style
// headers are honoured up to waitMax). Default 4 retries, 500ms to 10s.
func WithSnapshotRetry(max int, waitMin, waitMax time.Duration) SnapshotOption {
	return func(o *snapshotOptions) { o.retryMax, o.waitMin, o.waitMax = max, waitMin, waitMax }
}

// WithSnapshotPollInterval sets how often WaitSnapshot polls. Default 1s.
func WithSnapshotPollInterval(d time.Duration) SnapshotOption {
	return func(o *snapshotOptions) { o.poll = d }
}

// WithSnapshotLogger sets the logger for retries. Default discards.
func WithSnapshotLogger(l *slog.Logger) SnapshotOption {
	return func(o *snapshotOptions) { o.log = l }
}

// NewSnapshotClient returns a client that authenticates with the bearer
// key (never logged).
func NewSnapshotClient(key string, opts ...SnapshotOption) (*SnapshotClient, error) {
	o := snapshotOptions{baseURL: DefaultAPIURL, retryMax: 4, waitMin: 500 * time.Millisecond,
		waitMax: 10 * time.Second, poll: time.Second, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	if key == "" {
		return nil, errors.New("daytona: API key is empty (set DAYTONA_API_KEY)")
	}
	base, err := url.Parse(strings.TrimRight(o.baseURL, "/"))
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("daytona: bad API URL %q", o.baseURL)
	}
	if o.retryMax < 0 || o.waitMin <= 0 || o.waitMax < o.waitMin {
		return nil, fmt.Errorf("daytona: bad retry bounds %d, %v..%v", o.retryMax, o.waitMin, o.waitMax)
	}
	if o.poll <= 0 {
		return nil, fmt.Errorf("daytona: poll interval %v must be positive", o.poll)
	}
	rc := retryablehttp.NewClient()
	if o.httpClient != nil {
		rc.HTTPClient = o.httpClient
	}
	rc.Logger = o.log
	rc.RetryMax, rc.RetryWaitMin, rc.RetryWaitMax = o.retryMax, o.waitMin, o.waitMax
	rc.CheckRetry = retryPolicy
	rc.Backoff = backoff
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return &SnapshotClient{base: base, key: key, orgID: o.orgID, http: rc, poll: o.poll}, nil
}

// retryPolicy retries reads on throttling, server and network errors, and
// writes only when the server surely did not act (429, or no connection).
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return true, nil
		}
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return true, nil
	}
	if resp.Request != nil && resp.Request.Method != http.MethodGet {
		return false, nil
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, nil)
}

// backoff honours Daytona's throttler headers (Retry-After-<throttler>, in
// seconds) and plain Retry-After, never waiting longer than max.
func backoff(min, max time.Duration, attempt int, resp *http.Response) time.Duration {
	if d, ok := retryAfter(resp); ok {
		return minDuration(d, max)
	}
	return minDuration(retryablehttp.DefaultBackoff(min, max, attempt, nil), max)
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// retryAfter reads the longest Retry-After or Retry-After-* header.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	var best time.Duration
	found := false
	for k, vs := range resp.Header {
		if !strings.HasPrefix(http.CanonicalHeaderKey(k), "Retry-After") || len(vs) == 0 {
			continue
		}
		var s int
		if _, err := fmt.Sscanf(vs[0], "%d", &s); err == nil && s >= 0 {
			if d := time.Duration(s) * time.Second; !found || d > best {
				best, found = d, true
			}
		}
	}
	return best, found
}

// PushAccess is temporary access to Daytona's own registry.
type PushAccess struct {
	Username    string `json:"username"`
	Secret      string `json:"secret"`
	RegistryURL string `json:"registryUrl"`
	RegistryID  string `json:"registryId"`
	Project     string `json:"project"`
	ExpiresAt   string `json:"expiresAt"`
}

// String hides the secret.
func (p PushAccess) String() string {
	return fmt.Sprintf("push access to %s/%s as %s", p.RegistryURL, p.Project, p.Username)
}

// Repository returns where to push an image called name:
// {registryUrl}/{project}/{name}, without a scheme.
func (p PushAccess) Repository(name string) string {
	host := strings.TrimPrefix(strings.TrimPrefix(p.RegistryURL, "https://"), "http://")
	return strings.TrimRight(host, "/") + "/" + p.Project + "/" + name
}

// Snapshot states.
const (
	SnapshotBuilding    = "building"
	SnapshotPending     = "pending"
	SnapshotPulling     = "pulling"
	SnapshotActive      = "active"
	SnapshotInactive    = "inactive"
	SnapshotError       = "error"
	SnapshotBuildFailed = "build_failed"
	SnapshotRemoving    = "removing"
)

// CreateSnapshot asks for a snapshot from a pushed image (POST /snapshots).
type CreateSnapshot struct {
	// Name of the snapshot. Required.
	Name string `json:"name"`
	// ImageName is the image to pull; its tag must not be "latest".
	ImageName string `json:"imageName,omitempty"`
	// Entrypoint overrides the image's; optional.
	Entrypoint []string `json:"entrypoint,omitempty"`
	// CPU, Memory (GB) and Disk (GB) of sandboxes; zero means default.
	CPU    int `json:"cpu,omitempty"`
	Memory int `json:"memory,omitempty"`
	Disk   int `json:"disk,omitempty"`
	// RegionID pins the snapshot to a region; optional.
	RegionID string `json:"regionId,omitempty"`
}

// Snapshot is Daytona's SnapshotDto (fields this package uses).
type Snapshot struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	ImageName   string   `json:"imageName"`
	State       string   `json:"state"`
	Size        *float64 `json:"size"`
	ErrorReason *string  `json:"errorReason"`
	Ref         string   `json:"ref,omitempty"`
	CreatedAt   string   `json:"createdAt"`
	UpdatedAt   string   `json:"updatedAt"`
}

// RegistryPushAccess returns temporary credentials to push to Daytona's
// registry (GET /docker-registry/registry-push-access).
func (c *SnapshotClient) RegistryPushAccess(ctx context.Context) (PushAccess, error) {
	var pa PushAccess
	if err := c.do(ctx, http.MethodGet, "/docker-registry/registry-push-access", nil, &pa); err != nil {
		return PushAccess{}, fmt.Errorf("registry push access: %w", err)
	}
	if pa.RegistryURL == "" || pa.Username == "" {
		return PushAccess{}, errors.New("registry push access: response lacks registryUrl or username")
	}
	return pa, nil
}

// CreateSnapshot registers a snapshot; it is usually still pending.
func (c *SnapshotClient) CreateSnapshot(ctx context.Context, req CreateSnapshot) (Snapshot, error) {
	if req.Name == "" {
		return Snapshot{}, errors.New("create snapshot: name is empty")
	}
	var s Snapshot
	if err := c.do(ctx, http.MethodPost, "/snapshots", req, &s); err != nil {
		return Snapshot{}, fmt.Errorf("create snapshot %s: %w", req.Name, err)
	}
	return s, nil
}

// Snapshot returns a snapshot by id or name.
func (c *SnapshotClient) Snapshot(ctx context.Context, idOrName string) (Snapshot, error) {
	var s Snapshot
	if err := c.do(ctx, http.MethodGet, "/snapshots/"+url.PathEscape(idOrName), nil, &s); err != nil {
		return Snapshot{}, fmt.Errorf("get snapshot %s: %w", idOrName, err)
	}
	return s, nil
}

// WaitSnapshot polls until the snapshot is active. The error and
// build_failed states return a *SnapshotFailedError; ctx bounds the wait.
func (c *SnapshotClient) WaitSnapshot(ctx context.Context, idOrName string) (Snapshot, error) {
	t := time.NewTicker(c.poll)
	defer t.Stop()
	for {
		s, err := c.Snapshot(ctx, idOrName)
		if err != nil {
			return Snapshot{}, err
		}
		switch s.State {
		case SnapshotActive:
			return s, nil
		case SnapshotError, SnapshotBuildFailed:
			e := &SnapshotFailedError{Name: s.Name, State: s.State}
			if s.ErrorReason != nil {
				e.Reason = *s.ErrorReason
			}
			return s, e
		case SnapshotRemoving, SnapshotInactive:
			return s, &SnapshotFailedError{Name: s.Name, State: s.State, Reason: "snapshot is " + s.State}
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("wait for snapshot %s (state %s): %w", idOrName, s.State, ctx.Err())
		case <-t.C:
		}
	}
}

func (c *SnapshotClient) do(ctx context.Context, method, path string, body, out any) error {
	u := *c.base
	u.Path += path
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if c.orgID != "" {
		req.Header.Set("X-Daytona-Organization-ID", c.orgID)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return newAPIError(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}
