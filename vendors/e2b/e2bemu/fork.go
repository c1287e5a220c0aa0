package e2bemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
)

// Forks (spec/openapi.yml): POST /sandboxes/{sandboxID}/fork checkpoints a
// running sandbox in place (its container paused for a commit, as for a
// snapshot, and running on with its id and end untouched) and starts count
// sandboxes of that one image, each a sandbox of its own (id, envd token,
// the timeout of the request) with the source's template, metadata and
// network settings, as E2B's forks inherit them from the snapshot. Each
// fork succeeds or fails on its own (past MaxSandboxes it is a 429 entry):
// the answer is 201 with one SandboxForkResult per fork. The image is no
// template: it is removed once the last fork of it ends.

// maxForkCount is the most forks one call makes, as on E2B.
const maxForkCount = 100

// forkTimeoutDefault is a fork's timeout when the request names none
// (SandboxForkRequest.timeout's default).
const forkTimeoutDefault = 15 * time.Second

func (s *Server) routeForks() {
	s.api.HandleFunc("POST /sandboxes/{sandboxID}/fork", s.handleFork)
}

// forkResult is SandboxForkResult: exactly one of its fields is set.
type forkResult struct {
	Sandbox map[string]any `json:"sandbox,omitempty"`
	Error   map[string]any `json:"error,omitempty"`
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout *int `json:"timeout"`
		Count   *int `json:"count"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, "Error when parsing request: "+err.Error())
			return
		}
	}
	timeout := forkTimeoutDefault
	if req.Timeout != nil {
		if *req.Timeout <= 0 {
			writeError(w, http.StatusBadRequest, "Timeout must be greater than 0")
			return
		}
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	if timeout > s.opts.MaxTimeout {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.opts.MaxTimeout/time.Hour)))
		return
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	switch {
	case count < 1:
		writeError(w, http.StatusBadRequest, "Count must be at least 1")
		return
	case count > maxForkCount:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Count cannot be greater than %d", maxForkCount))
		return
	case s.opts.MaxSandboxes > 0 && count >= s.opts.MaxSandboxes:
		// The source holds a slot: more forks could never all start.
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Count must be lower than the maximum number of concurrent sandboxes (%d)", s.opts.MaxSandboxes))
		return
	}
	id := r.PathValue("sandboxID")
	src, ok := s.lookup(id)
	if !ok {
		s.notFound(w, id)
		return
	}
	if !src.snapMu.TryLock() {
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox '%s' cannot be forked while in 'snapshotting' state", id))
		return
	}
	s.mu.Lock()
	paused := src.paused
	s.mu.Unlock()
	if paused {
		src.snapMu.Unlock()
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox '%s' is paused and cannot be forked; resume it first", id))
		return
	}
	ref := snapshotRepo + ":fork-" + id + "-" + randomString(6, lowerDigits)
	begin := time.Now()
	_, err := s.cli.ContainerCommit(r.Context(), src.box.ID(), container.CommitOptions{Reference: ref, Pause: true,
		Comment: "fork of sandbox " + id})
	src.snapMu.Unlock()
	if err != nil {
		s.log.Warn("checkpoint sandbox for fork", "sandbox", id, "err", err)
		writeError(w, http.StatusInternalServerError, "Error forking sandbox")
		return
	}
	// The handler holds the image until every fork has started or failed.
	s.holdImage(ref)
	defer s.releaseImage(ref)
	tpl := &template{id: src.templateID, name: src.alias, image: ref, ready: true, forked: true}
	s.mu.Lock()
	policy := src.egress
	s.mu.Unlock()
	spec := newSandbox{TemplateID: src.templateID, Secure: src.envdToken != "", AllowInternetAccess: src.allowInternet,
		Metadata: src.metadata, policy: policy}
	if src.trafficToken != "" {
		no := false
		spec.Network = &networkConfig{AllowPublicTraffic: &no}
	}
	results := make([]forkResult, count)
	var wg sync.WaitGroup
	for i := range count {
		wg.Go(func() { results[i] = s.startFork(spec, tpl, timeout) })
	}
	wg.Wait()
	s.log.Info("sandbox forked", "sandbox", id, "forks", count, "took", time.Since(begin))
	writeJSON(w, http.StatusCreated, results)
}

// startFork starts one fork of tpl, a fork's image, and returns its
// result.
func (s *Server) startFork(spec newSandbox, tpl *template, timeout time.Duration) forkResult {
	if !s.reserve() {
		return forkResult{Error: map[string]any{"code": http.StatusTooManyRequests, "message": s.limitMessage()}}
	}
	defer s.unreserve()
	// A fork goes on when the caller hangs up, as a create does.
	sb, err := s.createSandbox(s.ctx, spec, tpl, timeout)
	if err != nil {
		s.log.Warn("start fork", "image", tpl.image, "err", err)
		return forkResult{Error: map[string]any{"code": http.StatusInternalServerError, "message": "Failed to create sandbox: " + err.Error()}}
	}
	return forkResult{Sandbox: s.created(sb)}
}

// holdImage counts one more user of a fork's image; s.mu is not held.
func (s *Server) holdImage(ref string) {
	s.mu.Lock()
	s.forkImages[ref]++
	s.mu.Unlock()
}

// releaseImage counts one user of a fork's image less, removing the image
// with the last.
func (s *Server) releaseImage(ref string) {
	s.mu.Lock()
	s.forkImages[ref]--
	last := s.forkImages[ref] <= 0
	if last {
		delete(s.forkImages, ref)
	}
	s.mu.Unlock()
	if last {
		s.removeImages(context.Background(), []string{ref})
	}
}
