package daytona

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

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
func (v *Vendor) RegistryPushAccess(ctx context.Context) (PushAccess, error) {
	var pa PushAccess
	if err := v.do(ctx, http.MethodGet, "/docker-registry/registry-push-access", nil, &pa); err != nil {
		return PushAccess{}, fmt.Errorf("registry push access: %w", err)
	}
	if pa.RegistryURL == "" || pa.Username == "" {
		return PushAccess{}, errors.New("registry push access: response lacks registryUrl or username")
	}
	return pa, nil
}

// CreateSnapshot registers a snapshot; it is usually still pending.
func (v *Vendor) CreateSnapshot(ctx context.Context, req CreateSnapshot) (Snapshot, error) {
	if req.Name == "" {
		return Snapshot{}, errors.New("create snapshot: name is empty")
	}
	var s Snapshot
	if err := v.do(ctx, http.MethodPost, "/snapshots", req, &s); err != nil {
		return Snapshot{}, fmt.Errorf("create snapshot %s: %w", req.Name, err)
	}
	return s, nil
}

// Snapshot returns a snapshot by id or name.
func (v *Vendor) Snapshot(ctx context.Context, idOrName string) (Snapshot, error) {
	var s Snapshot
	if err := v.do(ctx, http.MethodGet, "/snapshots/"+url.PathEscape(idOrName), nil, &s); err != nil {
		return Snapshot{}, fmt.Errorf("get snapshot %s: %w", idOrName, err)
	}
	return s, nil
}

// WaitSnapshot polls until the snapshot is active. The error and
// build_failed states return a *SnapshotFailedError; ctx bounds the wait.
func (v *Vendor) WaitSnapshot(ctx context.Context, idOrName string) (Snapshot, error) {
	return v.waitSnapshot(ctx, idOrName, nil)
}

// waitSnapshot is WaitSnapshot that reports each new state to progress
// (when not nil).
func (v *Vendor) waitSnapshot(ctx context.Context, idOrName string, progress func(string)) (Snapshot, error) {
	t := time.NewTicker(v.opts.poll)
	defer t.Stop()
	last := ""
	for {
		s, err := v.Snapshot(ctx, idOrName)
		switch {
		case err != nil && ctx.Err() == nil && temporary(err):
			// Throttled or failed: ask again at the next tick.
			s.State = SnapshotPending
		case err != nil:
			return Snapshot{}, err
		}
		if progress != nil && s.State != last && s.Name != "" {
			progress(fmt.Sprintf("snapshot %s is %s", s.Name, s.State))
		}
		last = s.State
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

func (v *Vendor) do(ctx context.Context, method, path string, body, out any) error {
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: method, Path: path, Body: body, Out: out})
	return err
}
