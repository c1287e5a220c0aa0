package server

import (
	"fmt"
	"net/http"

	"github.com/tangle-network/boxctl/bridge/continuation"
	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// capabilities answers GET /v1/capabilities?model=: the capability
// document of the model's harness (see Capabilities).
func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	model := r.URL.Query().Get("model")
	if model == "" {
		writeError(w, wire.TypeInvalidRequest, "the model query parameter is required")
		return
	}
	b, _, ok := s.resolveModel(model)
	if !ok {
		writeErrorBody(w, modelNotFound(model))
		return
	}
	h := s.health.probe(r.Context(), b, false)
	if h.State != wire.BackendReady {
		writeError(w, wire.TypeBackendNotReady, fmt.Sprintf("%s is %s: %s", h.Name, h.State, h.Detail))
		return
	}
	c := Capabilities(b.Adapter)
	if s.opts.Engine.ExactAvailable(r.Context()) {
		// Exact process environments (POST /v1/exact/environments) run
		// under the jail with a network namespace of their own, whatever
		// the harness: claimed where they can run, for the one egress
		// they enforce.
		c.ExactProcess = &wire.ExactProcessCaps{Egress: []string{wire.EgressBlocked}}
	}
	writeJSON(w, http.StatusOK, c)
}

// Capabilities is the capability document of a harness's routes: exactly
// what this bridge does for it, and nothing it does not.
//
//   - Streaming (live SSE, replay from a cursor, detached readers, a
//     repeated run id attaching to its run) is the engine's and holds for
//     every harness.
//   - Session continuation is claimed for adapters that resume their CLI's
//     own conversation (harness.Continuer), and retained control (exact run,
//     result, event and cancellation identity) only with it, as the
//     contract requires.
//   - Retained native sessions and permission interactions are claimed for
//     adapters that run retained turns (harness.Retained): permissions
//     answered with the permission answer spec (a select grant and a text
//     feedback), for that interaction only, several at once where the
//     harness asks them so (harness.ConcurrentQuestioner),
//     replayed with the run's events, and idempotent per operation id;
//     interactions not for an adapter that declines them
//     (harness.QuestionClaimer).
//   - Native continuation (POST /v1/sessions/:id/continue) is claimed for
//     retained adapters that declare it proven (harness.NativeContinuer).
//   - Placement is claimed, as the TypeScript bridge claims it: a bridge
//     knows where it runs (the host it was started on, inside its box)
//     and every environment over it can say so.
//   - Workspace branching is claimed in full for every harness: a
//     checkpoint of an ended run's workspace and a fork of a checkpoint,
//     each keyed and digest-bound, looked up by key, and cleaned up with
//     confirmation (POST /v1/workspace/...).
//   - Exact process environments are claimed by the capabilities route
//     where the jail runs (the document is the same for every harness
//     but for that): egress blocked only.
//   - Agent profile materialisation, workspace file operations and
//     confidential execution are not implemented, so not claimed.
func Capabilities(a harness.Adapter) wire.Capabilities {
	c := wire.Capabilities{
		Streaming: wire.StreamingCaps{Live: true, Replay: true, Detach: true, TurnIdempotency: true},
		Usage:     true,
		Placement: true,
		Branching: wire.BranchingCaps{Checkpoint: true, Fork: true, RetrySafe: true, Lookup: true, Cleanup: true},
		// The bridge names the runs, sessions and executions it serves, their
		// lifecycle, where they run and their measured model usage; the
		// caller knows the endpoint it reached. What the compute is and
		// what it costs are known only to whoever provisioned it.
		Observation: &wire.ObservationCaps{Identity: true, Lifecycle: true, Endpoint: true, Placement: true, ModelUsage: true},
	}
	if cont, ok := a.(harness.Continuer); ok && cont.ContinuesSessions() {
		c.Sessions.Continue = true
		c.RetainedControl = &wire.RetainedControlCaps{ExactRunIdentity: true, ResultIdentity: true, EventIdentity: true,
			CancellationIdempotency: true}
	}
	if _, ok := a.(harness.Retained); ok && c.RetainedControl != nil {
		c.Sessions.List = true     // GET /v1/sessions
		c.Sessions.Messages = true // GET /v1/sessions/:id/transcript
		if continuation.Native(a) {
			c.NativeContinuation = &wire.NativeContinuationCaps{AtomicBoundary: true, RequestIdempotency: true}
		}
	}
	if _, ok := a.(harness.Retained); ok && c.RetainedControl != nil && claimsInteractions(a) {
		fields := []string{wire.FieldSelect}
		if fr, ok := a.(harness.FeedbackRelayer); ok && fr.RelaysFeedback() {
			fields = append(fields, wire.FieldText)
		}
		c.Interactions = &wire.InteractionCaps{
			Kinds:               []string{wire.InteractionKindPermission},
			AnswerFieldTypes:    fields,
			ResponseScopes:      []string{wire.ScopeInteraction},
			Replay:              true,
			ResponseIdempotency: true,
		}
		if cq, ok := a.(harness.ConcurrentQuestioner); ok {
			c.Interactions.ConcurrentRequests = cq.ConcurrentQuestions()
		}
	}
	return c
}

// claimsInteractions reports whether interactions are claimed for a
// retained adapter: unless it declines them.
func claimsInteractions(a harness.Adapter) bool {
	qc, ok := a.(harness.QuestionClaimer)
	return !ok || qc.ClaimsInteractions()
}
