package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// respondInteraction answers POST /v1/runs/:runId/interactions/:interactionId/respond
// with an acknowledgement (wire.InteractionAck) whose HTTP status is
// wire.InteractionHTTPStatus of its status. Final acknowledgements are
// stored per operation id by the engine.
func (s *Server) respondInteraction(w http.ResponseWriter, r *http.Request) {
	runID, iid := r.PathValue("id"), r.PathValue("iid")
	var cmd wire.InteractionCommand
	if _, ok := s.readJSON(w, r, &cmd, "interaction command"); !ok {
		return
	}
	if err := wire.ValidIdentifier(cmd.OperationID); err != nil {
		writeError(w, wire.TypeInvalidRequest, "operationId "+err.Error())
		return
	}
	ack := func(a engine.InteractionAnswer) ([]byte, int) {
		out := wire.InteractionAck{OperationID: cmd.OperationID, Binding: cmd.Binding, CommandDigest: cmd.CommandDigest,
			Status: a.Status, Message: a.Message}
		code := wire.InteractionHTTPStatus(a.Status)
		if a.Status == wire.InteractionTransportFailure || code >= 400 {
			retry := a.Retryable
			out.Retryable = &retry
		}
		return wire.MustJSON(out), code
	}
	answer := func(a engine.InteractionAnswer) {
		b, code := ack(a)
		writeRaw(w, code, b)
	}
	st := s.opts.Engine.Store()
	// A lookup that failed answers nothing: Respond records the operation,
	// or fails, itself.
	if op, bound, err := store.Bound(st.GetInteractionOp(r.Context(), cmd.OperationID)); err == nil && bound {
		s.replayInteractionOp(w, cmd, op.HTTPStatus, op.Body)
		return
	}
	run, err := st.GetRun(r.Context(), runID)
	if errors.Is(err, store.ErrNotFound) {
		answer(engine.InteractionAnswer{Status: wire.InteractionUnknownRun, Message: "this bridge has no record of run " + runID})
		return
	}
	if err != nil {
		s.writeRunLookupError(w, runID, err)
		return
	}
	b := cmd.Binding
	if b.RunID != runID || b.InteractionID != iid || cmd.Response.ID != iid || b.Provider != run.Provider ||
		b.EnvironmentID != run.EnvironmentID || b.SessionID != run.SessionID || b.ExecutionID != run.ExecutionID {
		answer(engine.InteractionAnswer{Status: wire.InteractionBindingMismatch, Message: "the binding does not match the run and interaction"})
		return
	}
	it, err := st.GetInteraction(r.Context(), runID, iid)
	if errors.Is(err, store.ErrNotFound) {
		answer(engine.InteractionAnswer{Status: wire.InteractionUnknownInteraction, Message: "the run raised no interaction " + iid})
		return
	}
	if err != nil {
		s.log.Error("load interaction", "run", runID, "interaction", iid, "err", err)
		answer(engine.InteractionAnswer{Status: wire.InteractionTransportFailure, Retryable: true, Message: "the bridge could not load the interaction"})
		return
	}
	var req wire.InteractionRequest
	if err := json.Unmarshal(it.Request, &req); err != nil || b.RequestDigest != req.RequestDigest {
		answer(engine.InteractionAnswer{Status: wire.InteractionBindingMismatch, Message: "the binding does not name the interaction's request digest"})
		return
	}
	digest, err := wire.InteractionCommandDigest(b, cmd.Response)
	if err != nil || digest != cmd.CommandDigest {
		answer(engine.InteractionAnswer{Status: wire.InteractionInvalidResponse, Message: "commandDigest does not match the binding and response"})
		return
	}
	d := engine.Decision{Outcome: cmd.Response.Outcome}
	d.Allow, d.Message, err = wire.PermissionDecision(req, cmd.Response)
	if err != nil {
		answer(engine.InteractionAnswer{Status: wire.InteractionInvalidResponse, Message: err.Error()})
		return
	}
	respDigest, err := wire.Digest(cmd.Response)
	if err != nil {
		answer(engine.InteractionAnswer{Status: wire.InteractionInvalidResponse, Message: err.Error()})
		return
	}
	out, code, err := s.opts.Engine.Respond(r.Context(), runID, iid, cmd.OperationID, d, respDigest, ack)
	if err != nil {
		s.log.Error("respond to interaction", "run", runID, "interaction", iid, "err", err)
		answer(engine.InteractionAnswer{Status: wire.InteractionTransportFailure, Retryable: true, Message: "the bridge could not record the answer"})
		return
	}
	// A concurrent twin of this operation id may have stored its answer
	// first: it is this command's only if it is the same command.
	s.replayInteractionOp(w, cmd, code, out)
}

// replayInteractionOp answers a command whose operation id has a stored
// acknowledgement: that acknowledgement when it acknowledges this very
// command (same binding and command digest), else, as the TypeScript
// bridge does, 409 already_resolved_different for the new command,
// without storing anything.
func (s *Server) replayInteractionOp(w http.ResponseWriter, cmd wire.InteractionCommand, code int, body []byte) {
	var prev wire.InteractionAck
	if json.Unmarshal(body, &prev) == nil && prev.Binding == cmd.Binding && prev.CommandDigest == cmd.CommandDigest {
		writeRaw(w, code, body)
		return
	}
	no := false
	writeJSON(w, wire.InteractionHTTPStatus(wire.InteractionAlreadyResolvedDifferent), wire.InteractionAck{
		OperationID: cmd.OperationID, Binding: cmd.Binding, CommandDigest: cmd.CommandDigest,
		Status: wire.InteractionAlreadyResolvedDifferent, Retryable: &no,
		Message: "operation id was already used with a different binding or response"})
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}
