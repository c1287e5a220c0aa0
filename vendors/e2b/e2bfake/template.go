package e2bfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// TemplateOptions configures a TemplateServer. The zero value of every
// field but APIKey works.
type TemplateOptions struct {
	// APIKey is the only X-API-Key the server accepts. Required.
	APIKey string
	// ECREndpoint is the ECR API endpoint used to turn "aws" registry
	// credentials into a registry login, as E2B does natively for ECR.
	// Empty: builds from "aws" registries fail.
	ECREndpoint string
	// Log receives one line per build transition. Default discards.
	Log *slog.Logger
}

// TemplateServer is a fake of E2B's template build API (build system v2):
// POST /v3/templates, POST /v2/templates/{templateID}/builds/{buildID} and
// GET /templates/{templateID}/builds/{buildID}/status. A started build
// really pulls its fromImage (manifest, config and every layer, digests
// verified) from the registry with the given credentials; it turns ready
// when the pull succeeds and error otherwise. It is an http.Handler; Close
// stops builds in flight.
type TemplateServer struct {
	opts   TemplateOptions
	mux    *http.ServeMux
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	builds map[string]*build // by buildID
}

type build struct {
	templateID, buildID, name string
	started                   bool
	status                    string
	fromImage                 string
	entries                   []logEntry
	reason                    *reason
}

type logEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Message   string    `json:"message"`
	Level     string    `json:"level"`
	Step      string    `json:"step,omitempty"`
}

type reason struct {
	Message    string     `json:"message"`
	Step       string     `json:"step,omitempty"`
	LogEntries []logEntry `json:"logEntries"`
}

// NewTemplateServer returns a fake template API.
func NewTemplateServer(opts TemplateOptions) *TemplateServer {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &TemplateServer{opts: opts, mux: http.NewServeMux(), ctx: ctx, cancel: cancel,
		builds: map[string]*build{}}
	s.mux.HandleFunc("POST /v3/templates", s.createTemplate)
	s.mux.HandleFunc("POST /v2/templates/{templateID}/builds/{buildID}", s.startBuild)
	s.mux.HandleFunc("GET /templates/{templateID}/builds/{buildID}/status", s.buildStatus)
	return s
}

// ServeHTTP serves the API after checking X-API-Key.
func (s *TemplateServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-API-Key") != s.opts.APIKey || s.opts.APIKey == "" {
		writeError(w, http.StatusUnauthorized, "Invalid API key, please visit https://e2b.dev/docs/api-key to get a new one.")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close stops builds in flight and waits for them.
func (s *TemplateServer) Close() {
	s.cancel()
	s.wg.Wait()
}

// Build reports a build's fromImage and status, for tests.
func (s *TemplateServer) Build(buildID string) (fromImage, status string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.builds[buildID]
	if !ok {
		return "", "", false
	}
	return b.fromImage, b.status, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *TemplateServer) createTemplate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name     string `json:"name"`
		Alias    string `json:"alias"`
		CPUCount *int   `json:"cpuCount"`
		MemoryMB *int   `json:"memoryMB"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Error when parsing request: "+err.Error())
		return
	}
	if req.CPUCount != nil && *req.CPUCount < 1 {
		writeError(w, http.StatusBadRequest, "cpuCount must be at least 1")
		return
	}
	if req.MemoryMB != nil && *req.MemoryMB < 128 {
		writeError(w, http.StatusBadRequest, "memoryMB must be at least 128")
		return
	}
	name := req.Name
	if name == "" {
		name = req.Alias
	}
	b := &build{templateID: newID(10), buildID: newUUID(), name: name, status: "waiting"}
	s.mu.Lock()
	s.builds[b.buildID] = b
	s.mu.Unlock()
	names := []string{}
	if name != "" {
		names = append(names, name)
	}
	writeJSON(w, http.StatusAccepted, map[string]any{
		"templateID": b.templateID, "buildID": b.buildID, "public": false,
		"names": names, "aliases": names, "tags": []string{},
	})
}

func newUUID() string {
	h := newID(16)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// registry is the wire form of fromImageRegistry.
type registry struct {
	Type               string `json:"type"`
	Username           string `json:"username"`
	Password           string `json:"password"`
	AWSAccessKeyID     string `json:"awsAccessKeyId"`
	AWSSecretAccessKey string `json:"awsSecretAccessKey"`
	AWSRegion          string `json:"awsRegion"`
	ServiceAccountJSON string `json:"serviceAccountJson"`
}

func (s *TemplateServer) startBuild(w http.ResponseWriter, r *http.Request) {
	tid, bid := r.PathValue("templateID"), r.PathValue("buildID")
	var req struct {
		FromImage         string    `json:"fromImage"`
		FromTemplate      string    `json:"fromTemplate"`
		FromImageRegistry *registry `json:"fromImageRegistry"`
		StartCmd          string    `json:"startCmd"`
		ReadyCmd          string    `json:"readyCmd"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Error when parsing request: "+err.Error())
		return
	}
	if req.FromImage == "" {
		writeError(w, http.StatusBadRequest, "fromImage or fromTemplate is required")
		return
	}
	if reg := req.FromImageRegistry; reg != nil {
		switch {
		case reg.Type == "registry" && reg.Username != "" && reg.Password != "":
		case reg.Type == "aws" && reg.AWSAccessKeyID != "" && reg.AWSSecretAccessKey != "" && reg.AWSRegion != "":
		case reg.Type == "gcp" && reg.ServiceAccountJSON != "":
		default:
			writeError(w, http.StatusBadRequest, "invalid fromImageRegistry of type "+strconv.Quote(reg.Type))
			return
		}
	}
	s.mu.Lock()
	b, ok := s.builds[bid]
	switch {
	case !ok || b.templateID != tid:
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, fmt.Sprintf("build '%s' of template '%s' not found", bid, tid))
		return
	case b.started:
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, fmt.Sprintf("build '%s' is already %s", bid, b.status))
		return
	}
	b.started, b.fromImage = true, req.FromImage
	s.mu.Unlock()

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.run(b, req.FromImageRegistry)
	}()
	w.WriteHeader(http.StatusAccepted)
}

func (s *TemplateServer) logf(b *build, level, step, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b.entries = append(b.entries, logEntry{Timestamp: time.Now().UTC(), Level: level, Step: step,
		Message: fmt.Sprintf(format, args...)})
}

func (s *TemplateServer) setStatus(b *build, status string, r *reason) {
	s.mu.Lock()
	b.status, b.reason = status, r
	s.mu.Unlock()
	s.opts.Log.Info("template build", "template", b.templateID, "build", b.buildID, "status", status)
}

func (s *TemplateServer) run(b *build, reg *registry) {
	s.setStatus(b, "building", nil)
	s.logf(b, "info", "base", "Pulling image %s", b.fromImage)
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
	defer cancel()
	auth, err := s.authFor(ctx, reg)
	if err == nil {
		err = pullImage(ctx, b.fromImage, auth, func(msg string) { s.logf(b, "info", "base", "%s", msg) })
	}
	if err != nil {
		msg := fmt.Sprintf("failed to pull image %s: %v", b.fromImage, err)
		s.logf(b, "error", "base", "%s", msg)
		s.mu.Lock()
		entries := append([]logEntry(nil), b.entries[len(b.entries)-1:]...)
		s.mu.Unlock()
		s.setStatus(b, "error", &reason{Message: msg, Step: "base", LogEntries: entries})
		return
	}
	s.logf(b, "info", "finalize", "Template %s built from %s", b.templateID, b.fromImage)
	s.setStatus(b, "ready", nil)
}

func (s *TemplateServer) buildStatus(w http.ResponseWriter, r *http.Request) {
	tid, bid := r.PathValue("templateID"), r.PathValue("buildID")
	q := r.URL.Query()
	offset, limit := 0, 100
	for name, p := range map[string]*int{"logsOffset": &offset, "limit": &limit} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || (name == "limit" && n > 100) {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid %s %q", name, v))
				return
			}
			*p = n
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.builds[bid]
	if !ok || b.templateID != tid {
		writeError(w, http.StatusNotFound, fmt.Sprintf("build '%s' of template '%s' not found", bid, tid))
		return
	}
	entries := []logEntry{}
	if offset < len(b.entries) {
		entries = append(entries, b.entries[offset:min(len(b.entries), offset+limit)]...)
	}
	logs := make([]string, len(entries))
	for i, e := range entries {
		logs[i] = fmt.Sprintf("[%s] %s", e.Timestamp.Format(time.RFC3339), e.Message)
	}
	resp := map[string]any{"templateID": b.templateID, "buildID": b.buildID, "status": b.status,
		"logs": logs, "logEntries": entries}
	if b.reason != nil {
		resp["reason"] = b.reason
	}
	writeJSON(w, http.StatusOK, resp)
}
