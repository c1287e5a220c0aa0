package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// nativeSession is a retained native session this environment created on
// the bridge (POST /v1/sessions). Concurrent first turns share one create.
type nativeSession struct {
	once   sync.Once
	done   chan struct{}
	view   wire.SessionView
	digest string
	err    error
}

// ensureNative creates (or recovers) the retained session of r once.
func (e *Environment) ensureNative(ctx context.Context, op string, r *run) (*nativeSession, error) {
	ref := r.controlRef()
	e.mu.Lock()
	ns := e.natives[ref.SessionID]
	if ns == nil {
		ns = &nativeSession{done: make(chan struct{})}
		e.natives[ref.SessionID] = ns
	}
	e.mu.Unlock()
	ns.once.Do(func() {
		defer close(ns.done)
		ns.view, ns.digest, ns.err = e.createNative(ctx, op, ref.SessionID, r.model)
		if ns.err != nil {
			e.mu.Lock()
			if e.natives[ref.SessionID] == ns {
				delete(e.natives, ref.SessionID)
			}
			e.mu.Unlock()
		}
	})
	select {
	case <-ns.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", op, context.Cause(ctx))
	}
	if ns.err != nil {
		return nil, ns.err
	}
	if ns.view.Model != r.model {
		return nil, fmt.Errorf("%s: cli-bridge retained session %q cannot change model from %q to %q", op, ns.view.ID, ns.view.Model, r.model)
	}
	return ns, nil
}

func (e *Environment) createNative(ctx context.Context, op, sessionID, model string) (wire.SessionView, string, error) {
	opts := e.p.c.opts
	ex := execution(opts, &e.req)
	if ex != nil && ex.Kind == ExecutionSandbox {
		return wire.SessionView{}, "", fmt.Errorf("%s: cli-bridge retained sessions cannot execute in a sandbox; use one-shot execution", op)
	}
	body := wire.SessionCreateRequest{ID: sessionID, Model: model, InteractionPolicy: wire.PolicyInteractive, Env: e.req.Env, Metadata: e.req.Metadata}
	if w := e.req.Workspace; w != nil && w.Cwd != "" {
		body.Cwd = &w.Cwd
	}
	var err error
	if ex != nil {
		if body.Execution, err = json.Marshal(ex); err != nil {
			return wire.SessionView{}, "", err
		}
	}
	if body.AgentProfile, err = json.Marshal(e.req.Profile); err != nil {
		return wire.SessionView{}, "", err
	}
	digest, err := wire.Digest(body)
	if err != nil {
		return wire.SessionView{}, "", err
	}
	_, _, data, err := e.p.c.call(ctx, op, http.MethodPost, "/v1/sessions", body, maxControlBytes, nil)
	var conflict *ConflictError
	if errors.As(err, &conflict) {
		// The session exists: recover it, and accept it only if it is ours.
		_, _, data, err = e.p.c.call(ctx, op, http.MethodGet, "/v1/sessions/"+url.PathEscape(sessionID), nil, maxControlBytes, nil)
	}
	if err != nil {
		return wire.SessionView{}, "", err
	}
	var view wire.SessionView
	if err := json.Unmarshal(data, &view); err != nil || view.ID == "" || view.Model == "" || !digestPattern.MatchString(view.CreateRequestDigest) {
		return wire.SessionView{}, "", &ProtocolError{Op: op, Reason: "cli-bridge retained session returned an invalid session view"}
	}
	switch {
	case view.ID != sessionID:
		return view, "", &IdentityMismatchError{Op: op, Reason: fmt.Sprintf("cli-bridge returned session %q for requested session %q", view.ID, sessionID)}
	case view.Model != model:
		return view, "", &IdentityMismatchError{Op: op, Reason: fmt.Sprintf("cli-bridge retained session %q is bound to model %q", sessionID, view.Model)}
	case view.CreateRequestDigest != digest:
		return view, "", &IdentityMismatchError{Op: op, Reason: fmt.Sprintf("cli-bridge retained session %q has a different creation request digest", sessionID)}
	}
	return view, digest, nil
}

// beginNative admits a turn through POST /v1/sessions/:id/turns and binds
// the bridge's digest to the run.
func (e *Environment) beginNative(ctx context.Context, op string, r *run, turn *Turn, res *streamResult) error {
	ns, err := e.ensureNative(ctx, op, r)
	if err != nil {
		res.rejected = true // no turn was sent
		return err
	}
	ref := r.controlRef()
	body := wire.TurnRequest{Message: turn.Prompt, TurnID: r.turnID, ExecutionID: ref.ExecutionID, RunID: ref.RunID,
		Provider: ref.Provider, EnvironmentID: ref.EnvironmentID, Context: turn.Context, ProviderOptions: turn.ProviderOptions}
	if len(turn.Parts) > 0 {
		if body.Parts, err = json.Marshal(turn.Parts); err != nil {
			return err
		}
	} else if turn.Prompt == "" {
		res.rejected = true
		return fmt.Errorf("%s: cli-bridge retained sessions require a non-empty message or input parts", op)
	}
	if turn.Interactions != nil {
		if body.Interactions, err = json.Marshal(turn.Interactions); err != nil {
			return err
		}
	}
	body.History = turn.History
	status, _, data, err := e.p.c.call(ctx, op, http.MethodPost, "/v1/sessions/"+url.PathEscape(ref.SessionID)+"/turns", body, maxControlBytes, nil)
	if err != nil {
		res.rejected = status != 0
		return err
	}
	res.admitted = true
	var adm wire.TurnAdmission
	if err := json.Unmarshal(data, &adm); err != nil {
		return &ProtocolError{Op: op, Reason: "cli-bridge retained turn returned invalid JSON"}
	}
	got := adm.Run
	if adm.Session.ID != ref.SessionID || adm.Session.Model != ns.view.Model || adm.Session.CreateRequestDigest != ns.digest ||
		got.ID != ref.RunID || got.SessionID != ref.SessionID || got.ExecutionID != ref.ExecutionID ||
		got.Provider != ref.Provider || got.EnvironmentID != ref.EnvironmentID || !digestPattern.MatchString(got.RequestDigest) {
		return &IdentityMismatchError{Op: op, Reason: "cli-bridge retained turn returned mismatched run coordinates"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ref.RequestDigest != "" && r.ref.RequestDigest != got.RequestDigest {
		return &IdentityMismatchError{Op: op, Reason: "cli-bridge retained turn changed the admitted request digest"}
	}
	r.ref.RequestDigest = got.RequestDigest
	r.native = true
	return nil
}

// ContextBoundary reads the bridge-owned context boundary of the current
// run's session; nil means no turn was admitted yet. It needs native
// continuation.
func (s *Session) ContextBoundary(ctx context.Context) (*wire.BoundaryProof, error) {
	const op = "session.ContextBoundary"
	if !s.e.caps.NativeContinuationProven() {
		return nil, fmt.Errorf("%s: %w: nativeContinuation", op, errors.ErrUnsupported)
	}
	r, err := s.requireRun()
	if err != nil {
		return nil, err
	}
	ref := r.controlRef()
	_, _, data, err := s.e.p.c.call(ctx, op, http.MethodGet, "/v1/sessions/"+url.PathEscape(ref.SessionID), nil, 1<<20, nil)
	if err != nil {
		return nil, err
	}
	var view wire.SessionView
	if err := json.Unmarshal(data, &view); err != nil {
		return nil, &ProtocolError{Op: op, Reason: "cli-bridge native session boundary response is not a JSON object"}
	}
	if view.ID != "" && view.ID != ref.SessionID {
		return nil, &IdentityMismatchError{Op: op, Reason: "cli-bridge native session boundary response targets another session"}
	}
	if view.ContextBoundary == nil {
		return nil, nil
	}
	if !proofBinds(view.ContextBoundary, ref) {
		return nil, &IdentityMismatchError{Op: op, Reason: "cli-bridge native session boundary does not bind to the retained run"}
	}
	return view.ContextBoundary, nil
}

func proofBinds(p *wire.BoundaryProof, ref ControlRef) bool {
	return p.RunID == ref.RunID && p.Provider == ref.Provider && p.EnvironmentID == ref.EnvironmentID &&
		p.SessionID == ref.SessionID && p.ExecutionID == ref.ExecutionID && p.RequestDigest == ref.RequestDigest
}

// observedBefore reports whether RFC 3339 time a is before b; an
// unreadable a is.
func observedBefore(a, b string) bool {
	ta, err := time.Parse(time.RFC3339Nano, a)
	if err != nil {
		return true
	}
	tb, err := time.Parse(time.RFC3339Nano, b)
	return err == nil && ta.Before(tb)
}

// NewContinuationRequest builds the digest-bound request of a native
// continuation of run at boundary, for turn.
func NewContinuationRequest(operationID string, run ControlRef, boundary wire.BoundaryProof, turn wire.ContinuationTurn) (wire.ContinuationRequest, error) {
	if err := wire.ValidIdentifier(operationID); err != nil {
		return wire.ContinuationRequest{}, fmt.Errorf("continuation operation id %w", err)
	}
	if err := run.Validate(); err != nil {
		return wire.ContinuationRequest{}, err
	}
	if !proofBinds(&boundary, run) {
		return wire.ContinuationRequest{}, errors.New("boundary proof must match the continued run")
	}
	turnDigest, err := wire.ContinuationTurnDigest(turn)
	if err != nil {
		return wire.ContinuationRequest{}, err
	}
	req := wire.ContinuationRequest{OperationID: operationID, TurnDigest: turnDigest, Run: run.wire(), ExpectedBoundary: boundary}
	req.RequestDigest, err = wire.ContinuationRequestDigest(req)
	return req, err
}

// ContinueNative adds a turn to the session's retained native conversation
// after a restart: the bridge admits it only if the session's context
// boundary still equals request.ExpectedBoundary, and a repeated request id
// gets the same outcome. Non-accepted outcomes (conflict,
// boundary_mismatch, unverified, unknown_session, transport_failure) are
// returned as values, not errors. On acceptance the session moves to the
// new run.
func (s *Session) ContinueNative(ctx context.Context, request wire.ContinuationRequest, turn wire.ContinuationTurn) (*wire.ContinuationOutcome, error) {
	const op = "session.ContinueNative"
	if s.e.p.c.bg.isClosed() {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	if !s.e.caps.NativeContinuationProven() {
		return nil, fmt.Errorf("%s: %w: nativeContinuation", op, errors.ErrUnsupported)
	}
	r, err := s.requireRun()
	if err != nil {
		return nil, err
	}
	cur := r.controlRef()
	if wire.RunRef(cur) != request.Run {
		return nil, &IdentityMismatchError{Op: op, Reason: "cli-bridge native continuation targets another retained run"}
	}
	want, err := NewContinuationRequest(request.OperationID, cur, request.ExpectedBoundary, turn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if want.TurnDigest != request.TurnDigest {
		return nil, fmt.Errorf("%s: cli-bridge native continuation turn does not match its request digest", op)
	}
	if want.RequestDigest != request.RequestDigest {
		return nil, fmt.Errorf("%s: native continuation request digest does not match its content", op)
	}
	path := "/v1/sessions/" + url.PathEscape(cur.SessionID) + "/continue"
	status, _, data, err := s.e.p.c.call(ctx, op, http.MethodPost, path, wire.ContinueBody{Request: request, Turn: turn}, 1<<20, func(int) bool { return true })
	if err != nil {
		return nil, err
	}
	var out wire.ContinuationOutcome
	if err := json.Unmarshal(data, &out); err != nil || out.Acknowledgement.Status == "" {
		return nil, &ProtocolError{Op: op, Reason: "cli-bridge native continuation returned an invalid result"}
	}
	ack := out.Acknowledgement
	if ack.OperationID != request.OperationID || ack.RequestDigest != request.RequestDigest || ack.HistoryMessagesSent != 0 {
		return nil, &IdentityMismatchError{Op: op, Reason: "cli-bridge native continuation acknowledgement is not bound to the request"}
	}
	if ack.ActualBoundary != nil && !proofBinds(ack.ActualBoundary, cur) {
		return nil, &IdentityMismatchError{Op: op, Reason: "cli-bridge native session boundary does not bind to the retained run"}
	}
	if ack.Status != wire.ContinuationAccepted && ack.Status != wire.ContinuationReplayed {
		return &out, nil
	}
	if status < 200 || status > 299 {
		return nil, &ProtocolError{Op: op, Reason: fmt.Sprintf("cli-bridge native continuation returned HTTP %d for an accepted result", status)}
	}
	// As the agent interface requires: an accepted continuation shows the
	// boundary it was admitted at, the expected one, observed no earlier.
	if a := ack.ActualBoundary; a == nil || !reflect.DeepEqual(a.Boundary, request.ExpectedBoundary.Boundary) ||
		observedBefore(a.ObservedAt, request.ExpectedBoundary.ObservedAt) {
		return nil, &ProtocolError{Op: op, Reason: "cli-bridge native continuation was accepted without the observed boundary"}
	}
	if out.ControlRef == nil || out.Result == nil {
		return nil, &ProtocolError{Op: op, Reason: "cli-bridge native continuation omitted its current control reference"}
	}
	next := ControlRef(*out.ControlRef)
	if next.Provider != cur.Provider || next.EnvironmentID != cur.EnvironmentID || next.SessionID != cur.SessionID || next.Validate() != nil {
		return nil, &IdentityMismatchError{Op: op, Reason: "cli-bridge native continuation returned a run for another session"}
	}
	s.e.mu.Lock()
	if other := s.e.runs[next.RunID]; other != nil && other != r {
		s.e.mu.Unlock()
		return nil, &IdentityMismatchError{Op: op, Reason: "cli-bridge native continuation returned a run already owned by another session"}
	}
	s.e.sessions[s.id] = &run{ref: next, turnID: next.ExecutionID, model: r.model, native: true}
	s.e.mu.Unlock()
	return &out, nil
}

// NewInteractionCommand builds the digest-bound command answering the
// interaction request req (Event.Interaction) with response, whose ID is
// set to the request's. A permission is granted with outcome accepted and
// data {"grant":["allow_once"]} (PermissionGrant), refused with declined.
func NewInteractionCommand(operationID string, req wire.InteractionRequest, response wire.InteractionResponse) (wire.InteractionCommand, error) {
	if err := wire.ValidIdentifier(operationID); err != nil {
		return wire.InteractionCommand{}, fmt.Errorf("interaction operation id %w", err)
	}
	if err := wire.ValidIdentifier(req.ID); err != nil {
		return wire.InteractionCommand{}, fmt.Errorf("interaction id %w", err)
	}
	response.ID = req.ID
	b := req.ResponseBinding()
	d, err := wire.InteractionCommandDigest(b, response)
	if err != nil {
		return wire.InteractionCommand{}, err
	}
	return wire.InteractionCommand{OperationID: operationID, Binding: b, CommandDigest: d, Response: response}, nil
}

// PermissionGrant is the data of an accepted permission response granting
// grant (wire.GrantAllowOnce or wire.GrantDeny).
func PermissionGrant(grant string) json.RawMessage {
	b, _ := json.Marshal(map[string][]string{wire.PermissionGrantField: {grant}})
	return b
}

// RespondToInteraction sends a retry-safe interaction response. The
// outcome is the acknowledgement's status; a failure to get one is an
// acknowledgement with status transport_failure and Retryable true, never
// a reported acceptance. It needs interaction support.
func (s *Session) RespondToInteraction(ctx context.Context, cmd wire.InteractionCommand) (wire.InteractionAck, error) {
	const op = "session.RespondToInteraction"
	if !s.e.caps.InteractionsProven() {
		return wire.InteractionAck{}, fmt.Errorf("%s: %w: interactions", op, errors.ErrUnsupported)
	}
	ack := wire.InteractionAck{OperationID: cmd.OperationID, Binding: cmd.Binding, CommandDigest: cmd.CommandDigest}
	b := cmd.Binding
	if b.Provider != s.e.p.Name() || b.EnvironmentID != s.e.id || b.SessionID != s.id {
		ack.Status, ack.Message = wire.InteractionBindingMismatch, "interaction response does not use this cli-bridge environment binding"
		return ack, nil
	}
	if d, err := wire.InteractionCommandDigest(b, cmd.Response); err != nil || d != cmd.CommandDigest || b.InteractionID != cmd.Response.ID {
		return wire.InteractionAck{}, fmt.Errorf("%s: interaction response command digest does not match its content", op)
	}
	path := "/v1/runs/" + url.PathEscape(b.RunID) + "/interactions/" + url.PathEscape(b.InteractionID) + "/respond"
	status, _, data, err := s.e.p.c.call(ctx, op, http.MethodPost, path, cmd, maxControlBytes, func(int) bool { return true })
	failure := func(cause string, retryable bool) (wire.InteractionAck, error) {
		ack.Status, ack.Message, ack.Retryable = wire.InteractionTransportFailure, "cli-bridge did not confirm the interaction response: "+cause, &retryable
		return ack, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return wire.InteractionAck{}, err
		}
		return failure(err.Error(), true)
	}
	var got wire.InteractionAck
	if err := json.Unmarshal(data, &got); err != nil || got.Status == "" {
		return failure("invalid acknowledgement", status >= 500 || status < 300)
	}
	if got.OperationID != cmd.OperationID || got.CommandDigest != cmd.CommandDigest || got.Binding != cmd.Binding {
		return wire.InteractionAck{}, &IdentityMismatchError{Op: op, Reason: "cli-bridge returned an interaction acknowledgement for another operation"}
	}
	if status != wire.InteractionHTTPStatus(got.Status) && (status != http.StatusTooManyRequests || got.Status != wire.InteractionTransportFailure || got.Retryable == nil || !*got.Retryable) {
		return wire.InteractionAck{}, &ProtocolError{Op: op, Reason: fmt.Sprintf("cli-bridge interaction acknowledgement status %q contradicts HTTP %d", got.Status, status)}
	}
	if status >= 400 && status < 500 && got.Retryable == nil {
		no := false
		got.Retryable = &no
	}
	return got, nil
}
