package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// continuationDigestSchema names the canonical form hashed into the
// request digest of the run a native continuation starts.
const continuationDigestSchema = "box-bridge.native-continuation.v1"

// continuesNatively reports whether native continuation is claimed and
// served for a: a retained adapter that declares it proven.
func continuesNatively(a harness.Adapter) bool {
	_, retained := a.(harness.Retained)
	nc, ok := a.(harness.NativeContinuer)
	return retained && ok && nc.ContinuesNatively()
}

// claimsInteractions reports whether interactions are claimed for a
// retained adapter: unless it declines them.
func claimsInteractions(a harness.Adapter) bool {
	qc, ok := a.(harness.QuestionClaimer)
	return !ok || qc.ClaimsInteractions()
}

// continuationHTTPStatus is the HTTP status that goes with a continuation
// acknowledgement status.
func continuationHTTPStatus(status string) int {
	switch status {
	case wire.ContinuationAccepted, wire.ContinuationReplayed:
		return http.StatusOK
	case wire.ContinuationConflict, wire.ContinuationBoundaryMismatch:
		return http.StatusConflict
	case wire.ContinuationUnverified:
		return http.StatusUnprocessableEntity
	case wire.ContinuationUnknownSession:
		return http.StatusNotFound
	default:
		return http.StatusServiceUnavailable
	}
}

// sameBoundary reports whether two boundary proofs name the same
// conversation state of the same run; when each was observed does not
// matter.
func sameBoundary(a, b wire.BoundaryProof) bool {
	a.ObservedAt, b.ObservedAt = "", ""
	return reflect.DeepEqual(a, b)
}

// bindsRun reports whether a boundary proof belongs to run.
func bindsRun(p wire.BoundaryProof, run wire.RunRef) bool {
	return p.RunID == run.RunID && p.Provider == run.Provider && p.EnvironmentID == run.EnvironmentID &&
		p.SessionID == run.SessionID && p.ExecutionID == run.ExecutionID && p.RequestDigest == run.RequestDigest
}

// continuationAnswer builds and writes continuation outcomes for one
// request.
type continuationAnswer struct {
	w   http.ResponseWriter
	req wire.ContinuationRequest
}

func (a continuationAnswer) outcome(status, msg string, retryable *bool) wire.ContinuationOutcome {
	return wire.ContinuationOutcome{Acknowledgement: wire.ContinuationAck{OperationID: a.req.OperationID,
		RequestDigest: a.req.RequestDigest, Status: status, Message: msg, Retryable: retryable}}
}

func (a continuationAnswer) write(status, msg string, retryable bool) {
	writeJSON(a.w, continuationHTTPStatus(status), a.outcome(status, msg, &retryable))
}

func (a continuationAnswer) raw(httpStatus int, body []byte) {
	a.w.Header().Set("Content-Type", "application/json")
	a.w.WriteHeader(httpStatus)
	a.w.Write(body)
}

// continueSession answers POST /v1/sessions/:id/continue: native
// continuation. The turn is admitted only if the session's context
// boundary still equals the request's expected boundary, checked in the
// transaction that admits it; the outcome is recorded under the request's
// operation id, and the operation repeated with the same request digest
// gets the recorded outcome (with another digest, conflict). An accepted
// continuation is answered once its run is terminal, with the turn's
// result and the run's control reference.
func (s *Server) continueSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := wire.ValidIdentifier(id); err != nil {
		writeError(w, wire.TypeInvalidRequest, "session id "+err.Error())
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var in wire.ContinueBody
	if _, err := decodeStrict(body, &in); err != nil {
		writeError(w, wire.TypeInvalidRequest, "invalid continuation request: "+err.Error())
		return
	}
	req := in.Request
	if err := wire.ValidIdentifier(req.OperationID); err != nil {
		writeError(w, wire.TypeInvalidRequest, "request.operationId "+err.Error())
		return
	}
	ans := continuationAnswer{w: w, req: req}
	st := s.opts.Engine.Store()
	rs, err := st.GetSession(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		ans.write(wire.ContinuationUnknownSession, "session "+id+" not found", false)
		return
	}
	if err != nil {
		s.log.Error("load session", "session", id, "err", err)
		ans.write(wire.ContinuationTransportFailure, "the bridge could not load the session", true)
		return
	}
	if c, err := st.GetContinuation(r.Context(), req.OperationID); err == nil {
		s.answerRecorded(r.Context(), ans, c, true)
		return
	} else if !errors.Is(err, store.ErrNotFound) {
		s.log.Error("load continuation", "operation", req.OperationID, "err", err)
		ans.write(wire.ContinuationTransportFailure, "the bridge could not load the operation", true)
		return
	}
	tr, msg := s.continuationTurn(rs, in)
	if msg != "" {
		ans.write(wire.ContinuationUnverified, msg, false)
		return
	}
	// A jail the host cannot enforce now leaves the turn unverified, as a
	// capability the TypeScript bridge denies does.
	if e := s.checkJail(r.Context(), execution{confine: tr.Confine}, tr.Cwd); e != nil {
		ans.write(wire.ContinuationUnverified, e.Type+": "+e.Message, false)
		return
	}
	check := func(cur store.RetainedSession) *store.Rejection {
		if !cur.ClosedAt.IsZero() {
			o := ans.outcome(wire.ContinuationConflict, "session "+id+" is closed", new(bool))
			return &store.Rejection{HTTPStatus: continuationHTTPStatus(wire.ContinuationConflict), Body: mustJSON(o)}
		}
		var actual wire.BoundaryProof
		if cur.Boundary != nil && json.Unmarshal(cur.Boundary, &actual) == nil && sameBoundary(actual, req.ExpectedBoundary) {
			return nil
		}
		// As the TypeScript bridge answers: a session with no boundary
		// cannot be verified; one that moved on to another run is bound
		// to another request (conflict); one whose boundary changed within
		// the run is a mismatch that shows the boundary it has.
		switch {
		case cur.Boundary == nil || json.Unmarshal(cur.Boundary, &actual) != nil:
			o := ans.outcome(wire.ContinuationUnverified, "the session has no verified context boundary: no turn was admitted", new(bool))
			return &store.Rejection{HTTPStatus: continuationHTTPStatus(wire.ContinuationUnverified), Body: mustJSON(o)}
		case !bindsRun(actual, req.Run):
			o := ans.outcome(wire.ContinuationConflict, "the session moved on to run "+actual.RunID, new(bool))
			o.Acknowledgement.ExistingRequestDigest = differentDigest(req.RequestDigest, actual.RequestDigest)
			return &store.Rejection{HTTPStatus: continuationHTTPStatus(wire.ContinuationConflict), Body: mustJSON(o), Final: true}
		}
		o := ans.outcome(wire.ContinuationBoundaryMismatch, "the session's context boundary is not the expected one", new(bool))
		o.Acknowledgement.ActualBoundary = &actual
		return &store.Rejection{HTTPStatus: continuationHTTPStatus(wire.ContinuationBoundaryMismatch), Body: mustJSON(o), Final: true}
	}
	c, run, err := s.opts.Engine.AdmitContinuation(r.Context(), tr,
		store.Continuation{OperationID: req.OperationID, SessionID: id, RequestDigest: req.RequestDigest}, check)
	switch {
	case errors.Is(err, store.ErrContinuationExists):
		s.answerRecorded(r.Context(), ans, c, true)
	case errors.Is(err, store.ErrContinuationRejected):
		ans.raw(c.HTTPStatus, c.Body)
	case errors.Is(err, store.ErrNotFound):
		ans.write(wire.ContinuationUnknownSession, "session "+id+" not found", false)
	case errors.Is(err, engine.ErrSessionBusy):
		ans.write(wire.ContinuationConflict, "session "+id+" has a live run", true)
	case errors.Is(err, engine.ErrTurnConflict):
		ans.write(wire.ContinuationConflict, "run or turn id "+req.OperationID+" is bound to another request", false)
	case errors.Is(err, engine.ErrSaturated):
		w.Header().Set(wire.HeaderRetryAfter, "1")
		ans.write(wire.ContinuationTransportFailure, "too many concurrent runs", true)
	case err != nil:
		s.log.Error("admit continuation", "session", id, "operation", req.OperationID, "err", err)
		ans.write(wire.ContinuationTransportFailure, "the bridge could not admit the turn", true)
	default:
		s.counts.continuations.Add(1)
		s.answerRecorded(r.Context(), ans, store.Continuation{OperationID: c.OperationID, SessionID: id,
			RequestDigest: req.RequestDigest, RunID: run.ID}, false)
	}
}

// continuationTurn checks a continuation against the session and builds
// its turn; msg says why it cannot be verified.
func (s *Server) continuationTurn(rs store.RetainedSession, in wire.ContinueBody) (_ engine.TurnRequest, msg string) {
	req := in.Request
	b, bare, found := s.resolveModel(rs.Model)
	if !found {
		return engine.TurnRequest{}, fmt.Sprintf("model %q names no registered harness", rs.Model)
	}
	if !continuesNatively(b.Adapter) {
		return engine.TurnRequest{}, b.Adapter.Name() + " does not offer native continuation"
	}
	turnDigest, err := wire.ContinuationTurnDigest(in.Turn)
	if err != nil || turnDigest != req.TurnDigest {
		return engine.TurnRequest{}, "request.turnDigest does not match the turn"
	}
	d, err := wire.ContinuationRequestDigest(req)
	if err != nil || d != req.RequestDigest {
		return engine.TurnRequest{}, "request.requestDigest does not match the request"
	}
	switch {
	case req.Run.SessionID != rs.ID:
		return engine.TurnRequest{}, "request.run names session " + req.Run.SessionID + ", not " + rs.ID
	case !bindsRun(req.ExpectedBoundary, req.Run):
		return engine.TurnRequest{}, "request.expectedBoundary does not belong to request.run"
	case in.Turn.Model != "" && !strings.EqualFold(in.Turn.Model, rs.Model):
		return engine.TurnRequest{}, fmt.Sprintf("turn.model %q is not the session's model %q", in.Turn.Model, rs.Model)
	case wire.ValidRunID(req.OperationID) != nil:
		return engine.TurnRequest{}, "request.operationId cannot name the continuation's run"
	}
	prompt, err := turnText(wire.TurnRequest{Message: in.Turn.Prompt, Parts: in.Turn.Parts})
	if err == nil && strings.TrimSpace(prompt) == "" {
		err = errors.New("the turn has no prompt or text parts")
	}
	if err != nil {
		return engine.TurnRequest{}, err.Error()
	}
	var create wire.SessionCreateRequest
	if err := json.Unmarshal(rs.Request, &create); err != nil {
		return engine.TurnRequest{}, "the session's create request cannot be read"
	}
	cwd := ""
	if create.Cwd != nil {
		cwd = *create.Cwd
	}
	x, eb := parseExecution(create.Execution)
	if eb != nil {
		return engine.TurnRequest{}, "the session's execution cannot be read: " + eb.Message
	}
	digest, err := wire.Digest(map[string]any{"schema": continuationDigestSchema, "harness": b.Adapter.Name(),
		"session": rs.ID, "request": req, "turn": in.Turn})
	if err != nil {
		return engine.TurnRequest{}, err.Error()
	}
	// The continuation's run, execution and turn are named by its
	// operation id, so that the operation repeated names the same run.
	op, run := req.OperationID, req.Run
	observed := time.Now().UTC().Format(time.RFC3339Nano)
	return engine.TurnRequest{
		Turn:  store.Turn{SessionID: rs.ID, TurnID: op, Digest: digest},
		RunID: op, Digest: digest, Provider: run.Provider, EnvironmentID: run.EnvironmentID, ExecutionID: op,
		Backend: b, Model: bare, ModelID: rs.Model, Prompt: prompt, Cwd: cwd, Env: create.Env, Policy: rs.Policy,
		Confine: x.confine, Timeout: x.timeout,
		Boundary: func(t store.Turn) []byte {
			return mustJSON(wire.BoundaryProof{RunID: op, Provider: run.Provider, EnvironmentID: run.EnvironmentID,
				SessionID: rs.ID, ExecutionID: op, RequestDigest: digest,
				Boundary: wire.ContextBoundary{Kind: "revision", Revision: strconv.FormatInt(t.Index+1, 10)}, ObservedAt: observed})
		},
	}, ""
}

// answerRecorded answers an operation already recorded: its stored
// outcome, conflict when the request differs, or, for an admitted turn
// whose outcome is not yet recorded, the outcome once its run ends. A
// repeated request (replay) that the bridge accepted before reads
// "replayed", with the same result and control reference.
func (s *Server) answerRecorded(ctx context.Context, ans continuationAnswer, c store.Continuation, replay bool) {
	if c.RequestDigest != ans.req.RequestDigest || c.SessionID != ans.req.Run.SessionID {
		o := ans.outcome(wire.ContinuationConflict, "operation "+c.OperationID+" was used for a different request", new(bool))
		o.Acknowledgement.ExistingRequestDigest = c.RequestDigest
		writeJSON(ans.w, http.StatusConflict, o)
		return
	}
	if c.Body != nil {
		ans.raw(c.HTTPStatus, replayed(c.Body, replay))
		return
	}
	// The outcome is recorded even if this request goes away first, so
	// that a repetition finds it after the run's events expired.
	done := make(chan store.Continuation, 1)
	go func() {
		ctx := context.WithoutCancel(ctx)
		c, err := s.recordContinuation(ctx, ans, c)
		if err != nil {
			s.log.Error("record continuation outcome", "operation", c.OperationID, "err", err)
			close(done)
			return
		}
		done <- c
	}()
	select {
	case c, ok := <-done:
		if !ok {
			ans.write(wire.ContinuationTransportFailure, "the bridge could not record the outcome", true)
			return
		}
		ans.raw(c.HTTPStatus, replayed(c.Body, replay))
	case <-ctx.Done():
	}
}

// replayed is a recorded outcome as a repetition of its request reads it:
// an accepted one says replayed; any other is answered as recorded.
func replayed(body []byte, replay bool) []byte {
	var o wire.ContinuationOutcome
	if !replay || json.Unmarshal(body, &o) != nil || o.Acknowledgement.Status != wire.ContinuationAccepted {
		return body
	}
	o.Acknowledgement.Status = wire.ContinuationReplayed
	return mustJSON(o)
}

// recordContinuation waits for the run of an admitted continuation to
// end and records its outcome: accepted, with the turn's result and the
// run's control reference.
func (s *Server) recordContinuation(ctx context.Context, ans continuationAnswer, c store.Continuation) (store.Continuation, error) {
	eng := s.opts.Engine
	eng.Wait(ctx, c.RunID)
	run, err := eng.Store().GetRun(ctx, c.RunID)
	if err != nil {
		return c, err
	}
	if !run.Terminal() {
		return c, fmt.Errorf("run %s is not live and not terminal", run.ID)
	}
	res, err := s.continuationResult(ctx, run)
	if err != nil {
		return c, err
	}
	o := ans.outcome(wire.ContinuationAccepted, "", nil)
	o.Result = res
	o.ControlRef = &wire.RunRef{RunID: run.ID, Provider: run.Provider, EnvironmentID: run.EnvironmentID,
		SessionID: run.SessionID, ExecutionID: run.ExecutionID, RequestDigest: run.Digest}
	// The boundary observed at admission: the expected one (the admission
	// checked they are equal), proven for the continued run, observed when
	// the turn was admitted and never before the caller observed it.
	exp := ans.req.ExpectedBoundary
	observed := run.StartedAt.UTC()
	if t, err := time.Parse(time.RFC3339Nano, exp.ObservedAt); err == nil && t.After(observed) {
		observed = t.UTC()
	}
	o.Acknowledgement.ActualBoundary = &wire.BoundaryProof{RunID: ans.req.Run.RunID, Provider: ans.req.Run.Provider,
		EnvironmentID: ans.req.Run.EnvironmentID, SessionID: ans.req.Run.SessionID, ExecutionID: ans.req.Run.ExecutionID,
		RequestDigest: ans.req.Run.RequestDigest, Boundary: exp.Boundary, ObservedAt: observed.Format(time.RFC3339Nano)}
	return eng.Store().SetContinuationOutcome(ctx, c.OperationID, http.StatusOK, mustJSON(o))
}

// continuationResult is the result of a terminal retained run, read from
// its canonical events as the TypeScript bridge builds it: its text, its
// summed token usage, how it ended, its identity (metadata) and its
// newest events (at most wire.MaxContractArray) as agent environment
// events.
func (s *Server) continuationResult(ctx context.Context, run store.Run) (*wire.ContinuationResult, error) {
	res := &wire.ContinuationResult{Success: run.Status == store.StatusDone, SessionID: run.SessionID,
		Metadata: map[string]any{"runId": run.ID, "executionId": run.ExecutionID, "requestDigest": run.Digest, "status": run.Status}}
	if !res.Success {
		res.Error = run.ErrType
		if run.ErrMessage != "" {
			res.Error += ": " + run.ErrMessage
		}
		if res.Error == "" {
			res.Error = "retained run ended with status " + run.Status
		}
	}
	var text strings.Builder
	for after := int64(0); ; {
		evs, err := s.opts.Engine.Store().Events(ctx, run.ID, after, 1024)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			after = e.Seq
			var env wire.Envelope
			if json.Unmarshal(e.Data, &env) != nil {
				continue
			}
			ev, ok := wire.EnvironmentEventOf(env.Event)
			if !ok {
				continue
			}
			text.WriteString(ev.Delta)
			res.Usage = res.Usage.Add(ev.Usage)
			res.Events = append(res.Events, ev.EnvironmentEvent)
		}
	}
	// The interface bounds a result's text and events; the whole answer
	// must also fit the 1 MiB a client reads of it.
	res.Text = wire.TruncateJS(text.String(), wire.MaxContractString)
	size := 0
	for i := len(res.Events) - 1; i >= 0; i-- {
		size += len(res.Events[i].Data) + len(res.Events[i].Normalized) + len(res.Events[i].ProviderEvent)
		if len(res.Events)-i > wire.MaxContractArray || size > maxResultEventBytes {
			res.Events = res.Events[i+1:]
			break
		}
	}
	return res, nil
}

// maxResultEventBytes bounds the events a continuation result carries.
const maxResultEventBytes = 512 << 10

// differentDigest is existing, or a digest derived from it when it equals
// the request's own (a conflict must name another request).
func differentDigest(request, existing string) string {
	if existing != request && wire.ValidDigest(existing) == nil {
		return existing
	}
	d, _ := wire.Digest(map[string]string{"existing": existing, "request": "different"})
	return d
}
