package e2b

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
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// DefaultAPIURL is E2B's control plane for the default domain e2b.app.
const DefaultAPIURL = "https://api.e2b.app"

// TemplateClient drives E2B's template build API (build system v2): it
// creates a template, starts a build from a registry image and follows the
// build until it is ready. It is safe for concurrent use.
type TemplateClient struct {
	base   *url.URL
	apiKey string
	http   *retryablehttp.Client
	poll   time.Duration
	log    *slog.Logger
}

// TemplateOption configures a TemplateClient.
type TemplateOption func(*templateOptions)

type templateOptions struct {
	baseURL    string
	httpClient *http.Client
	retryMax   int
	waitMin    time.Duration
	waitMax    time.Duration
	poll       time.Duration
	log        *slog.Logger
}

// WithTemplateBaseURL sets the control plane URL. Default DefaultAPIURL.
func WithTemplateBaseURL(u string) TemplateOption {
	return func(o *templateOptions) { o.baseURL = u }
}

// WithTemplateHTTPClient sets the HTTP client under the retries. Default a
// pooled client with no overall timeout (each call is bounded by its ctx).
func WithTemplateHTTPClient(c *http.Client) TemplateOption {
	return func(o *templateOptions) { o.httpClient = c }
}

// WithTemplateRetry bounds retries of throttled or failed calls: at most max
// retries, waiting between waitMin and waitMax (a Retry-After header is
// honoured up to waitMax). Default 4 retries, 500ms to 10s.
func WithTemplateRetry(max int, waitMin, waitMax time.Duration) TemplateOption {
	return func(o *templateOptions) { o.retryMax, o.waitMin, o.waitMax = max, waitMin, waitMax }
}

// WithTemplatePollInterval sets how often WaitBuild asks for the build
// status. Default 1s.
func WithTemplatePollInterval(d time.Duration) TemplateOption {
	return func(o *templateOptions) { o.poll = d }
}

// WithTemplateLogger sets the logger for retries. Default discards.
func WithTemplateLogger(l *slog.Logger) TemplateOption {
	return func(o *templateOptions) { o.log = l }
}

// NewTemplateClient returns a client that authenticates with apiKey
// (sent as X-API-Key, never logged).
func NewTemplateClient(apiKey string, opts ...TemplateOption) (*TemplateClient, error) {
	o := templateOptions{
		baseURL: DefaultAPIURL, retryMax: 4, waitMin: 500 * time.Millisecond,
		waitMax: 10 * time.Second, poll: time.Second,
		log: slog.New(slog.DiscardHandler),
	}
	for _, opt := range opts {
		opt(&o)
	}
	if apiKey == "" {
		return nil, errors.New("e2b: API key is empty (set E2B_API_KEY)")
	}
	base, err := url.Parse(strings.TrimRight(o.baseURL, "/"))
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("e2b: bad API URL %q", o.baseURL)
	}
	if o.retryMax < 0 || o.waitMin <= 0 || o.waitMax < o.waitMin {
		return nil, fmt.Errorf("e2b: bad retry bounds %d, %v..%v", o.retryMax, o.waitMin, o.waitMax)
	}
	if o.poll <= 0 {
		return nil, fmt.Errorf("e2b: poll interval %v must be positive", o.poll)
	}
	rc := retryablehttp.NewClient()
	if o.httpClient != nil {
		rc.HTTPClient = o.httpClient
	}
	rc.Logger = o.log
	rc.RetryMax, rc.RetryWaitMin, rc.RetryWaitMax = o.retryMax, o.waitMin, o.waitMax
	rc.CheckRetry = retryPolicy
	rc.Backoff = boundedBackoff
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return &TemplateClient{base: base, apiKey: apiKey, http: rc, poll: o.poll, log: o.log}, nil
}

// retryPolicy retries reads on throttling, server errors and network
// errors, and writes only when the server surely did not act: on 429, or
// when the connection was never made.
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	idempotent := true
	if resp != nil && resp.Request != nil {
		idempotent = resp.Request.Method == http.MethodGet
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
	if !idempotent {
		return false, nil
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, nil)
}

// boundedBackoff honours Retry-After but never waits longer than max.
func boundedBackoff(min, max time.Duration, attempt int, resp *http.Response) time.Duration {
	return min2(retryablehttp.DefaultBackoff(min, max, attempt, resp), max)
}

func min2(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// TemplateRequest asks for a new template (POST /v3/templates).
type TemplateRequest struct {
	// Name of the template, optionally with a ":tag".
	Name string `json:"name,omitempty"`
	// CPUCount of sandboxes made from it; zero means the server default.
	CPUCount int `json:"cpuCount,omitempty"`
	// MemoryMB of sandboxes made from it; zero means the server default.
	MemoryMB int `json:"memoryMB,omitempty"`
}

// TemplateBuildRef names one build of one template.
type TemplateBuildRef struct {
	TemplateID string `json:"templateID"`
	BuildID    string `json:"buildID"`
}

// Registry holds the credentials E2B uses to pull fromImage. Type is
// "registry" (Username, Password), "aws" (ECR: AWSAccessKeyID,
// AWSSecretAccessKey, AWSRegion) or "gcp" (ServiceAccountJSON).
type Registry struct {
	Type               string `json:"type"`
	Username           string `json:"username,omitempty"`
	Password           string `json:"password,omitempty"`
	AWSAccessKeyID     string `json:"awsAccessKeyId,omitempty"`
	AWSSecretAccessKey string `json:"awsSecretAccessKey,omitempty"`
	AWSRegion          string `json:"awsRegion,omitempty"`
	ServiceAccountJSON string `json:"serviceAccountJson,omitempty"`
}

// String names the registry type only: credentials never print.
func (r Registry) String() string { return "registry(" + r.Type + ")" }

// BuildStart starts a template build from a registry image
// (POST /v2/templates/{templateID}/builds/{buildID}).
type BuildStart struct {
	// FromImage is the image reference E2B pulls.
	FromImage string `json:"fromImage"`
	// FromImageRegistry holds pull credentials; nil for a public image.
	FromImageRegistry *Registry `json:"fromImageRegistry,omitempty"`
	// StartCmd runs when a sandbox from the template starts; optional.
	StartCmd string `json:"startCmd,omitempty"`
	// ReadyCmd tells E2B when the started command is ready; optional.
	ReadyCmd string `json:"readyCmd,omitempty"`
}

// Template build statuses.
const (
	BuildBuilding = "building"
	BuildWaiting  = "waiting"
	BuildReady    = "ready"
	BuildError    = "error"
)

// LogEntry is one structured build log line.
type LogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Message   string    `json:"message"`
	Level     string    `json:"level"`
	Step      string    `json:"step,omitempty"`
}

// BuildReason says why a build is in its status (reported for errors).
type BuildReason struct {
	Message    string     `json:"message"`
	Step       string     `json:"step,omitempty"`
	LogEntries []LogEntry `json:"logEntries,omitempty"`
}

// BuildInfo is the status of a template build.
type BuildInfo struct {
	TemplateID string       `json:"templateID"`
	BuildID    string       `json:"buildID"`
	Status     string       `json:"status"`
	Logs       []string     `json:"logs"`
	LogEntries []LogEntry   `json:"logEntries"`
	Reason     *BuildReason `json:"reason,omitempty"`
}

// CreateTemplate registers a template and returns its first build.
func (c *TemplateClient) CreateTemplate(ctx context.Context, req TemplateRequest) (TemplateBuildRef, error) {
	var ref TemplateBuildRef
	if err := c.do(ctx, http.MethodPost, "/v3/templates", nil, req, http.StatusAccepted, &ref); err != nil {
		return TemplateBuildRef{}, fmt.Errorf("create template: %w", err)
	}
	if ref.TemplateID == "" || ref.BuildID == "" {
		return TemplateBuildRef{}, errors.New("create template: response lacks templateID or buildID")
	}
	return ref, nil
}

// StartBuild starts the build ref from an image.
func (c *TemplateClient) StartBuild(ctx context.Context, ref TemplateBuildRef, start BuildStart) error {
	if start.FromImage == "" {
		return errors.New("start template build: fromImage is empty")
	}
	p := "/v2/templates/" + url.PathEscape(ref.TemplateID) + "/builds/" + url.PathEscape(ref.BuildID)
	if err := c.do(ctx, http.MethodPost, p, nil, start, http.StatusAccepted, nil); err != nil {
		return fmt.Errorf("start template build: %w", err)
	}
	return nil
}

// BuildStatus returns the build's status with the log entries from index
// logsOffset on (at most 100 per call).
func (c *TemplateClient) BuildStatus(ctx context.Context, ref TemplateBuildRef, logsOffset int) (BuildInfo, error) {
	p := "/templates/" + url.PathEscape(ref.TemplateID) + "/builds/" + url.PathEscape(ref.BuildID) + "/status"
	q := url.Values{"logsOffset": {strconv.Itoa(logsOffset)}}
	var info BuildInfo
	if err := c.do(ctx, http.MethodGet, p, q, nil, http.StatusOK, &info); err != nil {
		return BuildInfo{}, fmt.Errorf("template build status: %w", err)
	}
	return info, nil
}

// WaitBuild polls the build until it is ready or failed, calling onLog once
// for each log entry in order (onLog may be nil). A failed build returns a
// *TemplateBuildError; a cancelled ctx stops the wait.
func (c *TemplateClient) WaitBuild(ctx context.Context, ref TemplateBuildRef, onLog func(LogEntry)) (BuildInfo, error) {
	offset := 0
	t := time.NewTicker(c.poll)
	defer t.Stop()
	for {
		info, err := c.BuildStatus(ctx, ref, offset)
		if err != nil {
			return BuildInfo{}, err
		}
		offset += emit(info.LogEntries, onLog)
		switch info.Status {
		case BuildReady, BuildError:
			// The status call returns at most 100 entries: drain the rest.
			for tail := info; len(tail.LogEntries) > 0; {
				if tail, err = c.BuildStatus(ctx, ref, offset); err != nil {
					return BuildInfo{}, err
				}
				offset += emit(tail.LogEntries, onLog)
			}
			if info.Status == BuildError {
				e := &TemplateBuildError{TemplateID: ref.TemplateID, BuildID: ref.BuildID}
				if info.Reason != nil {
					e.Message, e.Step = info.Reason.Message, info.Reason.Step
				}
				return info, e
			}
			return info, nil
		case BuildBuilding, BuildWaiting:
		default:
			return info, fmt.Errorf("template build %s: unknown status %q", ref.BuildID, info.Status)
		}
		select {
		case <-ctx.Done():
			return info, fmt.Errorf("wait for template build %s: %w", ref.BuildID, ctx.Err())
		case <-t.C:
		}
	}
}

func emit(entries []LogEntry, onLog func(LogEntry)) int {
	if onLog != nil {
		for _, e := range entries {
			onLog(e)
		}
	}
	return len(entries)
}

// BuildFromImage creates a template, starts its build from an image and waits
// for it: the whole E2B publishing step. The returned ref names the template
// even when the build failed.
func (c *TemplateClient) BuildFromImage(ctx context.Context, req TemplateRequest, start BuildStart, onLog func(LogEntry)) (TemplateBuildRef, error) {
	ref, err := c.CreateTemplate(ctx, req)
	if err != nil {
		return TemplateBuildRef{}, err
	}
	if err := c.StartBuild(ctx, ref, start); err != nil {
		return ref, err
	}
	_, err = c.WaitBuild(ctx, ref, onLog)
	return ref, err
}

func (c *TemplateClient) do(ctx context.Context, method, path string, q url.Values, body any, want int, out any) error {
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
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
	req.Header.Set("X-API-Key", c.apiKey)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return newTemplateAPIError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}
