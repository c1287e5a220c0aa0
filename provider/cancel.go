package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// reasonCleanup is the reason of every cancellation the provider makes on
// its own behalf: a stream left early, a failed dispatch, Destroy, Cancel.
const reasonCleanup = "provider cleanup"

// newCancellationRequest builds the exact cancellation of ref. Its
// operation id is fixed by the run and the reason, so a repeated
// cancellation replays the bridge's stored answer, while one with another
// reason (which the bridge would refuse as a conflicting reuse of the
// operation id) is another operation.
func newCancellationRequest(ref ControlRef, reason string) (wire.CancellationRequest, error) {
	opID := "cancel-" + strings.TrimPrefix(ref.RequestDigest, "sha256:")
	if reason != reasonCleanup {
		sum := sha256.Sum256([]byte(ref.RequestDigest + "\x00" + reason))
		opID += "-" + hex.EncodeToString(sum[:8])
	}
	req := wire.CancellationRequest{OperationID: opID, Run: ref.wire(), Reason: reason}
	d, err := wire.CancellationDigest(req)
	if err != nil {
		return req, err
	}
	req.RequestDigest = d
	return req, nil
}

// cancelRun cancels the run with reason and waits, within CancelWait,
// until the bridge confirms it terminal. Concurrent callers share one
// cancellation (the first reason wins); ctx only stops this caller's
// wait. The cancellation itself is background work of the Provider, so
// Provider.Close waits for it.
func (c *client) cancelRun(ctx context.Context, r *run, reason string) (*wire.RunSnapshot, error) {
	r.mu.Lock()
	op := r.cancel
	if op == nil {
		op = &cancelOp{done: make(chan struct{})}
		r.cancel = op
		c.bg.run(func() {
			wctx, stop := context.WithTimeout(context.Background(), c.opts.CancelWait)
			defer stop()
			op.snap, op.err = c.performCancel(wctx, r, reason)
			r.mu.Lock()
			r.cancel = nil
			readers := r.readers
			r.readers = nil
			r.mu.Unlock()
			if op.err == nil {
				for _, stopReader := range readers {
					stopReader(&runEndedError{status: op.snap.Status})
				}
			}
			close(op.done)
		})
	}
	r.mu.Unlock()
	select {
	case <-op.done:
		return op.snap, op.err
	case <-ctx.Done():
		return nil, fmt.Errorf("cancel run: %w", context.Cause(ctx))
	}
}

// runEndedError is the cause with which a confirmed cancellation stops
// the run's readers where they are. The run is terminal and its events are
// stored, so such a reader reads the rest from its cursor (readRest).
type runEndedError struct{ status string }

func (e *runEndedError) Error() string { return "cli-bridge run ended " + e.status }

// endedBy reports whether a confirmed cancellation stopped the reader of
// rctx while its caller's ctx still runs.
func endedBy(ctx, rctx context.Context) bool {
	var ended *runEndedError
	return ctx.Err() == nil && errors.As(context.Cause(rctx), &ended)
}

// readRest reads a terminal run's events after since to the end of its
// stream, as a reader Close and Destroy can still stop.
func (e *Environment) readRest(ctx context.Context, op string, r *run, since string, yield func(Event) bool) error {
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer e.addReader(stop)()
	return e.p.c.streamRun(rctx, r, streamSpec{op: op, since: since}, &streamResult{}, yield)
}

func (c *client) performCancel(ctx context.Context, r *run, reason string) (*wire.RunSnapshot, error) {
	const op = "cancel run"
	if !r.admitted() {
		s, err := c.snapshot(ctx, op, r, 0)
		var nf *NotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%s: cli-bridge cannot safely cancel unknown run %q: %w", op, r.controlRef().RunID, err)
		}
		if err != nil {
			return nil, err
		}
		if s.Terminal {
			return s, nil
		}
	}
	ref := r.controlRef()
	req, err := newCancellationRequest(ref, reason)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	status, _, data, err := c.call(ctx, op, http.MethodPost, "/v1/runs/"+url.PathEscape(ref.RunID)+"/cancel", req, maxControlBytes,
		func(s int) bool { return s >= 200 && s < 300 || s == http.StatusConflict })
	if err != nil {
		return nil, err
	}
	if err := checkCancelAnswer(op, req, status, data, r); err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	for {
		s, err := c.snapshot(ctx, op, r, int(time.Until(deadline)/time.Millisecond))
		if err != nil {
			return nil, err
		}
		if s.Terminal {
			return s, nil
		}
		if ctx.Err() != nil || time.Until(deadline) <= 0 {
			return nil, fmt.Errorf("%s: cli-bridge run %q did not confirm terminal cancellation", op, ref.RunID)
		}
	}
}

// checkCancelAnswer accepts an exact cancellation acknowledgement for this
// request, or the plain answer {cancelled, terminal, run} of a bridge that
// ignores the body, when it names this run.
func checkCancelAnswer(op string, req wire.CancellationRequest, status int, data []byte, r *run) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return &ProtocolError{Op: op, Reason: "cli-bridge returned an invalid cancellation answer"}
	}
	if _, exact := probe["operationId"]; !exact {
		if status == http.StatusConflict {
			return errorFor(op, status, nil, data)
		}
		var plain wire.CancelResponse
		if err := json.Unmarshal(data, &plain); err != nil {
			return &ProtocolError{Op: op, Reason: "cli-bridge returned an invalid cancellation answer"}
		}
		return r.bindSnapshot(op, &plain.Run)
	}
	var ack wire.CancellationAck
	if err := json.Unmarshal(data, &ack); err != nil {
		return &ProtocolError{Op: op, Reason: "cli-bridge returned an invalid exact cancellation acknowledgement"}
	}
	if ack.OperationID != req.OperationID || ack.Run != req.Run || ack.RequestDigest != req.RequestDigest {
		return &IdentityMismatchError{Op: op, Reason: "cli-bridge returned a cancellation acknowledgement for another request"}
	}
	if ack.Status == wire.CancelConflict || ack.Status == wire.CancelUnknown || ack.Effect == wire.EffectUnknown {
		return &ConflictError{Op: op, Type: ack.Status, Message: fmt.Sprintf("cli-bridge did not prove cancellation for run %q: %s", req.Run.RunID, ack.Status)}
	}
	return nil
}
