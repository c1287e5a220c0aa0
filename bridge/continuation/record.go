package continuation

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// answerRecorded answers an operation already recorded: its stored
// outcome, conflict when the request differs, or, for an admitted turn
// whose outcome is not yet recorded, the outcome once its run ends. A
// repeated request (replay) that the bridge accepted before reads
// "replayed", with the same result and control reference.
func (c *Continuer) answerRecorded(ctx context.Context, req request, rec store.Continuation, replay bool) Answer {
	if rec.RequestDigest != req.RequestDigest || rec.SessionID != req.Run.SessionID {
		o := req.outcome(wire.ContinuationConflict, "operation "+rec.OperationID+" was used for a different request", new(bool))
		o.Acknowledgement.ExistingRequestDigest = rec.RequestDigest
		return Answer{Status: http.StatusConflict, Outcome: &o}
	}
	if rec.Body != nil {
		return Answer{Status: rec.HTTPStatus, Body: replayed(rec.Body, replay)}
	}
	// The outcome is recorded even if this request goes away first, so
	// that a repetition finds it after the run's events expired.
	done := make(chan store.Continuation, 1)
	go func() {
		ctx := context.WithoutCancel(ctx)
		rec, err := c.record(ctx, req, rec)
		if err != nil {
			c.log.Error("record continuation outcome", "operation", rec.OperationID, "err", err)
			close(done)
			return
		}
		done <- rec
	}()
	select {
	case rec, ok := <-done:
		if !ok {
			return req.answer(wire.ContinuationTransportFailure, "the bridge could not record the outcome", true)
		}
		return Answer{Status: rec.HTTPStatus, Body: replayed(rec.Body, replay)}
	case <-ctx.Done():
		return Answer{}
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
	return wire.MustJSON(o)
}

// record waits for the run of an admitted continuation to end and
// records its outcome: accepted, with the turn's result and the run's
// control reference.
func (c *Continuer) record(ctx context.Context, req request, rec store.Continuation) (store.Continuation, error) {
	eng := c.opts.Engine
	eng.Wait(ctx, rec.RunID)
	run, err := eng.Store().GetRun(ctx, rec.RunID)
	if err != nil {
		return rec, err
	}
	if !run.Terminal() {
		return rec, fmt.Errorf("run %s is not live and not terminal", run.ID)
	}
	res, err := result(ctx, eng.Store(), run)
	if err != nil {
		return rec, err
	}
	o := req.outcome(wire.ContinuationAccepted, "", nil)
	o.Result = res
	o.ControlRef = &wire.RunRef{RunID: run.ID, Provider: run.Provider, EnvironmentID: run.EnvironmentID,
		SessionID: run.SessionID, ExecutionID: run.ExecutionID, RequestDigest: run.Digest}
	// The boundary observed at admission: the expected one (the admission
	// checked they are equal), proven for the continued run, observed when
	// the turn was admitted and never before the caller observed it.
	exp := req.ExpectedBoundary
	observed := run.StartedAt.UTC()
	if t, err := time.Parse(time.RFC3339Nano, exp.ObservedAt); err == nil && t.After(observed) {
		observed = t.UTC()
	}
	o.Acknowledgement.ActualBoundary = &wire.BoundaryProof{RunID: req.Run.RunID, Provider: req.Run.Provider,
		EnvironmentID: req.Run.EnvironmentID, SessionID: req.Run.SessionID, ExecutionID: req.Run.ExecutionID,
		RequestDigest: req.Run.RequestDigest, Boundary: exp.Boundary, ObservedAt: observed.Format(time.RFC3339Nano)}
	return eng.Store().SetContinuationOutcome(ctx, rec.OperationID, http.StatusOK, wire.MustJSON(o))
}

// maxResultEventBytes bounds the events a continuation result carries.
const maxResultEventBytes = 512 << 10

// result is the result of a terminal retained run, read from its
// canonical events as the TypeScript bridge builds it: its text, its
// summed token usage, how it ended, its identity (metadata) and its
// newest events (at most wire.MaxContractArray) as agent environment
// events.
func result(ctx context.Context, st *store.Store, run store.Run) (*wire.ContinuationResult, error) {
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
	err := st.EachEvent(ctx, run.ID, 0, math.MaxInt, func(_ int64, data []byte) bool {
		var env wire.Envelope
		if json.Unmarshal(data, &env) != nil {
			return true
		}
		if ev, ok := wire.EnvironmentEventOf(env.Event); ok {
			text.WriteString(ev.Delta)
			res.Usage = res.Usage.Add(ev.Usage)
			res.Events = append(res.Events, ev.EnvironmentEvent)
		}
		return true
	})
	if err != nil {
		return nil, err
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
