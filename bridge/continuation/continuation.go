package continuation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Options configure a Continuer. Zero values mean the defaults.
type Options struct {
	// Engine admits the continuations and runs their turns (required).
	Engine *engine.Engine
	// Resolve is the registered harness of a session's model and the
	// model it is given (required).
	Resolve func(model string) (b *engine.Backend, bare string, ok bool)
	// Execution is the confinement and timeout of the turns of a session
	// whose create request gave raw as its execution, checked to run here
	// now in cwd; msg says why they cannot (required).
	Execution func(ctx context.Context, raw json.RawMessage, cwd string) (confine jail.Request, timeout time.Duration, msg string)
	// Logger receives the failures the answers do not tell (default:
	// discard).
	Logger *slog.Logger
}

// Continuer continues the retained sessions of one bridge.
type Continuer struct {
	opts     Options
	log      *slog.Logger
	admitted atomic.Int64
}

// New returns a continuer.
func New(opts Options) (*Continuer, error) {
	if opts.Engine == nil || opts.Resolve == nil || opts.Execution == nil {
		return nil, errors.New("continuation: Engine, Resolve and Execution are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Continuer{opts: opts, log: opts.Logger}, nil
}

// Native reports whether native continuation is claimed and served for
// a: a retained adapter that declares it proven.
func Native(a harness.Adapter) bool {
	_, retained := a.(harness.Retained)
	nc, ok := a.(harness.NativeContinuer)
	return retained && ok && nc.ContinuesNatively()
}

// Answer is the answer to a continuation: its HTTP status and its
// outcome, either as a value (Outcome) or as it was recorded (Body, JSON
// of a wire.ContinuationOutcome). A zero Status is no answer: the caller
// went away while its turn ran.
type Answer struct {
	Status  int
	Outcome *wire.ContinuationOutcome
	Body    []byte
	// RetryAfter says to retry in a second: the bridge is saturated.
	RetryAfter bool
}

// Admitted is how many continuations the continuer admitted.
func (c *Continuer) Admitted() int64 { return c.admitted.Load() }

// HTTPStatus is the HTTP status that goes with a continuation
// acknowledgement status.
func HTTPStatus(status string) int {
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

// request builds the outcomes of one continuation request.
type request struct{ wire.ContinuationRequest }

func (r request) outcome(status, msg string, retryable *bool) wire.ContinuationOutcome {
	return wire.ContinuationOutcome{Acknowledgement: wire.ContinuationAck{OperationID: r.OperationID,
		RequestDigest: r.RequestDigest, Status: status, Message: msg, Retryable: retryable}}
}

func (r request) answer(status, msg string, retryable bool) Answer {
	o := r.outcome(status, msg, &retryable)
	return Answer{Status: HTTPStatus(status), Outcome: &o}
}

// Continue continues session id with the turn in carries. The operation
// id of in.Request must be a valid identifier.
func (c *Continuer) Continue(ctx context.Context, id string, in wire.ContinueBody) Answer {
	req := request{in.Request}
	st := c.opts.Engine.Store()
	rs, err := st.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return req.answer(wire.ContinuationUnknownSession, "session "+id+" not found", false)
	}
	if err != nil {
		c.log.Error("load session", "session", id, "err", err)
		return req.answer(wire.ContinuationTransportFailure, "the bridge could not load the session", true)
	}
	recorded, bound, err := store.Bound(st.GetContinuation(ctx, req.OperationID))
	if err != nil {
		c.log.Error("load continuation", "operation", req.OperationID, "err", err)
		return req.answer(wire.ContinuationTransportFailure, "the bridge could not load the operation", true)
	}
	if bound {
		return c.answerRecorded(ctx, req, recorded, true)
	}
	tr, msg := c.turn(ctx, rs, in)
	if msg != "" {
		return req.answer(wire.ContinuationUnverified, msg, false)
	}
	admitted, run, err := c.opts.Engine.AdmitContinuation(ctx, tr,
		store.Continuation{OperationID: req.OperationID, SessionID: id, RequestDigest: req.RequestDigest}, req.check(id))
	switch {
	case errors.Is(err, store.ErrContinuationExists):
		return c.answerRecorded(ctx, req, admitted, true)
	case errors.Is(err, store.ErrContinuationRejected):
		return Answer{Status: admitted.HTTPStatus, Body: admitted.Body}
	case errors.Is(err, store.ErrNotFound):
		return req.answer(wire.ContinuationUnknownSession, "session "+id+" not found", false)
	case errors.Is(err, engine.ErrSessionBusy):
		return req.answer(wire.ContinuationConflict, "session "+id+" has a live run", true)
	case errors.Is(err, engine.ErrTurnConflict):
		return req.answer(wire.ContinuationConflict, "run or turn id "+req.OperationID+" is bound to another request", false)
	case errors.Is(err, engine.ErrSaturated):
		a := req.answer(wire.ContinuationTransportFailure, "too many concurrent runs", true)
		a.RetryAfter = true
		return a
	case err != nil:
		c.log.Error("admit continuation", "session", id, "operation", req.OperationID, "err", err)
		return req.answer(wire.ContinuationTransportFailure, "the bridge could not admit the turn", true)
	}
	c.admitted.Add(1)
	return c.answerRecorded(ctx, req, store.Continuation{OperationID: admitted.OperationID, SessionID: id,
		RequestDigest: req.RequestDigest, RunID: run.ID}, false)
}
