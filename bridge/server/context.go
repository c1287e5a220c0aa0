package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/portable"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Portable contexts (package portable): a plan with no effect, and the
// transfer of an accepted plan into one fresh retained session whose first
// run carries the conversation.

// contextCounts are the figures of the portable context routes that GET
// /metrics reports: plans made, transfers admitted and the fresh sessions
// they created.
type contextCounts struct {
	plans, transfers, sessions atomic.Int64
}

func (s *Server) planContext(w http.ResponseWriter, r *http.Request) {
	var req wire.ContextPlanRequest
	if _, ok := s.readJSON(w, r, &req, "request"); !ok {
		return
	}
	res, err := portable.Plan(req)
	if err == nil {
		s.counts.plans.Add(1)
	}
	s.writeResult(w, http.StatusOK, res, err)
}

func (s *Server) transferContext(w http.ResponseWriter, r *http.Request) {
	var req wire.ContextTransferRequest
	if _, ok := s.readJSON(w, r, &req, "request"); !ok {
		return
	}
	res, err := portable.Transfer(r.Context(), s.opts.Engine.Store(), req, s.admitTransfer)
	if res.SessionCreated {
		s.counts.sessions.Add(1)
	}
	switch {
	case err != nil:
		s.writeFailure(w, err)
	case res.Conflict != nil:
		writeJSON(w, http.StatusConflict, res.Conflict)
	case res.Receipt.Status == wire.TransferOK:
		s.counts.transfers.Add(1)
		writeJSON(w, http.StatusCreated, res.Receipt)
	default:
		writeJSON(w, http.StatusOK, res.Receipt)
	}
}

// admitTransfer is the portable.Admit of this bridge: the destination
// session opened on a registered harness that keeps retained sessions,
// and its first turn admitted as any other.
func (s *Server) admitTransfer(ctx context.Context, runner string, create wire.SessionCreateRequest,
	turn wire.TurnRequest) (portable.Admission, error) {
	b, _, found := s.resolveModel(create.Model)
	if !found || !strings.EqualFold(b.Adapter.Name(), runner) {
		e := modelNotFound(create.Model)
		return portable.Admission{}, &e
	}
	if _, ok := b.Adapter.(harness.Retained); !ok {
		return portable.Admission{}, &wire.ErrorBody{Type: wire.TypeCapabilityDenied,
			Message: b.Adapter.Name() + " keeps no retained session a context can go to"}
	}
	var generic map[string]any
	json.Unmarshal(wire.MustJSON(create), &generic)
	digest, err := wire.Digest(generic)
	if err != nil {
		return portable.Admission{}, wire.Fault("digest session", err)
	}
	rs, created, err := s.opts.Engine.Store().CreateSession(ctx, store.RetainedSession{ID: create.ID, Harness: b.Adapter.Name(),
		Model: create.Model, Digest: digest, Request: wire.MustJSON(create), Policy: create.InteractionPolicy})
	if errors.Is(err, store.ErrConflict) {
		return portable.Admission{}, &wire.ErrorBody{Type: wire.TypeSessionConflict,
			Message: "destination session " + create.ID + " exists: a context goes only to a fresh session"}
	}
	if err != nil {
		return portable.Admission{}, wire.Fault("create session", err)
	}
	var turnObj map[string]any
	json.Unmarshal(wire.MustJSON(turn), &turnObj)
	run, err := s.startTurn(ctx, rs, turn, turnObj, false)
	if err != nil {
		return portable.Admission{Session: rs, Created: created}, s.turnError(rs, turn, err)
	}
	return portable.Admission{Session: rs, Created: created, Run: run}, nil
}
