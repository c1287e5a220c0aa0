package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

// Sandbox states (SandboxState in the control plane's OpenAPI document).
const (
	StateCreating         = "creating"
	StateRestoring        = "restoring"
	StateDestroyed        = "destroyed"
	StateDestroying       = "destroying"
	StateStarted          = "started"
	StateStopped          = "stopped"
	StateStarting         = "starting"
	StateStopping         = "stopping"
	StateError            = "error"
	StateBuildFailed      = "build_failed"
	StatePendingBuild     = "pending_build"
	StateBuildingSnapshot = "building_snapshot"
	StateUnknown          = "unknown"
	StatePullingSnapshot  = "pulling_snapshot"
	StateArchived         = "archived"
	StateArchiving        = "archiving"
	StateSnapshotting     = "snapshotting"
)

// sandbox is the control plane's Sandbox (and SandboxListItem): the
// fields this package reads. Unknown fields are ignored.
type sandbox struct {
	ID                  string            `json:"id"`
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	State               string            `json:"state"`
	DesiredState        string            `json:"desiredState"`
	ErrorReason         string            `json:"errorReason"`
	CPU                 float64           `json:"cpu"`
	Memory              float64           `json:"memory"`
	Disk                float64           `json:"disk"`
	AutoStopInterval    float64           `json:"autoStopInterval"`
	AutoArchiveInterval float64           `json:"autoArchiveInterval"`
	AutoDeleteInterval  float64           `json:"autoDeleteInterval"`
	CreatedAt           string            `json:"createdAt"`
	UpdatedAt           string            `json:"updatedAt"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
}

// deleted reports a sandbox on its way out: its desired state is
// destroyed, or it is destroyed already.
func (s sandbox) deleted() bool {
	return s.DesiredState == StateDestroyed || s.State == StateDestroyed
}

// createSandbox is the body of POST /sandbox (CreateSandbox).
type createSandbox struct {
	Name                string            `json:"name,omitempty"`
	Snapshot            string            `json:"snapshot,omitempty"`
	Env                 map[string]string `json:"env,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
	Public              bool              `json:"public"`
	CPU                 int               `json:"cpu,omitempty"`
	Memory              int               `json:"memory,omitempty"`
	Disk                int               `json:"disk,omitempty"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	NetworkBlockAll     *bool             `json:"networkBlockAll,omitempty"`
	NetworkAllowList    *string           `json:"networkAllowList,omitempty"`
}

// listSandboxes is GET /sandbox's answer since v0.190 (the older answer is
// a plain array of sandboxes).
type listSandboxes struct {
	Items      []sandbox `json:"items"`
	NextCursor *string   `json:"nextCursor"`
}

// previewURL is PortPreviewUrl.
type previewURL struct {
	SandboxID string `json:"sandboxId"`
	URL       string `json:"url"`
	Token     string `json:"token"`
}

// listPageLimit is the largest page GET /sandbox serves.
const listPageLimit = 200

func (v *Vendor) getSandbox(ctx context.Context, id string) (sandbox, error) {
	var s sandbox
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodGet, Path: "/sandbox/" + url.PathEscape(id), Out: &s})
	return s, err
}

func (v *Vendor) postSandbox(ctx context.Context, req createSandbox) (sandbox, error) {
	var s sandbox
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodPost, Path: "/sandbox", Body: req, Out: &s})
	return s, err
}

func (v *Vendor) deleteSandbox(ctx context.Context, id string) error {
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodDelete, Path: "/sandbox/" + url.PathEscape(id)})
	return err
}

func (v *Vendor) getPreviewURL(ctx context.Context, id string, port int) (previewURL, error) {
	var p previewURL
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodGet,
		Path: "/sandbox/" + url.PathEscape(id) + "/ports/" + strconv.Itoa(port) + "/preview-url", Out: &p})
	return p, err
}

func (v *Vendor) getToolboxProxyURL(ctx context.Context, id string) (string, error) {
	var out struct {
		URL string `json:"url"`
	}
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodGet,
		Path: "/sandbox/" + url.PathEscape(id) + "/toolbox-proxy-url", Out: &out})
	return out.URL, err
}

// listSandboxes returns every sandbox whose labels include all of labels,
// following nextCursor. It reads both answers GET /sandbox has had: the
// plain array of older control planes and v0.190's {items, nextCursor}.
func (v *Vendor) listSandboxes(ctx context.Context, labels map[string]string) ([]sandbox, error) {
	filter, err := json.Marshal(labels)
	if err != nil {
		return nil, err
	}
	var all []sandbox
	cursor := ""
	for page := 0; ; page++ {
		q := url.Values{"labels": {string(filter)}, "limit": {strconv.Itoa(listPageLimit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var raw json.RawMessage
		if _, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodGet, Path: "/sandbox", Query: q, Out: &raw}); err != nil {
			return nil, err
		}
		if b := bytes.TrimSpace(raw); len(b) > 0 && b[0] == '[' {
			var items []sandbox
			if err := json.Unmarshal(b, &items); err != nil {
				return nil, fmt.Errorf("GET /sandbox: decode list: %w", err)
			}
			return append(all, items...), nil
		}
		var l listSandboxes
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, fmt.Errorf("GET /sandbox: decode list: %w", err)
		}
		all = append(all, l.Items...)
		if l.NextCursor == nil || *l.NextCursor == "" || *l.NextCursor == cursor || len(l.Items) == 0 {
			return all, nil
		}
		if page > 10000 {
			return nil, fmt.Errorf("GET /sandbox: more than %d pages", page)
		}
		cursor = *l.NextCursor
	}
}
