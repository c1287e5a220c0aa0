package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// continueSession answers POST /v1/sessions/:id/continue: native
// continuation (package continuation).
func (s *Server) continueSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := wire.ValidIdentifier(id); err != nil {
		writeError(w, wire.TypeInvalidRequest, "session id "+err.Error())
		return
	}
	var in wire.ContinueBody
	if _, ok := s.readJSON(w, r, &in, "continuation request"); !ok {
		return
	}
	if err := wire.ValidIdentifier(in.Request.OperationID); err != nil {
		writeError(w, wire.TypeInvalidRequest, "request.operationId "+err.Error())
		return
	}
	a := s.continuations.Continue(r.Context(), id, in)
	if a.RetryAfter {
		w.Header().Set(wire.HeaderRetryAfter, "1")
	}
	switch {
	case a.Status == 0: // the caller went away; nobody reads an answer
	case a.Outcome != nil:
		writeJSON(w, a.Status, a.Outcome)
	default:
		writeRaw(w, a.Status, a.Body)
	}
}

// continuationExecution is the execution of a continued session's turns
// (continuation.Options.Execution): its confinement and timeout, or why
// it cannot run here now. A jail the host cannot enforce now leaves the
// turn unverified, as a capability the TypeScript bridge denies does.
func (s *Server) continuationExecution(ctx context.Context, raw json.RawMessage, cwd string) (jail.Request, time.Duration, string) {
	x, eb := parseExecution(raw)
	if eb != nil {
		return jail.Request{}, 0, "the session's execution cannot be read: " + eb.Message
	}
	if e := s.checkJail(ctx, x, cwd); e != nil {
		return jail.Request{}, 0, e.Type + ": " + e.Message
	}
	return x.confine, x.timeout, ""
}
