package daytonaemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/emukit"
)

// Sandbox states and desired states, as the control plane names them.
const (
	stateCreating   = "creating"
	stateStarted    = "started"
	stateStopped    = "stopped"
	stateDestroying = "destroying"
	stateDestroyed  = "destroyed"
	stateError      = "error"
)

// sandbox is one sandbox. Its fields are guarded by Server.mu, but for
// the sessions (guarded by sessMu) and box (set once it started).
type sandbox struct {
	ID, Name, Snapshot, User string
	Env, Labels              map[string]string
	Public                   bool
	State, DesiredState      string
	ErrorReason              string
	CPU, Memory, Disk        int
	AutoStop, AutoArchive    int
	AutoDelete               int
	CreatedAt, UpdatedAt     time.Time
	LastActivity, StoppedAt  time.Time
	authToken                string
	pending                  bool
	image                    string
	dockerfile               string // of a declarative build; empty for a snapshot's
	userFromImage            bool   // User is the image's, named once the container runs
	seq                      int    // creation order
	blockAll                 bool
	allowList                *string
	egress                   *egress.Policy // nil: open

	// ctx ends when the sandbox stops: its proxied requests and streams
	// end with it.
	ctx    context.Context
	cancel context.CancelFunc

	box vendors.Box // the container; nil until started
	ip  string      // the container's address on the network

	homeDir, workDir string // the user's home and the image's work directory

	frozen chan struct{} // closed once the container of the last stop is frozen

	sessMu   sync.Mutex
	sessions map[string]*session
}

// Target is the one region (target) of the emulator's sandboxes.
const Target = "local"

// dto is the control plane's Sandbox.
func (s *Server) dto(sb *sandbox) map[string]any {
	d := map[string]any{
		"id": sb.ID, "organizationId": orgID, "name": sb.Name, "snapshot": sb.Snapshot, "user": sb.User,
		"env": orEmpty(sb.Env), "labels": orEmpty(sb.Labels), "public": sb.Public, "networkBlockAll": sb.blockAll,
		"target": Target, "cpu": sb.CPU, "gpu": 0, "memory": sb.Memory, "disk": sb.Disk,
		"state": sb.State, "desiredState": sb.DesiredState, "backupState": "None",
		"autoStopInterval": sb.AutoStop, "autoArchiveInterval": sb.AutoArchive, "autoDeleteInterval": sb.AutoDelete,
		"volumes": []any{}, "createdAt": stamp(sb.CreatedAt), "updatedAt": stamp(sb.UpdatedAt),
		"lastActivityAt": stamp(sb.LastActivity), "sandboxClass": "container", "runnerId": "local-runner",
		"daemonVersion": "v0.190.0", "toolboxProxyUrl": s.url + "/toolbox", "recoverable": false,
	}
	if sb.ErrorReason != "" {
		d["errorReason"] = sb.ErrorReason
	}
	if sb.allowList != nil {
		d["networkAllowList"] = *sb.allowList
	}
	return d
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// api serves the control plane.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, "/api")
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case r.Method == http.MethodGet && p == "/docker-registry/registry-push-access":
		s.pushAccess(w, r)
	case r.Method == http.MethodPost && p == "/snapshots":
		s.createSnapshot(w, r)
	case r.Method == http.MethodGet && p == "/snapshots":
		s.listSnapshots(w, r)
	case len(parts) >= 1 && (parts[0] == "volumes" || parts[0] == "object-storage"):
		apiNotEmulated(w, r, parts[0])
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "snapshots":
		s.getSnapshot(w, r, parts[1])
	case r.Method == http.MethodDelete && len(parts) == 2 && parts[0] == "snapshots":
		s.deleteSnapshot(w, r, parts[1])
	case r.Method == http.MethodPost && p == "/sandbox":
		s.createSandbox(w, r)
	case r.Method == http.MethodGet && p == "/sandbox":
		s.listSandboxes(w, r)
	case len(parts) >= 2 && parts[0] == "sandbox":
		s.sandboxRoute(w, r, parts[1], parts[2:])
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "_emulator" && parts[1] == "vanish":
		// Not Daytona's: a fault switch for users of `boxctl emulate`.
		if err := s.Vanish(parts[2]); err != nil {
			writeError(w, r, http.StatusNotFound, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, r, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
	}
}

func (s *Server) sandboxRoute(w http.ResponseWriter, r *http.Request, idOrName string, rest []string) {
	route := r.Method + " " + strings.Join(rest, "/")
	switch {
	case route == "GET ":
		s.withSandbox(w, r, idOrName, func(sb *sandbox) { writeJSON(w, http.StatusOK, s.dto(sb)) })
	case route == "DELETE ":
		s.deleteSandbox(w, r, idOrName)
	case r.Method == http.MethodGet && len(rest) == 3 && rest[0] == "ports" && (rest[2] == "preview-url" || rest[2] == "signed-preview-url"):
		s.previewURL(w, r, idOrName, rest[1], rest[2] == "signed-preview-url")
	case route == "GET toolbox-proxy-url":
		s.mu.Lock()
		defer s.mu.Unlock()
		if sb := s.sandboxes[idOrName]; sb == nil || sb.State == stateDestroyed {
			writeError(w, r, http.StatusNotFound, "Sandbox with ID "+idOrName+" not found")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"url": s.url + "/toolbox"})
	case r.Method == http.MethodPost && len(rest) == 2 && (rest[0] == "autostop" || rest[0] == "autodelete" || rest[0] == "autoarchive"):
		s.setInterval(w, r, idOrName, rest[0], rest[1])
	case route == "PUT labels":
		s.putLabels(w, r, idOrName)
	case route == "POST stop":
		s.stopRoute(w, r, idOrName)
	case route == "POST start":
		s.startRoute(w, r, idOrName)
	case route == "POST archive":
		s.archiveRoute(w, r, idOrName)
	case route == "POST last-activity":
		s.lastActivity(w, r, idOrName)
	case route == "POST snapshot":
		s.snapshotSandbox(w, r, idOrName)
	case route == "POST fork":
		s.withSandbox(w, r, idOrName, func(*sandbox) {
			writeError(w, r, http.StatusUnprocessableEntity, "Forking is not supported for this sandbox")
		})
	case r.Method == http.MethodPost && len(rest) == 1 && (rest[0] == "pause" || rest[0] == "resize" || rest[0] == "recover"):
		apiNotEmulated(w, r, "sandbox "+rest[0])
	default:
		writeError(w, r, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
	}
}

// withSandbox calls f with the live sandbox idOrName under s.mu, or
// answers 404.
func (s *Server) withSandbox(w http.ResponseWriter, r *http.Request, idOrName string, f func(sb *sandbox)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.find(idOrName)
	if sb == nil {
		writeError(w, r, http.StatusNotFound, "Sandbox with ID or name "+idOrName+" not found")
		return
	}
	f(sb)
}

// find returns the live sandbox by id, then by name (findOneByIdOrName):
// never a destroyed one, nor a failed one being deleted. Call with s.mu.
func (s *Server) find(idOrName string) *sandbox {
	visible := func(sb *sandbox) bool {
		return sb.State != stateDestroyed && !(sb.State == stateError && sb.DesiredState == stateDestroyed)
	}
	if sb := s.sandboxes[idOrName]; sb != nil && visible(sb) {
		return sb
	}
	for _, sb := range s.sandboxes {
		if sb.Name == idOrName && visible(sb) {
			return sb
		}
	}
	return nil
}

// createRequest is CreateSandbox.
type createRequest struct {
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	CPU                 *int              `json:"cpu"`
	Memory              *int              `json:"memory"`
	Disk                *int              `json:"disk"`
	AutoStopInterval    *int              `json:"autoStopInterval"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval"`
	BuildInfo           json.RawMessage   `json:"buildInfo"`
	NetworkBlockAll     *bool             `json:"networkBlockAll"`
	NetworkAllowList    *string           `json:"networkAllowList"`
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, r, http.StatusBadRequest, "Invalid JSON body: "+err.Error())
		return
	}
	var invalid []string
	nonNegative := func(name string, v *int) {
		if v != nil && *v < 0 {
			invalid = append(invalid, name+" must not be less than 0")
		}
	}
	nonNegative("cpu", req.CPU)
	nonNegative("memory", req.Memory)
	nonNegative("disk", req.Disk)
	nonNegative("autoStopInterval", req.AutoStopInterval)
	nonNegative("autoArchiveInterval", req.AutoArchiveInterval)
	policy, err := networkPolicy(req.NetworkBlockAll, req.NetworkAllowList)
	if err != nil {
		invalid = append(invalid, err.Error())
	}
	if len(invalid) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"path": r.URL.RequestURI(),
			"timestamp": stamp(time.Now()), "statusCode": 400, "error": "Bad Request", "message": strings.Join(invalid, ", ")})
		return
	}
	var build struct {
		DockerfileContent string   `json:"dockerfileContent"`
		ContextHashes     []string `json:"contextHashes"`
	}
	if len(req.BuildInfo) > 0 && string(req.BuildInfo) != "null" {
		if err := json.Unmarshal(req.BuildInfo, &build); err != nil || build.DockerfileContent == "" {
			writeError(w, r, http.StatusBadRequest, "buildInfo.dockerfileContent is required")
			return
		}
		if len(build.ContextHashes) > 0 {
			apiNotEmulated(w, r, "build contexts from object storage")
			return
		}
	}
	imageUser := false
	if req.User == "" && build.DockerfileContent == "" {
		// The sandbox's user is its snapshot's: the image's user.
		s.mu.Lock()
		img := ""
		if snap := s.findSnapshot(req.Snapshot); snap != nil {
			img = snap.image
		}
		s.mu.Unlock()
		req.User = s.imageUser(r.Context(), img)
		imageUser = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.findSnapshot(req.Snapshot)
	switch {
	case build.DockerfileContent != "":
		if req.Snapshot != "" {
			writeError(w, r, http.StatusBadRequest, "Cannot specify both snapshot and buildInfo")
			return
		}
		snap = &snapshot{Name: buildTag(build.DockerfileContent), CPU: 1, Mem: 1, Disk: 3}
	case req.Snapshot == "":
		writeError(w, r, http.StatusBadRequest, "Snapshot is required: the emulator has no default snapshot")
		return
	case snap == nil:
		writeError(w, r, http.StatusBadRequest, fmt.Sprintf("Snapshot %s not found. Did you add it through the Daytona Dashboard?", req.Snapshot))
		return
	case snap.State != snapshotActive:
		writeError(w, r, http.StatusBadRequest, fmt.Sprintf("Snapshot %s is %s", req.Snapshot, snap.State))
		return
	}
	if req.Name != "" && s.find(req.Name) != nil {
		writeError(w, r, http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", req.Name))
		return
	}
	now := time.Now().UTC()
	s.created++
	sb := &sandbox{ID: newUUID(), Name: req.Name, Snapshot: snap.Name, User: req.User,
		Env: maps.Clone(req.Env), Labels: maps.Clone(req.Labels), Public: req.Public,
		State: stateCreating, DesiredState: stateStarted, CPU: orDefault(req.CPU, snap.CPU), Memory: orDefault(req.Memory, snap.Mem),
		Disk: orDefault(req.Disk, snap.Disk), AutoStop: orDefault(req.AutoStopInterval, 15),
		AutoArchive: orDefault(req.AutoArchiveInterval, 10080), AutoDelete: orDefault(req.AutoDeleteInterval, -1),
		CreatedAt: now, UpdatedAt: now, LastActivity: now, authToken: strings.ToLower(newID(16)), pending: true,
		image: snap.image, seq: s.created, sessions: map[string]*session{}, dockerfile: build.DockerfileContent,
		blockAll: req.NetworkBlockAll != nil && *req.NetworkBlockAll, allowList: req.NetworkAllowList, egress: policy,
		userFromImage: imageUser || req.User == ""}
	if sb.dockerfile != "" {
		sb.State = statePendingBuild
	}
	if sb.Name == "" {
		sb.Name = sb.ID
	}
	sb.ctx, sb.cancel = context.WithCancel(s.ctx)
	s.sandboxes[sb.ID] = sb
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.start(sb)
	}()
	s.publish("sandbox.created", s.dto(sb))
	writeJSON(w, http.StatusOK, s.dto(sb))
}

func orDefault(v *int, d int) int {
	if v == nil {
		return d
	}
	return *v
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request, idOrName string) {
	s.mu.Lock()
	sb := s.find(idOrName)
	switch {
	case sb == nil:
		s.mu.Unlock()
		writeError(w, r, http.StatusNotFound, "Sandbox with ID or name "+idOrName+" not found")
		return
	case sb.pending:
		s.mu.Unlock()
		writeError(w, r, http.StatusConflict, "Sandbox state change in progress")
		return
	}
	s.markDeleted(sb)
	out := s.dto(sb)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.destroy(sb)
	}()
	writeJSON(w, http.StatusOK, out)
}

// markDeleted soft-deletes sb, freeing its name. Call with s.mu.
func (s *Server) markDeleted(sb *sandbox) {
	sb.DesiredState, sb.pending, sb.UpdatedAt = stateDestroyed, true, time.Now().UTC()
	if sb.State != stateError {
		sb.State = stateDestroying
	}
	sb.Name = sb.Name + "-deleted-" + strconv.FormatInt(time.Now().UnixMilli(), 10)
}

// listSandboxes is GET /sandbox: labels (a JSON object) ANDed, newest
// first, paged by cursor.
func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var labels map[string]string
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &labels); err != nil {
			writeError(w, r, http.StatusBadRequest, "Invalid labels JSON format")
			return
		}
	}
	limit, after, err := emukit.ReadPage(q, "limit", "cursor", 100, 200)
	if pe := (*emukit.PageError)(nil); errors.As(err, &pe) && pe.Param == "limit" {
		writeError(w, r, http.StatusBadRequest, "limit must not be greater than 200, limit must not be less than 1")
		return
	} else if err != nil {
		writeError(w, r, http.StatusBadRequest, "Invalid cursor")
		return
	}
	withErrored := q.Get("includeErroredDeleted") == "true"
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []*sandbox
	for _, sb := range s.sandboxes {
		if sb.State == stateDestroyed || (!withErrored && sb.State == stateError && sb.DesiredState == stateDestroyed) {
			continue
		}
		if !vendors.HasLabels(sb.Labels, labels) || (after > 0 && sb.seq >= after) {
			continue
		}
		match = append(match, sb)
	}
	slices.SortFunc(match, func(a, b *sandbox) int { return b.seq - a.seq })
	var next *string
	if len(match) > limit {
		match = match[:limit]
		c := emukit.PageToken(match[limit-1].seq)
		next = &c
	}
	items := make([]map[string]any, 0, len(match))
	for _, sb := range match {
		items = append(items, s.listItem(sb))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": next})
}

// listItem is SandboxListItem: the Sandbox without env, volumes or build
// info.
func (s *Server) listItem(sb *sandbox) map[string]any {
	d := s.dto(sb)
	for _, k := range []string{"env", "volumes", "networkBlockAll", "buildInfo"} {
		delete(d, k)
	}
	return d
}

// previewURL is GET /sandbox/{id}/ports/{port}/preview-url (the token
// goes in a header) and, signed, .../signed-preview-url (a URL that
// carries its token, for clients that cannot send the header).
func (s *Server) previewURL(w http.ResponseWriter, r *http.Request, idOrName, port string, signed bool) {
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		writeError(w, r, http.StatusBadRequest, "Invalid port")
		return
	}
	s.withSandbox(w, r, idOrName, func(sb *sandbox) {
		u, err := s.previewOrigin(sb, p)
		if err != nil {
			writeError(w, r, http.StatusInternalServerError, err.Error())
			return
		}
		if signed {
			writeJSON(w, http.StatusOK, map[string]any{"sandboxId": sb.ID, "port": p, "token": sb.authToken,
				"url": u + "/?DAYTONA_SANDBOX_AUTH_KEY=" + sb.authToken})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"sandboxId": sb.ID, "url": u, "token": sb.authToken})
	})
}

func (s *Server) setInterval(w http.ResponseWriter, r *http.Request, idOrName, which, value string) {
	n, err := strconv.Atoi(value)
	if err != nil || (which == "autostop" && n < 0) {
		writeError(w, r, http.StatusBadRequest, "Invalid interval")
		return
	}
	s.withSandbox(w, r, idOrName, func(sb *sandbox) {
		switch which {
		case "autostop":
			sb.AutoStop = n
		case "autoarchive":
			sb.AutoArchive = n
		default:
			sb.AutoDelete = n
		}
		w.WriteHeader(http.StatusOK)
	})
}

func (s *Server) putLabels(w http.ResponseWriter, r *http.Request, idOrName string) {
	var req struct {
		Labels map[string]string `json:"labels"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Labels == nil {
		writeError(w, r, http.StatusBadRequest, "labels must be an object")
		return
	}
	s.withSandbox(w, r, idOrName, func(sb *sandbox) {
		sb.Labels = maps.Clone(req.Labels)
		writeJSON(w, http.StatusOK, map[string]any{"labels": sb.Labels})
	})
}

// previewHostPattern is {port}-{sandboxId}.{domain}.
var previewHostPattern = regexp.MustCompile(`^([0-9]+)-([^.]+)\.(.+)$`)

// previewHost reports whether host is a preview host of this server's
// proxy domain, and its port and sandbox id.
func (s *Server) previewHost(host string) (port int, id string, ok bool) {
	m := previewHostPattern.FindStringSubmatch(strings.ToLower(host))
	if m == nil || m[3] != strings.ToLower(s.opts.ProxyDomain) {
		return 0, "", false
	}
	p, err := strconv.Atoi(m[1])
	if err != nil || p < 1 || p > 65535 {
		return 0, "", false
	}
	return p, m[2], true
}
