package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// exactCancel answers a cancellation that names its operation and the
// run's full identity; its acknowledgement is stored per operation id.
// As in the TypeScript bridge, the request must carry its own digest
// (wire.CancellationDigest of operationId, run and reason): a missing or
// wrong one is a 400, and the acknowledgement echoes it.
func (s *Server) exactCancel(w http.ResponseWriter, r *http.Request, id string, body []byte, wait time.Duration) {
	var req wire.CancellationRequest
	if _, ok := decodeJSON(w, body, &req, "cancellation request"); !ok {
		return
	}
	if msg := validCancellation(req); msg != "" {
		writeError(w, wire.TypeInvalidRequest, msg)
		return
	}
	digest, err := wire.CancellationDigest(req)
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	if req.RequestDigest != digest {
		writeError(w, wire.TypeInvalidRequest, "run cancellation request digest does not match its content")
		return
	}
	setRunRefHeaders(w, req.Run)
	if req.Run.RunID != id {
		writeErrorBody(w, wire.ErrorBody{Type: wire.TypeRunIdentityConflict, RunID: id,
			Message: "cancellation run id does not match the request path"})
		return
	}
	st := s.opts.Engine.Store()
	ctx := r.Context()
	prev, bound, err := store.Bound(st.GetCancellation(ctx, req.OperationID))
	if err != nil {
		s.writeFailure(w, wire.Fault("load cancellation", err))
		return
	}
	if bound {
		s.replayCancellation(w, prev, req, digest)
		return
	}

	ack := wire.CancellationAck{OperationID: req.OperationID, RequestDigest: digest, Run: req.Run}
	status := http.StatusOK
	run, err := st.GetRun(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		no := false
		ack.Status, ack.Effect, ack.Retryable = wire.CancelUnknown, wire.EffectUnknown, &no
		ack.Message = "this bridge has no record of the run"
	case err != nil:
		s.writeRunLookupError(w, id, err)
		return
	default:
		if run.Digest != req.Run.RequestDigest || run.Provider != req.Run.Provider || run.EnvironmentID != req.Run.EnvironmentID ||
			run.SessionID != req.Run.SessionID || run.ExecutionID != req.Run.ExecutionID {
			writeErrorBody(w, wire.ErrorBody{Type: wire.TypeRunIdentityConflict, RunID: id,
				Message: "the cancellation's run identity does not match the run"})
			return
		}
		requested, err := s.opts.Engine.Cancel(ctx, id)
		if err != nil {
			s.log.Error("cancel run", "run", id, "err", err)
			writeError(w, wire.TypeServerError, "cancel run")
			return
		}
		s.waitTerminal(ctx, id, wait)
		run, snap, err := s.loadRun(ctx, id)
		if err != nil {
			s.writeRunLookupError(w, id, err)
			return
		}
		setRunHeaders(w, run)
		setSnapshotHeaders(w, snap)
		ack.Status = wire.CancelAccepted
		switch {
		case snap.Status == wire.StatusCancelled:
			ack.Effect = wire.EffectCancelled
		case snap.Terminal:
			ack.Effect = wire.EffectNotLive
		default:
			ack.Effect, status = wire.EffectCancelRequested, http.StatusAccepted
			if !requested {
				ack.Message = "cancellation was already requested"
			}
		}
	}
	b, _ := json.Marshal(ack)
	stored, created, err := st.PutCancellation(ctx, store.Cancellation{OperationID: req.OperationID, Digest: digest,
		HTTPStatus: status, Body: b})
	if err != nil {
		s.log.Error("store cancellation", "err", err)
		writeError(w, wire.TypeServerError, "store cancellation")
		return
	}
	if !created { // a concurrent twin won
		s.replayCancellation(w, stored, req, digest)
		return
	}
	if status == http.StatusAccepted {
		w.Header().Set(wire.HeaderRetryAfter, "1")
	}
	writeJSON(w, status, ack)
}

// validCancellation checks an exact cancellation as the agent interface's
// schema does, and says what is wrong with it.
func validCancellation(req wire.CancellationRequest) string {
	if err := wire.ValidIdentifier(req.OperationID); err != nil {
		return "operationId " + err.Error()
	}
	if err := wire.ValidRunRef(req.Run); err != nil {
		return err.Error()
	}
	if n := wire.JSLength(req.Reason); n > wire.MaxCancellationReason {
		return fmt.Sprintf("reason must be at most %d characters", wire.MaxCancellationReason)
	}
	if req.RequestDigest == "" {
		return "requestDigest is required"
	}
	if err := wire.ValidDigest(req.RequestDigest); err != nil {
		return "requestDigest " + err.Error()
	}
	return ""
}

func (s *Server) replayCancellation(w http.ResponseWriter, prev store.Cancellation, req wire.CancellationRequest, digest string) {
	if prev.Digest != digest {
		writeJSON(w, http.StatusConflict, wire.CancellationAck{OperationID: req.OperationID, RequestDigest: digest,
			Run: req.Run, Status: wire.CancelConflict, Effect: wire.EffectUnknown, ExistingRequestDigest: prev.Digest,
			Message: "the operation id was used for a different cancellation"})
		return
	}
	var ack wire.CancellationAck
	if err := json.Unmarshal(prev.Body, &ack); err != nil {
		writeError(w, wire.TypeServerError, "stored cancellation is unreadable")
		return
	}
	if ack.Status != wire.CancelUnknown {
		ack.Status = wire.CancelReplayed
	}
	if prev.HTTPStatus == http.StatusAccepted {
		w.Header().Set(wire.HeaderRetryAfter, "1")
	}
	writeJSON(w, prev.HTTPStatus, ack)
}
