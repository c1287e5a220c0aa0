package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// ErrTurnConflict: the turn id is bound to a different turn, or the run id
// to a different run.
var ErrTurnConflict = errors.New("turn id is bound to a different turn")

// ErrNotRetained: the harness cannot run retained session turns.
var ErrNotRetained = errors.New("harness does not support retained sessions")

// retainedState is the engine's state of retained session turns. Its zero
// value is ready to use.
type retainedState struct {
	mu sync.Mutex
	// bc wakes the readers of a session's events when a turn is
	// admitted or the session closes.
	bc map[string]*broadcast
	// runs are the live retained runs, by run id.
	runs map[string]*retainedRun
	// procs are the idle long-lived processes of retained sessions
	// (session_proc.go), by sessionProcKey; a run takes its session's
	// out while it runs a turn.
	procs map[string]*sessionProc
}

// retainedRun is the part of a live retained run that answers
// interactions. mu serialises answers with each other and with the
// run's end, so an interaction is answered at most once and never after
// its run closed it.
type retainedRun struct {
	mu        sync.Mutex
	adapter   harness.Retained
	write     func([]byte) error // the harness's stdin
	questions map[string]harness.Question
	closed    bool
}

// SessionNotifier returns the channel closed at the next change of session
// id (a turn admitted, the session closed).
func (e *Engine) SessionNotifier(id string) <-chan struct{} {
	return e.sessionBC(id).wait()
}

// NotifySession wakes the readers of session id.
func (e *Engine) NotifySession(id string) { e.sessionBC(id).notify() }

func (e *Engine) sessionBC(id string) *broadcast {
	e.ret.mu.Lock()
	defer e.ret.mu.Unlock()
	if e.ret.bc == nil {
		e.ret.bc = map[string]*broadcast{}
	}
	b := e.ret.bc[id]
	if b == nil {
		b = newBroadcast()
		e.ret.bc[id] = b
	}
	return b
}

// CloseSession closes a retained session: the store refuses its turns
// from then on, its event readers are woken (they end once its last run
// ended), and its idle long-lived process is ended. A turn still running
// is not stopped here (the caller cancels it); its process ends with the
// turn, since the session is closed. Closing twice is harmless.
func (e *Engine) CloseSession(ctx context.Context, id string) error {
	if err := e.store.CloseSession(ctx, id); err != nil {
		return err
	}
	e.sessionClosed(id)
	return nil
}

// sessionClosed ends what serves a session the store just closed.
func (e *Engine) sessionClosed(id string) {
	e.NotifySession(id)
	e.EndSession(id)
}

// TurnRequest is one validated turn of a retained session.
type TurnRequest struct {
	// Turn names the session, turn id and the turn's digest.
	Turn store.Turn
	// RunID and Digest are the run's identity; Digest is also the turn's.
	RunID, Digest                        string
	Provider, EnvironmentID, ExecutionID string
	Backend                              *Backend
	// Model is the bare model for the harness; ModelID the full id.
	Model, ModelID string
	Prompt         string
	// History is the conversation before the turn (wire.TurnRequest's),
	// given to a harness that holds none of it yet.
	History []wire.Message
	Cwd     string
	Env     map[string]string
	// Confine is the confinement of the session's execution, and Timeout
	// its execution.timeoutMs (0: the backend's).
	Confine jail.Request
	Timeout time.Duration
	// Policy is the session's interaction policy (wire.Policy...).
	Policy string
	// Boundary encodes the session's context boundary after the turn.
	Boundary func(store.Turn) []byte
	// Admit, when set, stores the turn and its run instead of
	// store.AdmitTurn, with the same contract (see AdmitContinuation).
	Admit func(ctx context.Context, t store.Turn, r store.Run, boundary func(store.Turn) []byte) (store.Turn, store.Run, bool, error)
}

// RevisionBoundary is the Boundary of a retained turn of the run ref
// names, observed at observed: the session's conversation at revision
// t.Index+1 once turn t ran.
func RevisionBoundary(ref wire.RunRef, observed time.Time) func(t store.Turn) []byte {
	at := observed.UTC().Format(time.RFC3339Nano)
	return func(t store.Turn) []byte {
		return wire.MustJSON(wire.BoundaryProof{RunID: ref.RunID, Provider: ref.Provider, EnvironmentID: ref.EnvironmentID,
			SessionID: ref.SessionID, ExecutionID: ref.ExecutionID, RequestDigest: ref.RequestDigest,
			Boundary: wire.ContextBoundary{Kind: "revision", Revision: strconv.FormatInt(t.Index+1, 10)}, ObservedAt: at})
	}
}

// AdmitTurn admits a retained turn and starts its run, or returns the
// turn and run already admitted under the same turn id with created false.
// A turn id bound to another turn, or a run id already used, is
// ErrTurnConflict.
func (e *Engine) AdmitTurn(ctx context.Context, req TurnRequest) (_ store.Turn, _ store.Run, created bool, err error) {
	ctx, span := admissionSpan(ctx, req.RunID, req.Backend)
	defer func() { endAdmission(span, err) }()
	ra, ok := req.Backend.Adapter.(harness.Retained)
	if !ok {
		return store.Turn{}, store.Run{}, false, ErrNotRetained
	}
	if err := e.WaitReady(ctx); err != nil { // as in Start
		return store.Turn{}, store.Run{}, false, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return store.Turn{}, store.Run{}, false, ErrClosed
	}
	t := req.Turn
	if got, err := e.store.GetTurn(ctx, t.SessionID, t.TurnID); err == nil {
		if got.Digest != t.Digest {
			return got, store.Run{}, false, ErrTurnConflict
		}
		run, err := e.store.GetRun(ctx, got.RunID)
		return got, run, false, err
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.Turn{}, store.Run{}, false, err
	}
	if len(e.live) >= e.opts.MaxRuns {
		return store.Turn{}, store.Run{}, false, ErrSaturated
	}
	name := req.Backend.Adapter.Name()
	for _, l := range e.live {
		if l.sessionID == t.SessionID && l.harness == name {
			return store.Turn{}, store.Run{}, false, ErrSessionBusy
		}
	}
	now := e.store.Now()
	admit := e.store.AdmitTurn
	if req.Admit != nil {
		admit = req.Admit
	}
	t, run, created, err := admit(ctx, t, store.Run{
		ID: req.RunID, Digest: req.Digest, Harness: name, Model: req.ModelID, Provider: req.Provider,
		EnvironmentID: req.EnvironmentID, SessionID: t.SessionID, ExecutionID: req.ExecutionID,
		StartedAt: now, LifetimeExpiresAt: now.Add(e.opts.MaxLifetime), Marker: MarkerVar + "=" + req.RunID,
	}, req.Boundary)
	switch {
	case errors.Is(err, store.ErrConflict):
		return t, run, false, ErrTurnConflict
	case err != nil:
		return t, run, false, err
	case !created:
		return t, run, false, nil
	}
	l := &liveRun{id: req.RunID, sessionID: t.SessionID, harness: name, bc: newBroadcast(),
		done: make(chan struct{}), cancel: make(chan struct{})}
	l.recent.maxEvents, l.recent.maxBytes = e.recentLimits()
	l.startTrace(ctx)
	e.live[req.RunID] = l
	rr := &retainedRun{adapter: ra, questions: map[string]harness.Question{}}
	e.ret.mu.Lock()
	if e.ret.runs == nil {
		e.ret.runs = map[string]*retainedRun{}
	}
	e.ret.runs[req.RunID] = rr
	e.ret.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.executeRetained(l, rr, req, run)
	}()
	e.sessionBC(t.SessionID).notify()
	return t, run, true, nil
}

// InteractionAnswer is the engine's verdict on one interaction command:
// the acknowledgement status, a message, whether to store it, and
// whether a transport failure may be retried.
type InteractionAnswer struct {
	Status    string
	Message   string
	Retryable bool
}

// Respond answers interaction iid of run runID with decision d whose
// response digest is respDigest, and stores the acknowledgement
// ack(status) under the command's operation id when it is final. A
// repeated operation id returns its stored acknowledgement. The caller
// has checked the command's binding, digest and answer.
func (e *Engine) Respond(ctx context.Context, runID, iid, operationID string, d Decision, respDigest string,
	ack func(InteractionAnswer) ([]byte, int)) (body []byte, httpStatus int, err error) {
	st := e.store
	if op, err := st.GetInteractionOp(ctx, operationID); err == nil {
		return op.Body, op.HTTPStatus, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, 0, err
	}
	e.ret.mu.Lock()
	rr := e.ret.runs[runID]
	e.ret.mu.Unlock()
	if rr != nil {
		rr.mu.Lock()
		defer rr.mu.Unlock()
	}
	it, err := st.GetInteraction(ctx, runID, iid)
	if errors.Is(err, store.ErrNotFound) {
		b, code := ack(InteractionAnswer{Status: wire.InteractionUnknownInteraction, Message: "the run raised no interaction " + iid})
		return b, code, nil
	}
	if err != nil {
		return nil, 0, err
	}
	put := func(a InteractionAnswer, res *store.Resolution) ([]byte, int, error) {
		b, code := ack(a)
		op, _, err := st.PutInteractionOp(ctx, store.InteractionOp{OperationID: operationID, RunID: runID, InteractionID: iid,
			HTTPStatus: code, Body: b}, res)
		if err != nil {
			return nil, 0, err
		}
		return op.Body, op.HTTPStatus, nil
	}
	switch it.Status {
	case store.InteractionCancelled:
		return put(InteractionAnswer{Status: wire.InteractionCancelled, Message: "the interaction was cancelled with its run"}, nil)
	case store.InteractionExpired:
		return put(InteractionAnswer{Status: wire.InteractionExpired,
			Message: "the interaction expired: the bridge restarted while it was open, which ended its run"}, nil)
	case store.InteractionResolved:
		if it.ResponseDigest == respDigest {
			return put(InteractionAnswer{Status: wire.InteractionAlreadyResolvedSame, Message: "the interaction was already resolved with this response"}, nil)
		}
		return put(InteractionAnswer{Status: wire.InteractionAlreadyResolvedDifferent,
			Message: "the interaction was already resolved with a different response (" + it.Outcome + ")"}, nil)
	}
	if rr == nil || rr.closed {
		// Open in the store but its run is gone: the bridge restarted.
		return put(InteractionAnswer{Status: wire.InteractionExpired, Message: "the run that raised the interaction is no longer live"}, nil)
	}
	q, ok := rr.questions[iid]
	if !ok {
		return put(InteractionAnswer{Status: wire.InteractionExpired, Message: "the interaction is no longer awaited"}, nil)
	}
	msg := d.Message
	if msg == "" {
		msg = "the user " + d.Outcome + " this request"
	}
	line, err := rr.adapter.Answer(q, d.Allow, msg)
	if err == nil {
		err = rr.write(line)
	}
	if err != nil {
		b, code := ack(InteractionAnswer{Status: wire.InteractionTransportFailure, Retryable: true,
			Message: "the answer could not be delivered to the harness: " + err.Error()})
		return b, code, nil
	}
	delete(rr.questions, iid)
	return put(InteractionAnswer{Status: wire.InteractionAccepted}, &store.Resolution{ResponseDigest: respDigest, Outcome: d.Outcome})
}

// closeInteractions ends the interactions of a retained run that is
// finishing: no answer is taken after it, and the open ones are marked
// and returned. They are expired when the bridge is shutting down (as
// recovery marks those a crash left open: an answer sent after the
// restart is acknowledged expired), cancelled otherwise.
func (e *Engine) closeInteractions(ctx context.Context, runID string, rr *retainedRun, shutdown bool) ([]store.Interaction, error) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.closed = true
	rr.questions = nil
	closeOpen := e.store.CancelInteractions
	if shutdown {
		closeOpen = e.store.ExpireInteractions
	}
	open, err := closeOpen(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("close open interactions: %w", err)
	}
	return open, nil
}

// ErrNotSteerable is returned by Steer when the run's harness takes no
// input while a turn runs.
var ErrNotSteerable = errors.New("the harness takes no input while a turn runs")

// ErrNotLive is returned by Steer when the run is not a live retained run
// (it ended, or never was one).
var ErrNotLive = errors.New("the run is not live")

// Steer hands message to the harness of live retained run id, for the
// turn it is running.
func (e *Engine) Steer(id, message string) error {
	e.ret.mu.Lock()
	rr := e.ret.runs[id]
	e.ret.mu.Unlock()
	if rr == nil {
		return ErrNotLive
	}
	st, ok := rr.adapter.(harness.Steerer)
	if !ok {
		return ErrNotSteerable
	}
	line, err := st.SteerInput(message)
	if err != nil {
		return err
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.closed || rr.write == nil {
		return ErrNotLive
	}
	return rr.write(line)
}
