package daytonafake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// SnapshotOptions configures a SnapshotServer. The zero value of every field
// but APIKey and Registry works.
type SnapshotOptions struct {
	// APIKey is the only bearer the server accepts. Required.
	APIKey string
	// Registry is the OCI registry (host:port) that push access points at;
	// for tests, the test bed's local registry. Required.
	Registry string
	// Project is the registry project in push access. Default "daytona".
	Project string
	// Log receives one line per snapshot transition. Default discards.
	Log *slog.Logger
}

// SnapshotServer is a fake of Daytona's snapshot API:
// GET /docker-registry/registry-push-access, POST /snapshots and
// GET /snapshots/{id or name}. A created snapshot really pulls its image
// (manifest, config and every layer, digests verified) and turns active, or
// error with an errorReason. Paths are served without the /api prefix, as
// under the API URL. It is an http.Handler; Close stops pulls in flight.
type SnapshotServer struct {
	opts   SnapshotOptions
	mux    *http.ServeMux
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// user and secret are the push credentials handed out.
	user, secret string

	mu        sync.Mutex
	snapshots map[string]*snapshot // by id
}

type snapshot struct {
	ID          string    `json:"id"`
	OrgID       string    `json:"organizationId"`
	General     bool      `json:"general"`
	Name        string    `json:"name"`
	ImageName   string    `json:"imageName"`
	State       string    `json:"state"`
	Size        *float64  `json:"size"`
	Entrypoint  []string  `json:"entrypoint"`
	CPU         float64   `json:"cpu"`
	GPU         float64   `json:"gpu"`
	Mem         float64   `json:"mem"`
	Disk        float64   `json:"disk"`
	ErrorReason *string   `json:"errorReason"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	LastUsedAt  *string   `json:"lastUsedAt"`
	Ref         string    `json:"ref,omitempty"`
}

// NewSnapshotServer returns a fake snapshot API.
func NewSnapshotServer(opts SnapshotOptions) *SnapshotServer {
	if opts.Project == "" {
		opts.Project = "daytona"
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &SnapshotServer{opts: opts, mux: http.NewServeMux(), ctx: ctx, cancel: cancel,
		user: "robot$push-" + newID(4), secret: newID(16), snapshots: map[string]*snapshot{}}
	s.mux.HandleFunc("GET /docker-registry/registry-push-access", s.pushAccess)
	s.mux.HandleFunc("POST /snapshots", s.create)
	s.mux.HandleFunc("GET /snapshots/{id}", s.get)
	return s
}

// ServeHTTP serves the API after checking the bearer.
func (s *SnapshotServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey || s.opts.APIKey == "" {
		writeError(w, r, http.StatusUnauthorized, "Unauthorized")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close stops pulls in flight and waits for them.
func (s *SnapshotServer) Close() {
	s.cancel()
	s.wg.Wait()
}

// PushCredentials returns the username and secret push access hands out.
func (s *SnapshotServer) PushCredentials() (user, secret string) { return s.user, s.secret }

func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeJSON(w, status, map[string]any{
		"path": "/api" + r.URL.Path, "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"statusCode": status, "error": http.StatusText(status), "message": msg,
	})
}

func (s *SnapshotServer) pushAccess(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"username": s.user, "secret": s.secret, "registryUrl": s.opts.Registry,
		"registryId": "00000000-0000-4000-8000-" + newID(6), "project": s.opts.Project,
		"expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	})
}

func (s *SnapshotServer) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name       string   `json:"name"`
		ImageName  string   `json:"imageName"`
		Entrypoint []string `json:"entrypoint"`
		CPU        int      `json:"cpu"`
		Memory     int      `json:"memory"`
		Disk       int      `json:"disk"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, r, http.StatusBadRequest, "Invalid JSON: "+err.Error())
		return
	}
	if req.Name == "" {
		writeError(w, r, http.StatusBadRequest, "name must be a string")
		return
	}
	if req.ImageName == "" {
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
	snap := &snapshot{ID: newUUID(), OrgID: "org-fake", Name: req.Name, ImageName: req.ImageName,
		State: "pending", Entrypoint: req.Entrypoint, CPU: orDefault(req.CPU, 1),
		Mem: orDefault(req.Memory, 1), Disk: orDefault(req.Disk, 3), CreatedAt: now, UpdatedAt: now}
	s.mu.Lock()
	for _, o := range s.snapshots {
		if o.Name == req.Name {
			s.mu.Unlock()
			writeError(w, r, http.StatusConflict, fmt.Sprintf("Snapshot with name %s already exists", req.Name))
			return
		}
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

func orDefault(v, d int) float64 {
	if v == 0 {
		return float64(d)
	}
	return float64(v)
}

func newUUID() string {
	h := newID(16)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (s *SnapshotServer) set(snap *snapshot, state string, size *float64, reason *string) {
	s.mu.Lock()
	snap.State, snap.UpdatedAt = state, time.Now().UTC()
	if size != nil {
		snap.Size = size
	}
	snap.ErrorReason = reason
	s.mu.Unlock()
	s.opts.Log.Info("snapshot", "name", snap.Name, "state", state)
}

// pull fetches the image like a runner would: with the push credentials
// for Daytona's own registry, anonymously elsewhere.
func (s *SnapshotServer) pull(snap *snapshot, ref name.Reference) {
	s.set(snap, "pulling", nil, nil)
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
	defer cancel()
	var auth authn.Authenticator = authn.Anonymous
	if ref.Context().RegistryStr() == s.opts.Registry {
		auth = &authn.Basic{Username: s.user, Password: s.secret}
	}
	size, err := pullImage(ctx, ref, auth)
	if err != nil {
		reason := fmt.Sprintf("Failed to pull image %s: %v", snap.ImageName, err)
		s.set(snap, "error", nil, &reason)
		return
	}
	gb := float64(size) / (1 << 30)
	s.set(snap, "active", &gb, nil)
}

// pullImage fetches manifest, config and every layer (digests verified)
// and returns the compressed size.
func pullImage(ctx context.Context, ref name.Reference, auth authn.Authenticator) (int64, error) {
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithAuth(auth))
	if err != nil {
		return 0, err
	}
	if _, err := img.ConfigFile(); err != nil {
		return 0, fmt.Errorf("config: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return 0, err
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func (s *SnapshotServer) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, snap := range s.snapshots {
		if snap.ID == id || snap.Name == id {
			writeJSON(w, http.StatusOK, snap)
			return
		}
	}
	writeError(w, r, http.StatusNotFound, fmt.Sprintf("Snapshot with ID or name %s not found", id))
}
