package cancellation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Options configure a Canceller.
type Options struct {
	// Engine holds and cancels the runs (required).
	Engine *engine.Engine
}

// Canceller cancels the runs of one bridge exactly.
type Canceller struct{ eng *engine.Engine }

// New returns a canceller.
func New(opts Options) (*Canceller, error) {
	if opts.Engine == nil {
		return nil, errors.New("cancellation: Engine is required")
	}
	return &Canceller{eng: opts.Engine}, nil
}

// Answer is the answer to an exact cancellation: its HTTP status and
// acknowledgement. Reached reports that this request reached the run (it
// is neither a repetition nor a refusal): the run's state then describes
// the answer.
type Answer struct {
	Status  int
	Ack     wire.CancellationAck
	Reached bool
}

// Check validates an exact cancellation as the agent interface's schema
// does, its digest included, and returns the digest. The error is a
// *wire.ErrorBody of type invalid_request_error.
func Check(req wire.CancellationRequest) (string, error) {
	msg := ""
	switch {
	case wire.ValidIdentifier(req.OperationID) != nil:
		msg = "operationId " + wire.ValidIdentifier(req.OperationID).Error()
	case wire.ValidRunRef(req.Run) != nil:
		msg = wire.ValidRunRef(req.Run).Error()
	case wire.JSLength(req.Reason) > wire.MaxCancellationReason:
		msg = fmt.Sprintf("reason must be at most %d characters", wire.MaxCancellationReason)
	case req.RequestDigest == "":
		msg = "requestDigest is required"
	case wire.ValidDigest(req.RequestDigest) != nil:
		msg = "requestDigest " + wire.ValidDigest(req.RequestDigest).Error()
	}
	if msg != "" {
		return "", &wire.ErrorBody{Type: wire.TypeInvalidRequest, Message: msg}
	}
	digest, err := wire.CancellationDigest(req)
	if err != nil {
		return "", &wire.ErrorBody{Type: wire.TypeInvalidRequest, Message: err.Error()}
	}
	if req.RequestDigest != digest {
		return "", &wire.ErrorBody{Type: wire.TypeInvalidRequest, Message: "run cancellation request digest does not match its content"}
	}
	return digest, nil
}

// route is what differs between the two routes of an exact
// cancellation.
type route struct {
	// refuse answers a request it cannot bind to run (found: whether the
	// run is known at all); done is false for a request it can.
	refuse func(run store.Run, found bool) (a Answer, err error, done bool)
	// relabel makes a repetition read replayed.
	relabel bool
	// ended makes a not_live acknowledgement say how the run ended.
	ended bool
}

// Run cancels the run of POST /v1/runs/:id/cancel, path id: the run req
// names, which must be id. The error is a *wire.ErrorBody: the request's
// refusal (invalid_request_error, run_identity_conflict) or a fault.
func (c *Canceller) Run(ctx context.Context, id string, req wire.CancellationRequest, wait time.Duration) (Answer, error) {
	digest, err := Check(req)
	if err != nil {
		return Answer{}, err
	}
	if req.Run.RunID != id {
		return Answer{}, &wire.ErrorBody{Type: wire.TypeRunIdentityConflict, RunID: id,
			Message: "cancellation run id does not match the request path"}
	}
	return c.cancel(ctx, req, digest, wait, route{relabel: true, refuse: func(run store.Run, found bool) (Answer, error, bool) {
		switch {
		case !found:
			no := false
			return Answer{Status: http.StatusOK, Ack: ack(req, digest, wire.CancelUnknown, wire.EffectUnknown,
				"this bridge has no record of the run", &no)}, nil, true
		case !bound(run, req.Run):
			return Answer{}, &wire.ErrorBody{Type: wire.TypeRunIdentityConflict, RunID: id,
				Message: "the cancellation's run identity does not match the run"}, true
		}
		return Answer{}, nil, false
	}})
}

// Session cancels the run of POST /v1/sessions/:id/cancel, session
// sessionID: the run req names, which must be a turn of that session. As
// in the TypeScript bridge, a run the request cannot be bound to
// (unknown, of another session, or with other coordinates) is a conflict
// acknowledgement (409), a repetition gets the stored acknowledgement as
// it was, and a run that had ended says how. The error is a
// *wire.ErrorBody: the request's refusal (invalid_request_error) or a
// fault.
func (c *Canceller) Session(ctx context.Context, sessionID string, req wire.CancellationRequest, wait time.Duration) (Answer, error) {
	digest, err := Check(req)
	if err != nil {
		return Answer{}, err
	}
	return c.cancel(ctx, req, digest, wait, route{ended: true, refuse: func(run store.Run, found bool) (Answer, error, bool) {
		if found && req.Run.SessionID == sessionID && bound(run, req.Run) {
			return Answer{}, nil, false
		}
		no := false
		a := ack(req, digest, wire.CancelConflict, wire.EffectUnknown,
			"the run reference is not a turn admitted to session "+sessionID, &no)
		if found && run.SessionID == sessionID {
			a.ExistingRequestDigest = run.Digest
		}
		return Answer{Status: http.StatusConflict, Ack: a}, nil, true
	}})
}

// cancel answers a checked request whose digest is digest: its stored
// acknowledgement when the operation is bound, r's refusal when it
// refuses the named run, otherwise the cancellation of that run, stored.
func (c *Canceller) cancel(ctx context.Context, req wire.CancellationRequest, digest string, wait time.Duration, r route) (Answer, error) {
	st := c.eng.Store()
	prev, stored, err := store.Bound(st.GetCancellation(ctx, req.OperationID))
	if err != nil {
		return Answer{}, wire.Fault("load cancellation", err)
	}
	if stored {
		return replay(prev, req, digest, r.relabel)
	}
	run, err := st.GetRun(ctx, req.Run.RunID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Answer{}, wire.Fault("load run", err)
	}
	if a, err, done := r.refuse(run, err == nil); done {
		return a, err
	}
	requested, err := c.eng.Cancel(ctx, run.ID)
	if err != nil {
		return Answer{}, wire.Fault("cancel run", err)
	}
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		c.eng.Wait(wctx, run.ID)
		cancel()
	}
	if run, err = st.GetRun(ctx, run.ID); err != nil {
		return Answer{}, wire.Fault("load run", err)
	}
	a := Answer{Status: http.StatusOK, Reached: true, Ack: ack(req, digest, wire.CancelAccepted, "", "", nil)}
	switch {
	case run.Status == store.StatusCancelled:
		a.Ack.Effect = wire.EffectCancelled
	case run.Terminal():
		a.Ack.Effect = wire.EffectNotLive
		if r.ended {
			a.Ack.Message = "run ended with status " + run.Status
		}
	default:
		a.Ack.Effect, a.Status = wire.EffectCancelRequested, http.StatusAccepted
		if !requested {
			a.Ack.Message = "cancellation was already requested"
		}
	}
	got, created, err := st.PutCancellation(ctx, store.Cancellation{OperationID: req.OperationID, Digest: digest,
		HTTPStatus: a.Status, Body: wire.MustJSON(a.Ack)})
	if err != nil {
		return Answer{}, wire.Fault("store cancellation", err)
	}
	if !created { // a concurrent twin won
		return replay(got, req, digest, r.relabel)
	}
	return a, nil
}

// bound reports whether ref names run by every coordinate.
func bound(run store.Run, ref wire.RunRef) bool {
	return run.ID == ref.RunID && run.Digest == ref.RequestDigest && run.Provider == ref.Provider &&
		run.EnvironmentID == ref.EnvironmentID && run.SessionID == ref.SessionID && run.ExecutionID == ref.ExecutionID
}

func ack(req wire.CancellationRequest, digest, status, effect, msg string, retryable *bool) wire.CancellationAck {
	return wire.CancellationAck{OperationID: req.OperationID, RequestDigest: digest, Run: req.Run, Status: status,
		Effect: effect, Message: msg, Retryable: retryable}
}

// replay answers a repetition of operation prev: its stored
// acknowledgement (relabelled replayed when relabel is set and it was
// not unknown), or a conflict when the request is another.
func replay(prev store.Cancellation, req wire.CancellationRequest, digest string, relabel bool) (Answer, error) {
	if prev.Digest != digest {
		a := ack(req, digest, wire.CancelConflict, wire.EffectUnknown, "the operation id was used for a different cancellation", nil)
		a.ExistingRequestDigest = prev.Digest
		return Answer{Status: http.StatusConflict, Ack: a}, nil
	}
	var a wire.CancellationAck
	if err := json.Unmarshal(prev.Body, &a); err != nil {
		return Answer{}, wire.Fault("stored cancellation is unreadable", err)
	}
	if relabel && a.Status != wire.CancelUnknown {
		a.Status = wire.CancelReplayed
	}
	return Answer{Status: prev.HTTPStatus, Ack: a}, nil
}
