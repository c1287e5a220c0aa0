package daytonaemu

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/google/go-containerregistry/pkg/name"
)

// Snapshot states.
const (
	snapshotPending = "pending"
	snapshotPulling = "pulling"
	snapshotActive  = "active"
	snapshotError   = "error"
)

// snapshot is the control plane's SnapshotDto. Its fields are guarded by
// Server.mu.
type snapshot struct {
	ID          string    `json:"id"`
	OrgID       string    `json:"organizationId"`
	General     bool      `json:"general"`
	Name        string    `json:"name"`
	ImageName   string    `json:"imageName"`
	State       string    `json:"state"`
	Size        *float64  `json:"size"`
	Entrypoint  []string  `json:"entrypoint"`
	CPU         int       `json:"cpu"`
	GPU         int       `json:"gpu"`
	Mem         int       `json:"mem"`
	Disk        int       `json:"disk"`
	ErrorReason *string   `json:"errorReason"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	LastUsedAt  *string   `json:"lastUsedAt"`
	Ref         string    `json:"ref,omitempty"`

	image string // the engine's reference of the pulled image
}

// findSnapshot returns the snapshot by id or name. Call with s.mu.
func (s *Server) findSnapshot(idOrName string) *snapshot {
	if snap := s.snapshots[idOrName]; snap != nil {
		return snap
	}
	for _, snap := range s.snapshots {
		if snap.Name == idOrName {
			return snap
		}
	}
	return nil
}

// PushCredentials returns the username and secret push access hands out.
func (s *Server) PushCredentials() (user, secret string) { return s.pushUser, s.pushSecret }

func (s *Server) pushAccess(w http.ResponseWriter, r *http.Request) {
	if s.opts.Registry == "" {
		writeError(w, r, http.StatusNotFound, "No registry is configured for pushing snapshots")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"username": s.pushUser, "secret": s.pushSecret, "registryUrl": s.opts.Registry,
		"registryId": newUUID(), "project": s.opts.Project,
		"expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	})
}

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name       string          `json:"name"`
		ImageName  string          `json:"imageName"`
		Entrypoint []string        `json:"entrypoint"`
		CPU        *int            `json:"cpu"`
		Memory     *int            `json:"memory"`
		Disk       *int            `json:"disk"`
		BuildInfo  json.RawMessage `json:"buildInfo"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, r, http.StatusBadRequest, "Invalid JSON body: "+err.Error())
		return
	}
	switch {
	case req.Name == "":
		writeError(w, r, http.StatusBadRequest, "name must be a string")
		return
	case req.ImageName == "":
		writeError(w, r, http.StatusBadRequest, "Must specify either imageName or buildInfo")
		return
	}
	ref, err := name.ParseReference(req.ImageName)
	if err != nil {
		writeError(w, r, http.StatusBadRequest, "Invalid image name: "+err.Error())
		return
	}
	if tag, ok := ref.(name.Tag); ok && (tag.TagStr() == "latest" || !strings.Contains(req.ImageName, ":")) {
		writeError(w, r, http.StatusBadRequest, `Images with tag ":latest" are not allowed`)
		return
	}
	now := time.Now().UTC()
	snap := &snapshot{ID: newUUID(), OrgID: orgID, Name: req.Name, ImageName: req.ImageName, State: snapshotPending,
		Entrypoint: req.Entrypoint, CPU: orDefault(req.CPU, 1), Mem: orDefault(req.Memory, 1), Disk: orDefault(req.Disk, 3),
		CreatedAt: now, UpdatedAt: now, image: req.ImageName}
	s.mu.Lock()
	if s.findSnapshot(req.Name) != nil {
		s.mu.Unlock()
		writeError(w, r, http.StatusConflict, fmt.Sprintf("Snapshot with name %s already exists", req.Name))
		return
	}
	s.snapshots[snap.ID] = snap
	out := *snap
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.pull(snap, ref)
	}()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request, idOrName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if snap := s.findSnapshot(idOrName); snap != nil {
		writeJSON(w, http.StatusOK, snap)
		return
	}
	writeError(w, r, http.StatusNotFound, fmt.Sprintf("Snapshot with ID or name %s not found", idOrName))
}

// deleteSnapshot is DELETE /snapshots/{id}: the snapshot is gone; the
// sandboxes made from it keep their containers (and a committed image
// stays until Close).
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.snapshots[id]
	if snap == nil {
		writeError(w, r, http.StatusNotFound, fmt.Sprintf("Snapshot with ID %s not found", id))
		return
	}
	delete(s.snapshots, id)
	s.opts.Log.Info("daytona snapshot deleted", "name", snap.Name)
	w.WriteHeader(http.StatusOK)
}

func (s *Server) setSnapshot(snap *snapshot, state string, size *float64, reason *string) {
	s.mu.Lock()
	snap.State, snap.UpdatedAt, snap.ErrorReason = state, time.Now().UTC(), reason
	if size != nil {
		snap.Size = size
	}
	s.mu.Unlock()
	s.opts.Log.Info("daytona snapshot", "name", snap.Name, "state", state)
}

// pull pulls the snapshot's image into the engine, as a runner does: with
// the push credentials from Daytona's own registry, anonymously from any
// other.
func (s *Server) pull(snap *snapshot, ref name.Reference) {
	s.setSnapshot(snap, snapshotPulling, nil, nil)
	ctx, cancel := context.WithTimeout(s.ctx, 20*time.Minute)
	defer cancel()
	size, err := s.pullImage(ctx, ref)
	if err != nil {
		reason := fmt.Sprintf("Failed to pull image %s: %v", snap.ImageName, err)
		s.setSnapshot(snap, snapshotError, nil, &reason)
		return
	}
	gb := float64(size) / (1 << 30)
	s.setSnapshot(snap, snapshotActive, &gb, nil)
}

func (s *Server) pullImage(ctx context.Context, ref name.Reference) (int64, error) {
	opts := image.PullOptions{}
	if ref.Context().RegistryStr() == s.opts.Registry {
		auth, _ := json.Marshal(registry.AuthConfig{Username: s.pushUser, Password: s.pushSecret})
		opts.RegistryAuth = base64.URLEncoding.EncodeToString(auth)
	}
	rc, err := s.engine.ImagePull(ctx, ref.String(), opts)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if err := jsonmessage.DisplayJSONMessagesStream(rc, discard{}, 0, false, nil); err != nil {
		return 0, err
	}
	img, err := s.engine.ImageInspect(ctx, ref.String())
	if err != nil {
		return 0, err
	}
	return img.Size, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
