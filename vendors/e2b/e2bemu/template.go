package e2bemu

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The template build API (build system v2): POST /v3/templates, POST
// /v2/templates/{templateID}/builds/{buildID} and GET
// /templates/{templateID}/builds/{buildID}/status. A started build really
// pulls its fromImage (manifest, config and every layer, digests verified)
// from the registry with the given credentials; it turns ready when the
// pull succeeds and error otherwise. A ready template's sandboxes run
// fromImage.

// template is a template sandboxes can be made from: a build's image, or
// a snapshot's images by tag (snapshot.go).
type template struct {
	id, name string
	image    string // of the tag looked up, in a copy from Server.template
	ready    bool
	snaps    map[string]*snap // by tag; nil unless a snapshot template
	retired  []string         // images of snaps replaced by later ones
	forked   bool             // image is a fork's, held by each sandbox of it (fork.go)
}

type build struct {
	tpl       *template
	buildID   string
	started   bool
	status    string
	fromImage string
	entries   []logEntry
	reason    *reason
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

func (s *Server) routeTemplates() {
	s.api.HandleFunc("POST /v3/templates", s.createTemplate)
	s.api.HandleFunc("POST /v2/templates/{templateID}/builds/{buildID}", s.startBuild)
	s.api.HandleFunc("GET /templates/{templateID}/builds/{buildID}/status", s.buildStatus)
}

// template returns a copy of a template by ID or name, with an optional
// ":tag" (default "default"), its image the tag's.
func (s *Server) template(ref string) (*template, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, tag := s.resolveLocked(ref)
	if t == nil {
		return nil, fmt.Errorf("template '%s' not found", ref)
	}
	c := *t
	if t.snaps != nil {
		sn, ok := t.snaps[tag]
		if !ok {
			return nil, fmt.Errorf("tag '%s' does not exist for template '%s'", tag, strings.TrimSuffix(ref, ":"+tag))
		}
		c.image = sn.image
	} else if tag != defaultTag {
		return nil, fmt.Errorf("tag '%s' does not exist for template '%s'", tag, strings.TrimSuffix(ref, ":"+tag))
	}
	return &c, nil
}

// defaultTag is the tag of a reference that names none.
const defaultTag = "default"

// resolveLocked finds the template of a reference, ID or name with an
// optional ":tag", and the tag; s.mu is held.
func (s *Server) resolveLocked(ref string) (*template, string) {
	if t, ok := s.templates[ref]; ok {
		return t, defaultTag
	}
	name, tag, ok := strings.Cut(ref, ":")
	if !ok || tag == "" {
		return nil, ""
	}
	return s.templates[name], tag
}

// Build reports a build's fromImage and status, for tests.
func (s *Server) Build(buildID string) (fromImage, status string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.builds[buildID]
	if !ok {
		return "", "", false
	}
	return b.fromImage, b.status, true
}

func (s *Server) createTemplate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name     string `json:"name"`
		Alias    string `json:"alias"`
		CPUCount *int   `json:"cpuCount"`
		MemoryMB *int   `json:"memoryMB"`
	}
	if !decodeBody(w, r, &req) {
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
	t := &template{id: randomString(20, lowerDigits), name: name}
	b := &build{tpl: t, buildID: newUUID(), status: "waiting"}
	s.mu.Lock()
	s.builds[b.buildID] = b
	s.templates[t.id] = t
	s.mu.Unlock()
	names := []string{}
	if name != "" {
		names = append(names, name)
	}
	writeJSON(w, http.StatusAccepted, map[string]any{
		"templateID": t.id, "buildID": b.buildID, "public": false,
		"names": names, "aliases": names, "tags": []string{},
	})
}

func (s *Server) startBuild(w http.ResponseWriter, r *http.Request) {
	tid, bid := r.PathValue("templateID"), r.PathValue("buildID")
	var req struct {
		FromImage         string    `json:"fromImage"`
		FromTemplate      string    `json:"fromTemplate"`
		FromImageRegistry *registry `json:"fromImageRegistry"`
		StartCmd          string    `json:"startCmd"`
		ReadyCmd          string    `json:"readyCmd"`
	}
	if !decodeBody(w, r, &req) {
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
	case !ok || b.tpl.id != tid:
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
		s.runBuild(b, req.FromImageRegistry)
	}()
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) logf(b *build, level, step, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b.entries = append(b.entries, logEntry{Timestamp: time.Now().UTC(), Level: level, Step: step,
		Message: fmt.Sprintf(format, args...)})
}

func (s *Server) setStatus(b *build, status string, r *reason) {
	s.mu.Lock()
	b.status, b.reason = status, r
	if status == "ready" {
		b.tpl.image, b.tpl.ready = b.fromImage, true
		if b.tpl.name != "" {
			s.templates[b.tpl.name] = b.tpl
		}
	}
	s.mu.Unlock()
	s.log.Info("template build", "template", b.tpl.id, "build", b.buildID, "status", status)
}

func (s *Server) runBuild(b *build, reg *registry) {
	s.setStatus(b, "building", nil)
	s.logf(b, "info", "base", "Pulling image %s", b.fromImage)
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Minute)
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
	s.logf(b, "info", "finalize", "Template %s built from %s", b.tpl.id, b.fromImage)
	s.setStatus(b, "ready", nil)
}

func (s *Server) buildStatus(w http.ResponseWriter, r *http.Request) {
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
	if !ok || b.tpl.id != tid {
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
	resp := map[string]any{"templateID": tid, "buildID": b.buildID, "status": b.status,
		"logs": logs, "logEntries": entries}
	if b.reason != nil {
		resp["reason"] = b.reason
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(resp)
}
