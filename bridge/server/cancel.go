package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/tangle-network/boxctl/bridge/cancellation"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// exactCancel answers a cancellation of run id that names its operation
// and the run's full identity (package cancellation).
func (s *Server) exactCancel(w http.ResponseWriter, r *http.Request, id string, body []byte, wait time.Duration) {
	var req wire.CancellationRequest
	if _, ok := decodeJSON(w, body, &req, "cancellation request"); !ok {
		return
	}
	a, err := s.cancellations.Run(r.Context(), id, req, wait)
	s.writeCancellation(w, r, req.Run, a, err)
}

// msgExactSessionCancel starts the refusal of a session cancellation that
// is not an exact one, as the TypeScript bridge words it.
const msgExactSessionCancel = "cancel requires an exact digest-bound run request"

// cancelSession answers POST /v1/sessions/:id/cancel. As in the
// TypeScript bridge, it takes only an exact cancellation of a turn of
// the session (package cancellation): a request that does not name the
// run it cancels exactly, `{}` included, is refused (400), so that a
// caller holding a stale reference never cancels a later turn.
func (s *Server) cancelSession(w http.ResponseWriter, r *http.Request) {
	rs, body, ok := s.sessionAndBody(w, r)
	if !ok {
		return
	}
	wait, err := parseWait(r, s.opts.CancelWait)
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	var req wire.CancellationRequest
	if _, err := decodeStrict(body, &req); err != nil {
		writeError(w, wire.TypeInvalidRequest, msgExactSessionCancel+": "+err.Error())
		return
	}
	a, err := s.cancellations.Session(r.Context(), rs.ID, req, wait)
	if e := invalid(err); e != nil {
		e.Message = msgExactSessionCancel + ": " + e.Message
	}
	s.writeCancellation(w, r, req.Run, a, err)
}

// invalid is err's error body when it refuses a malformed request.
func invalid(err error) *wire.ErrorBody {
	var e *wire.ErrorBody
	if errors.As(err, &e) && e.Type == wire.TypeInvalidRequest {
		return e
	}
	return nil
}

// writeCancellation writes the answer to an exact cancellation of ref:
// with ref's coordinates unless the request was malformed, and the state
// of the run when the request reached it.
func (s *Server) writeCancellation(w http.ResponseWriter, r *http.Request, ref wire.RunRef, a cancellation.Answer, err error) {
	if invalid(err) == nil {
		setRunRefHeaders(w, ref)
	}
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	if a.Reached {
		if run, snap, err := s.loadRun(r.Context(), ref.RunID); err == nil {
			setRunHeaders(w, run)
			setSnapshotHeaders(w, snap)
		}
	}
	if a.Status == http.StatusAccepted {
		w.Header().Set(wire.HeaderRetryAfter, "1")
	}
	writeJSON(w, a.Status, a.Ack)
}
