package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// exactCancel answers a cancellation that names its operation and the
// run's full identity; its acknowledgement is stored per operation id.
func (s *Server) exactCancel(w http.ResponseWriter, r *http.Request, id string, body []byte, generic map[string]any, wait time.Duration) {
	var req wire.CancellationRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, wire.TypeInvalidRequest, "invalid cancellation request: "+err.Error())
		return
	}
	if err := wire.ValidIdentifier(req.OperationID); err != nil {
		writeError(w, wire.TypeInvalidRequest, "operationId "+err.Error())
		return
	}
	if req.Run.RunID != id {
		writeErrorBody(w, wire.ErrorBody{Type: wire.TypeRunIdentityConflict, Message: "cancellation run id does not match the request path"})
		return
	}
	digest, err := wire.Digest(generic)
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	st := s.opts.Engine.Store()
	ctx := r.Context()
	if prev, err := st.GetCancellation(ctx, req.OperationID); err == nil {
		s.replayCancellation(w, prev, req, digest)
		return
	} else if !errors.Is(err, store.ErrNotFound) {
		s.log.Error("load cancellation", "err", err)
		writeError(w, wire.TypeServerError, "load cancellation")
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
