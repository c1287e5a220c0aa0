package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// view is a retained session as the session routes return it: its own
// state, its activity and its latest run, as the TypeScript bridge derives
// them.
func (s *Server) view(ctx context.Context, rs store.RetainedSession) (wire.SessionView, error) {
	v := wire.SessionView{ID: rs.ID, Object: wire.SessionObject, Model: rs.Model, Backend: rs.Harness,
		CreateRequestDigest: rs.Digest, InteractionPolicy: rs.Policy, Closed: !rs.ClosedAt.IsZero(),
		Status: wire.SessionCreated, CreatedAt: rfc3339(rs.CreatedAt), UpdatedAt: rfc3339(rs.CreatedAt)}
	if rs.Boundary != nil {
		var p wire.BoundaryProof
		if json.Unmarshal(rs.Boundary, &p) == nil {
			v.ContextBoundary = &p
		}
	}
	st := s.opts.Engine.Store()
	a, err := st.SessionActivity(ctx, rs.ID)
	if err != nil {
		return v, err
	}
	v.Turns = a.CompletedTurns
	if !a.UpdatedAt.IsZero() {
		v.UpdatedAt = rfc3339(a.UpdatedAt)
	}
	if native, err := st.NativeSession(ctx, rs.ID, rs.Harness); err == nil {
		v.InternalSessionID = &native
	} else if !errors.Is(err, store.ErrNotFound) {
		return v, err
	}
	if a.LastRunID != "" {
		v.RunID = &a.LastRunID
		_, snap, err := s.loadRun(ctx, a.LastRunID)
		switch {
		case err == nil:
			v.Run = &snap
			v.Status = sessionStatus(snap.Status)
		case errors.Is(err, store.ErrNotFound):
			v.Status = wire.SessionUnknown
		default:
			return v, err
		}
	}
	if v.Closed {
		v.Status = wire.SessionClosed
	}
	return v, nil
}

// sessionStatus is the session status that goes with its latest run's
// status: a run that ended in error leaves the native session's state
// unknown.
func sessionStatus(run string) string {
	switch run {
	case wire.StatusRunning:
		return wire.SessionRunning
	case wire.StatusDone:
		return wire.SessionIdle
	case wire.StatusCancelled:
		return wire.SessionCancelled
	default:
		return wire.SessionUnknown
	}
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// writeView answers a session's view with status.
func (s *Server) writeView(w http.ResponseWriter, r *http.Request, status int, rs store.RetainedSession) {
	v, err := s.view(r.Context(), rs)
	if err != nil {
		s.log.Error("load session view", "session", rs.ID, "err", err)
		writeError(w, wire.TypeServerError, "load session")
		return
	}
	writeJSON(w, status, v)
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req wire.SessionCreateRequest
	generic, ok := s.readJSON(w, r, &req, "session request")
	if !ok {
		return
	}
	if req.ID == "" {
		req.ID = wire.NewID("ses_")
		generic["id"] = req.ID
	}
	if err := wire.ValidIdentifier(req.ID); err != nil {
		writeError(w, wire.TypeInvalidRequest, "id "+err.Error())
		return
	}
	if strings.TrimSpace(req.Model) == "" {
		writeError(w, wire.TypeInvalidRequest, "model is required")
		return
	}
	b, _, found := s.resolveModel(req.Model)
	if !found {
		writeErrorBody(w, modelNotFound(req.Model))
		return
	}
	if _, ok := b.Adapter.(harness.Retained); !ok {
		writeError(w, wire.TypeInvalidRequest, b.Adapter.Name()+" does not support retained native sessions")
		return
	}
	switch req.InteractionPolicy {
	case "":
		req.InteractionPolicy = wire.PolicyInteractive
	case wire.PolicyInteractive, wire.PolicyUnattendedDeny, wire.PolicyUnattendedAllow:
	default:
		writeError(w, wire.TypeInvalidRequest, fmt.Sprintf("interaction_policy %q is not one of interactive, unattended-deny, unattended-allow", req.InteractionPolicy))
		return
	}
	if req.Cwd != nil {
		if !filepath.IsAbs(*req.Cwd) {
			writeError(w, wire.TypeInvalidRequest, "cwd must be an absolute path")
			return
		}
		if fi, err := os.Stat(*req.Cwd); err != nil || !fi.IsDir() {
			writeError(w, wire.TypeInvalidRequest, "cwd "+*req.Cwd+" is not a directory")
			return
		}
	}
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			writeError(w, wire.TypeInvalidRequest, fmt.Sprintf("env name %q is invalid", k))
			return
		}
	}
	// The execution is refused before anything is created: a sandbox
	// always, a jail the host cannot enforce now.
	x, eb := parseExecution(req.Execution)
	if eb == nil {
		eb = s.admitSession(r.Context(), x, deref(req.Cwd))
	}
	if eb != nil {
		writeErrorBody(w, *eb)
		return
	}
	digest, err := wire.Digest(generic)
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	stored, err := json.Marshal(req)
	if err != nil {
		writeError(w, wire.TypeServerError, "encode session")
		return
	}
	rs, created, err := s.opts.Engine.Store().CreateSession(r.Context(), store.RetainedSession{ID: req.ID, Harness: b.Adapter.Name(),
		Model: req.Model, Digest: digest, Request: stored, Policy: req.InteractionPolicy})
	switch {
	case errors.Is(err, store.ErrConflict):
		writeError(w, wire.TypeSessionConflict, "session "+req.ID+" exists with a different create request")
	case err != nil:
		s.log.Error("create session", "session", req.ID, "err", err)
		writeError(w, wire.TypeServerError, "create session")
	case created:
		s.writeView(w, r, http.StatusCreated, rs)
	default:
		s.writeView(w, r, http.StatusOK, rs)
	}
}

// sessionOr404 loads the session of the path; it has answered when ok is
// false.
func (s *Server) sessionOr404(w http.ResponseWriter, r *http.Request) (store.RetainedSession, bool) {
	id := r.PathValue("id")
	if err := wire.ValidIdentifier(id); err != nil {
		writeError(w, wire.TypeInvalidRequest, "session id "+err.Error())
		return store.RetainedSession{}, false
	}
	rs, err := s.opts.Engine.Store().GetSession(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, wire.TypeNotFound, "session "+id+" not found")
		return rs, false
	}
	if err != nil {
		s.log.Error("load session", "session", id, "err", err)
		writeError(w, wire.TypeServerError, "load session")
		return rs, false
	}
	return rs, true
}

// sessionAndBody loads the session of the path and reads the request
// body; it has answered when ok is false.
func (s *Server) sessionAndBody(w http.ResponseWriter, r *http.Request) (store.RetainedSession, []byte, bool) {
	rs, ok := s.sessionOr404(w, r)
	if !ok {
		return rs, nil, false
	}
	body, ok := s.readBody(w, r)
	return rs, body, ok
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	all, err := s.opts.Engine.Store().ListSessions(r.Context())
	if err != nil {
		s.log.Error("list sessions", "err", err)
		writeError(w, wire.TypeServerError, "list sessions")
		return
	}
	out := wire.SessionList{Object: "list", Data: []wire.SessionView{}}
	for _, rs := range all {
		v, err := s.view(r.Context(), rs)
		if err != nil {
			s.log.Error("load session view", "session", rs.ID, "err", err)
			writeError(w, wire.TypeServerError, "list sessions")
			return
		}
		out.Data = append(out.Data, v)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	if rs, ok := s.sessionOr404(w, r); ok {
		s.writeView(w, r, http.StatusOK, rs)
	}
}

func (s *Server) postTurn(w http.ResponseWriter, r *http.Request) { s.admitTurn(w, r, false) }

// postInput answers POST /v1/sessions/:id/input: a turn that, unlike one
// of /turns, waits its turn while the session's run is live (see
// inputQueue).
func (s *Server) postInput(w http.ResponseWriter, r *http.Request) { s.admitTurn(w, r, true) }

// admitTurn admits a turn of the session of the path; queued, it waits
// for the session's live run to end first.
func (s *Server) admitTurn(w http.ResponseWriter, r *http.Request, queued bool) {
	rs, body, ok := s.sessionAndBody(w, r)
	if !ok {
		return
	}
	var req wire.TurnRequest
	generic, ok := decodeJSON(w, body, &req, "turn request")
	if !ok {
		return
	}
	if req.ExecutionID == "" && req.TurnID != "" {
		// As in the TypeScript bridge, the execution id defaults to the
		// turn id, and the turn's digest covers the id it runs under.
		req.ExecutionID, generic["execution_id"] = req.TurnID, req.TurnID
	}
	for _, f := range []struct{ name, v string }{{"turn_id", req.TurnID}, {"execution_id", req.ExecutionID}} {
		if err := wire.ValidIdentifier(f.v); err != nil {
			writeError(w, wire.TypeInvalidRequest, f.name+" "+err.Error())
			return
		}
	}
	if err := wire.ValidRunID(req.RunID); err != nil {
		writeError(w, wire.TypeInvalidRequest, "run_id: "+err.Error())
		return
	}
	for _, f := range []struct{ name, v string }{{"provider", req.Provider}, {"environment_id", req.EnvironmentID}} {
		if f.v == "" {
			continue
		}
		if err := wire.ValidIdentifier(f.v); err != nil {
			writeError(w, wire.TypeInvalidRequest, f.name+" "+err.Error())
			return
		}
	}
	prompt, err := req.Prompt()
	if err == nil && strings.TrimSpace(prompt) == "" {
		err = errors.New("message or text parts are required")
	}
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	if len(req.Interactions) > 0 && string(req.Interactions) != "null" {
		var kinds map[string]any
		if json.Unmarshal(req.Interactions, &kinds) != nil || kinds == nil {
			writeError(w, wire.TypeInvalidRequest, "interactions must be an object keyed by interaction kind")
			return
		}
		for k := range kinds {
			if k != "permission" {
				writeError(w, wire.TypeInvalidRequest, fmt.Sprintf("interaction kind %q is not supported (only permission)", k))
				return
			}
		}
	}
	run, err := s.startTurn(r.Context(), rs, req, generic, queued)
	if err != nil {
		s.writeFailure(w, s.turnError(rs, req, err))
		return
	}
	rs, err = s.opts.Engine.Store().GetSession(r.Context(), rs.ID)
	if err != nil {
		s.log.Error("load session", "session", rs.ID, "err", err)
		writeError(w, wire.TypeServerError, "load session")
		return
	}
	v, err := s.view(r.Context(), rs)
	if err != nil {
		s.log.Error("load session view", "session", rs.ID, "err", err)
		writeError(w, wire.TypeServerError, "load session")
		return
	}
	setRunHeaders(w, run)
	writeJSON(w, http.StatusAccepted, wire.TurnAdmission{Session: v, ContextBoundary: v.ContextBoundary,
		Run: wire.AdmittedRun{ID: run.ID, Provider: run.Provider, EnvironmentID: run.EnvironmentID,
			SessionID: run.SessionID, ExecutionID: run.ExecutionID, RequestDigest: run.Digest}})
}

// currentRun is the run of a session's last turn, if any.
func (s *Server) currentRun(r *http.Request, id string) (string, bool, error) {
	turns, err := s.opts.Engine.Store().Turns(r.Context(), id, 0)
	if err != nil || len(turns) == 0 {
		return "", false, err
	}
	return turns[len(turns)-1].RunID, true, nil
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	rs, ok := s.sessionOr404(w, r)
	if !ok {
		return
	}
	// The engine's prune closes idle sessions the same way.
	if err := s.opts.Engine.CloseSession(r.Context(), rs.ID); err != nil {
		s.log.Error("close session", "session", rs.ID, "err", err)
		writeError(w, wire.TypeServerError, "close session")
		return
	}
	s.stopSession(w, r, rs)
}

// stopSession cancels the live run of a session being closed, waits for
// it within wait_ms, and answers the session and its current run.
func (s *Server) stopSession(w http.ResponseWriter, r *http.Request, rs store.RetainedSession) {
	wait, err := parseWait(r, s.opts.CancelWait)
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	out := wire.SessionStop{Closed: true}
	runID, ok, err := s.currentRun(r, rs.ID)
	if err != nil {
		s.log.Error("load session turns", "session", rs.ID, "err", err)
		writeError(w, wire.TypeServerError, "load session")
		return
	}
	status := http.StatusOK
	if ok {
		requested, err := s.opts.Engine.Cancel(r.Context(), runID)
		if err != nil {
			s.log.Error("cancel run", "run", runID, "err", err)
			writeError(w, wire.TypeServerError, "cancel run")
			return
		}
		s.waitTerminal(r.Context(), runID, wait)
		_, snap, err := s.loadRun(r.Context(), runID)
		if err != nil {
			s.writeRunLookupError(w, runID, err)
			return
		}
		cancelled := snap.Status == wire.StatusCancelled
		out.CancelRequested, out.Cancelled, out.Terminal, out.Run = &requested, &cancelled, &snap.Terminal, &snap
		if !snap.Terminal {
			status = http.StatusAccepted
		}
	}
	if rs2, err := s.opts.Engine.Store().GetSession(r.Context(), rs.ID); err == nil {
		rs = rs2
	}
	v, err := s.view(r.Context(), rs)
	if err != nil {
		s.log.Error("load session view", "session", rs.ID, "err", err)
		writeError(w, wire.TypeServerError, "load session")
		return
	}
	out.Session = v
	writeJSON(w, status, out)
}

// startTurn admits a turn of a retained session: req is the turn as the
// turns route takes it and generic its JSON object, which the turn's
// digest covers. Queued, it first waits for the session's live run to end.
func (s *Server) startTurn(ctx context.Context, rs store.RetainedSession, req wire.TurnRequest, generic map[string]any,
	queued bool) (store.Run, error) {
	prompt, err := req.Prompt()
	if err == nil {
		err = wire.CheckHistory(req.History)
	}
	if err != nil {
		return store.Run{}, turnRefused(wire.ErrorBody{Type: wire.TypeInvalidRequest, Message: err.Error()})
	}
	if !rs.ClosedAt.IsZero() {
		return store.Run{}, store.ErrSessionClosed
	}
	b, bare, found := s.resolveModel(rs.Model)
	if !found {
		return store.Run{}, turnRefused(modelNotFound(rs.Model))
	}
	digest, err := wire.Digest(map[string]any{"schema": wire.RetainedTurnDigestSchema, "harness": b.Adapter.Name(),
		"session": rs.ID, "turn": generic})
	if err != nil {
		return store.Run{}, turnRefused(wire.ErrorBody{Type: wire.TypeInvalidRequest, Message: err.Error()})
	}
	var create wire.SessionCreateRequest
	if err := json.Unmarshal(rs.Request, &create); err != nil {
		return store.Run{}, fmt.Errorf("decode stored session %s: %w", rs.ID, err)
	}
	cwd := ""
	if create.Cwd != nil {
		cwd = *create.Cwd
	}
	// Each turn runs confined as the session asked, or not at all.
	x, eb := parseExecution(create.Execution)
	if eb == nil {
		eb = s.admitSession(ctx, x, cwd)
	}
	if eb != nil {
		return store.Run{}, turnRefused(*eb)
	}
	tr := engine.TurnRequest{
		Turn:  store.Turn{SessionID: rs.ID, TurnID: req.TurnID, Digest: digest},
		RunID: req.RunID, Digest: digest, Provider: req.Provider, EnvironmentID: req.EnvironmentID, ExecutionID: req.ExecutionID,
		Backend: b, Model: bare, ModelID: rs.Model, Prompt: prompt, History: req.History, Cwd: cwd, Env: create.Env, Policy: rs.Policy,
		Confine: x.confine, Timeout: x.timeout,
		Boundary: engine.RevisionBoundary(wire.RunRef{RunID: req.RunID, Provider: req.Provider, EnvironmentID: req.EnvironmentID,
			SessionID: rs.ID, ExecutionID: req.ExecutionID, RequestDigest: digest}, time.Now()),
	}
	var run store.Run
	if queued {
		run, err = s.admitQueued(ctx, tr)
	} else {
		_, run, _, err = s.opts.Engine.AdmitTurn(ctx, tr)
	}
	return run, err
}

// turnRefusal is a turn refused before admission, with the error it is
// answered with.
type turnRefusal struct{ body wire.ErrorBody }

func (e *turnRefusal) Error() string { return e.body.Type + ": " + e.body.Message }

func turnRefused(b wire.ErrorBody) error { return &turnRefusal{b} }

// turnError is the answer to an error of startTurn.
func (s *Server) turnError(rs store.RetainedSession, req wire.TurnRequest, err error) error {
	var refusal *turnRefusal
	fail := func(typ, msg string) error { return &wire.ErrorBody{Type: typ, Message: msg} }
	switch {
	case errors.As(err, &refusal):
		e := refusal.body
		return &e
	case errors.Is(err, errQueueFull):
		return fail(wire.TypeInputQueueFull, fmt.Sprintf("%d inputs already wait for session %s", s.opts.InputQueueDepth, rs.ID))
	case errors.Is(err, errQueueTimeout):
		return fail(wire.TypeInputQueueTimeout, fmt.Sprintf("the run of session %s did not end within %s", rs.ID, s.opts.InputQueueTimeout))
	case errors.Is(err, engine.ErrTurnConflict):
		return fail(wire.TypeTurnConflict, "turn "+req.TurnID+" or run "+req.RunID+" is bound to a different turn")
	case errors.Is(err, engine.ErrSessionBusy):
		return fail(wire.TypeSessionBusy, "session "+rs.ID+" has a live run")
	case errors.Is(err, store.ErrSessionClosed):
		return fail(wire.TypeSessionClosed, "session "+rs.ID+" is closed")
	case errors.Is(err, store.ErrNotFound):
		return fail(wire.TypeNotFound, "session "+rs.ID+" not found")
	case errors.Is(err, engine.ErrSaturated):
		return fail(wire.TypeExecutorSaturated, "too many concurrent runs")
	default:
		return wire.Fault("admit turn", fmt.Errorf("session %s: %w", rs.ID, err))
	}
}
