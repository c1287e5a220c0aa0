package e2b

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

// This file holds the control plane's wire types and calls
// (spec/openapi.yml), as the client uses them.

// newSandbox is NewSandboxV2 (POST /v2/sandboxes): every sandbox made so
// has envd secured, its access token in the answer.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             int               `json:"timeout"`
	AutoPause           bool              `json:"autoPause"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *networkConfig    `json:"network,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
}

// networkConfig is SandboxNetworkConfig.
type networkConfig struct {
	AllowPublicTraffic *bool `json:"allowPublicTraffic,omitempty"`
	egressRules
}

// sandbox is Sandbox: the answer of create and connect.
type sandbox struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken,omitempty"`
	Domain             *string `json:"domain,omitempty"`
}

// sandboxDetail is SandboxDetail (GET /sandboxes/{id}) and, without the
// tokens, ListedSandbox (GET /v2/sandboxes).
type sandboxDetail struct {
	TemplateID      string            `json:"templateID"`
	Alias           string            `json:"alias,omitempty"`
	SandboxID       string            `json:"sandboxID"`
	StartedAt       time.Time         `json:"startedAt"`
	EndAt           time.Time         `json:"endAt"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain,omitempty"`
	CPUCount        int               `json:"cpuCount"`
	MemoryMB        int               `json:"memoryMB"`
	DiskSizeMB      int               `json:"diskSizeMB"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	State           string            `json:"state"`
}

// Sandbox states.
const (
	stateRunning = "running"
	statePaused  = "paused"
)

// decodeError reads E2B's error body {code, message, error_code?}.
func decodeError(b []byte, e *vendorhttp.APIError) bool {
	var body struct {
		Code      int    `json:"code"`
		Message   string `json:"message"`
		ErrorCode string `json:"error_code"`
	}
	if json.Unmarshal(b, &body) != nil || (body.Code == 0 && body.Message == "") {
		return false
	}
	e.Code, e.Message = body.ErrorCode, body.Message
	return true
}

func sandboxPath(id string, rest ...string) string {
	return "/sandboxes/" + url.PathEscape(id) + strings.Join(rest, "")
}

func (v *Vendor) createSandbox(ctx context.Context, req newSandbox) (sandbox, error) {
	var sb sandbox
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodPost, Path: "/v2/sandboxes", Body: req,
		Want: http.StatusCreated, Out: &sb})
	return sb, err
}

func (v *Vendor) getSandbox(ctx context.Context, id string) (sandboxDetail, error) {
	var d sandboxDetail
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodGet, Path: sandboxPath(id), Want: http.StatusOK, Out: &d})
	return d, err
}

// connectSandbox returns a sandbox's tokens (POST /v2/sandboxes/{id}/connect,
// which also resumes a paused sandbox). Connect only ever extends a
// sandbox's TTL, to timeout from now: the whole seconds left keep it as
// it is.
func (v *Vendor) connectSandbox(ctx context.Context, id string, timeout time.Duration) (sandbox, error) {
	var sb sandbox
	body := map[string]int{"timeout": max(0, int(timeout/time.Second))}
	// Connecting twice is connecting once: retried on server errors too.
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodPost, Path: "/v2" + sandboxPath(id, "/connect"), Body: body,
		Out: &sb, Idempotent: true})
	return sb, err
}

func (v *Vendor) killSandbox(ctx context.Context, id string) error {
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodDelete, Path: sandboxPath(id), Want: http.StatusNoContent})
	return err
}

// listSandboxes returns every sandbox, running or paused, whose metadata
// holds every pair of filter, following X-Next-Token.
func (v *Vendor) listSandboxes(ctx context.Context, filter map[string]string) ([]sandboxDetail, error) {
	var out []sandboxDetail
	q := url.Values{"state": {stateRunning + "," + statePaused}, "limit": {"100"}}
	if len(filter) > 0 {
		q.Set("metadata", metadataQuery(filter))
	}
	for page := 0; ; page++ {
		var items []sandboxDetail
		h, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodGet, Path: "/v2/sandboxes", Query: q,
			Want: http.StatusOK, Out: &items})
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		next := h.Get("X-Next-Token")
		if next == "" || len(items) == 0 || page > 10000 {
			return out, nil
		}
		q.Set("nextToken", next)
	}
}

// metadataQuery renders a metadata filter as the metadata parameter
// wants it: "k=v&k2=v2" with each key and value URL-encoded (the whole is
// encoded once more as a query value).
func metadataQuery(m map[string]string) string {
	vals := url.Values{}
	for k, v := range m {
		vals.Set(k, v)
	}
	return vals.Encode()
}

func secondsOf(d time.Duration) int {
	s := d / time.Second
	if d%time.Second != 0 {
		s++
	}
	return int(s)
}
