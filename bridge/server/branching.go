package server

import (
	"net/http"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Workspace branching (package branch): checkpoints of an ended run's
// workspace and forks of them, copies under the data directory.

// copyBody reads the body of a route that makes a workspace copy into v,
// on a bridge that can keep copies; it has answered when ok is false.
func (s *Server) copyBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := s.branches.CheckCopies(); err != nil {
		s.writeFailure(w, err)
		return false
	}
	_, ok := s.readJSON(w, r, v, "request")
	return ok
}

// branchStatus is the HTTP status of a checkpoint or fork result.
func branchStatus(status string, retryable *bool) int {
	switch status {
	case wire.BranchCreated:
		return http.StatusCreated
	case wire.BranchConflict:
		return http.StatusConflict
	case wire.BranchUnknown:
		if retryable != nil && *retryable { // a live run, checkpointed after it ends
			return http.StatusConflict
		}
		return http.StatusGone
	}
	return http.StatusOK
}

func (s *Server) createCheckpoint(w http.ResponseWriter, r *http.Request) {
	var req wire.CheckpointRequest
	if !s.copyBody(w, r, &req) {
		return
	}
	res, err := s.branches.Checkpoint(r.Context(), req)
	s.writeResult(w, branchStatus(res.Status, res.Retryable), res, err)
}

func (s *Server) createFork(w http.ResponseWriter, r *http.Request) {
	var req wire.ForkRequest
	if !s.copyBody(w, r, &req) {
		return
	}
	res, err := s.branches.Fork(r.Context(), req)
	s.writeResult(w, branchStatus(res.Status, res.Retryable), res, err)
}

func (s *Server) lookupCheckpoint(w http.ResponseWriter, r *http.Request) {
	var req wire.OperationLookup
	if _, ok := s.readJSON(w, r, &req, "request"); !ok {
		return
	}
	res, err := s.branches.LookupCheckpoint(r.Context(), req)
	s.writeResult(w, branchStatus(res.Status, res.Retryable), res, err)
}

func (s *Server) lookupFork(w http.ResponseWriter, r *http.Request) {
	var req wire.OperationLookup
	if _, ok := s.readJSON(w, r, &req, "request"); !ok {
		return
	}
	res, err := s.branches.LookupFork(r.Context(), req)
	s.writeResult(w, branchStatus(res.Status, res.Retryable), res, err)
}

func (s *Server) getFork(w http.ResponseWriter, r *http.Request) {
	out, err := s.branches.Workspace(r.Context(), r.PathValue("id"))
	s.writeResult(w, http.StatusOK, out, err)
}

func (s *Server) deleteCheckpoint(w http.ResponseWriter, r *http.Request) {
	s.cleanup(w, r, store.KindCheckpoint)
}

func (s *Server) destroyFork(w http.ResponseWriter, r *http.Request) { s.cleanup(w, r, store.KindFork) }

// cleanup deletes a checkpoint or destroys a fork.
func (s *Server) cleanup(w http.ResponseWriter, r *http.Request, kind string) {
	var req wire.CleanupRequest
	if _, ok := s.readJSON(w, r, &req, "request"); !ok {
		return
	}
	ack, err := s.branches.Cleanup(r.Context(), kind, req)
	status := http.StatusOK
	if ack.Status == wire.CleanupConflict || ack.Status == wire.CleanupInUse {
		status = http.StatusConflict
	}
	s.writeResult(w, status, ack, err)
}
