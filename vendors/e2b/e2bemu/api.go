package e2bemu

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/vendors/emukit"
)

// The control plane (spec/openapi.yml): the sandbox routes here, the
// template routes in template.go.

func (s *Server) routeAPI() {
	m := s.api
	m.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	m.HandleFunc("POST /v2/sandboxes", s.handleCreate)
	m.HandleFunc("GET /v2/sandboxes", s.handleList)
	m.HandleFunc("POST /v2/sandboxes/{sandboxID}/connect", s.handleConnect)
	m.HandleFunc("GET /sandboxes/{sandboxID}", s.handleGet)
	m.HandleFunc("DELETE /sandboxes/{sandboxID}", s.handleKill)
	m.HandleFunc("POST /sandboxes/{sandboxID}/timeout", s.handleTimeout)
	m.HandleFunc("POST /sandboxes/{sandboxID}/refreshes", s.handleRefresh)
	m.HandleFunc("POST /sandboxes/{sandboxID}/pause", s.handlePause)
	m.HandleFunc("GET /sandboxes/{sandboxID}/metrics", s.handleMetrics)
	m.HandleFunc("PUT /sandboxes/{sandboxID}/network", s.handleNetwork)
	// Deprecated in the spec, still served: older clients call them.
	m.HandleFunc("POST /sandboxes", s.handleCreate)
	m.HandleFunc("GET /sandboxes", s.handleListV1)
	m.HandleFunc("POST /sandboxes/{sandboxID}/connect", s.handleConnect)
	m.HandleFunc("POST /sandboxes/{sandboxID}/resume", s.handleConnect)
	s.routeNotEmulated()
	s.routeTemplates()
	s.routeSnapshots()
	s.routeForks()
}

// serveAPI checks X-API-Key, injects faults and serves the control plane.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		s.api.ServeHTTP(w, r)
		return
	}
	if r.Header.Get("X-API-Key") != s.opts.APIKey {
		writeError(w, http.StatusUnauthorized, "Invalid API key, please visit https://e2b.dev/docs/api-key to get a new one.")
		return
	}
	if r.URL.Path == emukit.SwitchPath {
		s.faults.ServeSwitch(w, r)
		return
	}
	s.faults.Serve(w, r, s.api)
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "Error when parsing request: "+err.Error())
		return false
	}
	return true
}

func (s *Server) notFound(w http.ResponseWriter, id string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("sandbox \"%s\" doesn't exist or you don't have access to it", id))
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req newSandbox
	if !decodeBody(w, r, &req) {
		return
	}
	if req.TemplateID == "" {
		writeError(w, http.StatusBadRequest, "templateID is required")
		return
	}
	// NewSandboxV2's timeout defaults to 300 s, the old NewSandbox's to 15.
	timeout := 300 * time.Second
	if r.URL.Path == "/sandboxes" {
		timeout = 15 * time.Second
	}
	if r.URL.Path == "/v2/sandboxes" {
		req.Secure = true // v2: every sandbox is secured
	}
	if req.Timeout != nil {
		if *req.Timeout < 0 {
			writeError(w, http.StatusBadRequest, "timeout must be at least 0")
			return
		}
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	if timeout > s.opts.MaxTimeout {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.opts.MaxTimeout/time.Hour)))
		return
	}
	var rules egressRules
	if req.Network != nil {
		rules = req.Network.egressRules
	}
	policy, err := egressPolicy(req.AllowInternetAccess, rules)
	switch {
	case errors.Is(err, errNotEmulated):
		writeJSON(w, http.StatusNotImplemented, map[string]any{"code": http.StatusNotImplemented, "message": err.Error(), "error_code": NotEmulatedCode})
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	req.policy = policy
	tpl, err := s.template(req.TemplateID)
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	if !tpl.ready {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("template '%s' has no successful build", req.TemplateID))
		return
	}
	if !s.reserve() {
		writeError(w, http.StatusTooManyRequests, s.limitMessage())
		return
	}
	defer s.unreserve()
	if !s.faults.Delay(r.Context()) {
		return
	}
	// The create goes on when the caller hangs up, as a real control
	// plane's does.
	sb, err := s.createSandbox(s.ctx, req, tpl, timeout)
	if err != nil {
		s.log.Warn("create sandbox", "template", tpl.id, "err", err)
		w.Header().Set("Content-Type", "application/json")
		writeJSON(w, http.StatusInternalServerError, map[string]any{"code": 500, "message": "Failed to create sandbox: " + err.Error(),
			"error_code": "sandbox_create_failed"})
		return
	}
	writeJSON(w, http.StatusCreated, s.created(sb))
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.lookup(r.PathValue("sandboxID"))
	if !ok {
		s.notFound(w, r.PathValue("sandboxID"))
		return
	}
	writeJSON(w, http.StatusOK, s.detail(sb, true))
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	if !s.kill(r.PathValue("sandboxID"), "killed") {
		s.notFound(w, r.PathValue("sandboxID"))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// newEnd checks a new end of a sandbox against the plan's maximum.
func (s *Server) newEnd(w http.ResponseWriter, sb *sandbox, end time.Time) bool {
	if end.Sub(sb.startedAt) > s.opts.MaxTimeout+time.Second {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.opts.MaxTimeout/time.Hour)))
		return false
	}
	return true
}

// timeoutRequest reads the {timeout} body of a call on a sandbox, and the
// sandbox, answering the error itself when either fails.
func (s *Server) timeoutRequest(w http.ResponseWriter, r *http.Request) (*sandbox, time.Duration, bool) {
	var req struct {
		Timeout *int `json:"timeout"`
	}
	if !decodeBody(w, r, &req) {
		return nil, 0, false
	}
	if req.Timeout == nil || *req.Timeout < 0 {
		writeError(w, http.StatusBadRequest, "timeout is required and must be at least 0")
		return nil, 0, false
	}
	sb, ok := s.lookup(r.PathValue("sandboxID"))
	if !ok {
		s.notFound(w, r.PathValue("sandboxID"))
		return nil, 0, false
	}
	return sb, time.Duration(*req.Timeout) * time.Second, true
}

func (s *Server) handleTimeout(w http.ResponseWriter, r *http.Request) {
	sb, timeout, ok := s.timeoutRequest(w, r)
	if !ok {
		return
	}
	end := time.Now().Add(timeout)
	if !s.newEnd(w, sb, end) {
		return
	}
	s.mu.Lock()
	s.setTimeoutLocked(sb, end)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRefresh(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Duration int `json:"duration"`
	}
	if r.ContentLength != 0 && !decodeBody(w, r, &req) {
		return
	}
	if req.Duration < 0 || req.Duration > 3600 {
		writeError(w, http.StatusBadRequest, "duration must be between 0 and 3600")
		return
	}
	if req.Duration == 0 {
		req.Duration = 15
	}
	sb, ok := s.lookup(r.PathValue("sandboxID"))
	if !ok {
		s.notFound(w, r.PathValue("sandboxID"))
		return
	}
	s.extend(sb, time.Duration(req.Duration)*time.Second)
	w.WriteHeader(http.StatusNoContent)
}

// extend moves the sandbox's end to d from now, if that is later, within
// the plan's maximum.
func (s *Server) extend(sb *sandbox, d time.Duration) {
	end := time.Now().Add(d)
	if max := sb.startedAt.Add(s.opts.MaxTimeout); end.After(max) {
		end = max
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if end.After(sb.endAt) {
		s.setTimeoutLocked(sb, end)
	}
}

// handleConnect is connect (v2 and the deprecated v1) and the deprecated
// resume: the body is optional (timeout 300 s by default, v1 resume 15);
// a paused sandbox is resumed (201), a running one's TTL only extended
// (200).
func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout *int `json:"timeout"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, "Error when parsing request: "+err.Error())
			return
		}
	}
	timeout := 300 * time.Second
	if strings.HasSuffix(r.URL.Path, "/resume") {
		timeout = 15 * time.Second
	}
	if req.Timeout != nil {
		if *req.Timeout < 0 {
			writeError(w, http.StatusBadRequest, "timeout must be at least 0")
			return
		}
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	sb, ok := s.lookup(r.PathValue("sandboxID"))
	if !ok {
		s.notFound(w, r.PathValue("sandboxID"))
		return
	}
	if timeout > s.opts.MaxTimeout {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.opts.MaxTimeout/time.Hour)))
		return
	}
	resumed, err := s.resume(r.Context(), sb, timeout)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "Failed to resume sandbox: "+err.Error())
		return
	}
	if resumed {
		writeJSON(w, http.StatusCreated, s.created(sb))
		return
	}
	if strings.HasSuffix(r.URL.Path, "/resume") {
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox %s is already running", sb.id))
		return
	}
	s.extend(sb, timeout)
	writeJSON(w, http.StatusOK, s.created(sb))
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.lookup(r.PathValue("sandboxID"))
	if !ok {
		s.notFound(w, r.PathValue("sandboxID"))
		return
	}
	// A pause waits for a snapshot being taken, as E2B's does.
	sb.snapMu.Lock()
	paused, err := s.pause(r.Context(), sb)
	sb.snapMu.Unlock()
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, "Failed to pause sandbox: "+err.Error())
	case !paused:
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox %s is already paused", sb.id))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// matches reports whether a sandbox's metadata holds every pair of q.
func matches(sb *sandbox, q url.Values) bool {
	for k, vs := range q {
		if len(vs) == 0 || sb.metadata[k] != vs[0] {
			return false
		}
	}
	return true
}

// filtered returns the sandboxes whose metadata matches the metadata
// parameter ("k=v&k2=v2", each part URL-encoded), newest first.
func (s *Server) filtered(w http.ResponseWriter, r *http.Request) ([]*sandbox, bool) {
	q, err := url.ParseQuery(r.URL.Query().Get("metadata"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "Error when parsing metadata: "+err.Error())
		return nil, false
	}
	s.mu.Lock()
	var out []*sandbox
	for _, sb := range s.sandboxes {
		if matches(sb, q) {
			out = append(out, sb)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *sandbox) int {
		return cmp.Or(b.startedAt.Compare(a.startedAt), strings.Compare(a.id, b.id))
	})
	return out, true
}

func (s *Server) handleListV1(w http.ResponseWriter, r *http.Request) {
	sbs, ok := s.filtered(w, r)
	if !ok {
		return
	}
	out := make([]map[string]any, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, s.detail(sb, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	states := map[string]bool{}
	for _, st := range q["state"] {
		for v := range strings.SplitSeq(st, ",") {
			if v != "running" && v != "paused" {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid state %q", v))
				return
			}
			states[v] = true
		}
	}
	if o := q.Get("order"); o != "" && o != "asc" && o != "desc" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid order %q", o))
		return
	}
	limit, offset, err := emukit.ReadPage(q, "limit", "nextToken", 100, 100)
	if pe := (*emukit.PageError)(nil); errors.As(err, &pe) && pe.Param == "limit" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid limit %q: want 1 to 100", pe.Value))
		return
	} else if err != nil {
		writeError(w, http.StatusBadRequest, "invalid next token")
		return
	}
	all, ok := s.filtered(w, r)
	if !ok {
		return
	}
	var sbs []*sandbox
	tpl := q.Get("template")
	s.mu.Lock()
	for _, sb := range all {
		if (len(states) == 0 || states[stateOf(sb)]) && (tpl == "" || sb.templateID == tpl || sb.alias == tpl) {
			sbs = append(sbs, sb)
		}
	}
	s.mu.Unlock()
	if q.Get("order") == "asc" {
		slices.Reverse(sbs)
	}
	w.Header().Set("X-Total-Running", strconv.Itoa(len(sbs)))
	page := sbs[min(offset, len(sbs)):min(offset+limit, len(sbs))]
	if offset+limit < len(sbs) {
		w.Header().Set("X-Next-Token", emukit.PageToken(offset+limit))
	}
	out := make([]map[string]any, 0, len(page))
	for _, sb := range page {
		out = append(out, s.detail(sb, false))
	}
	writeJSON(w, http.StatusOK, out)
}
