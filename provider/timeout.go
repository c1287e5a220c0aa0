package provider

import (
	"context"
	"strconv"
	"time"
)

// turnContext bounds a turn by its Timeout: when the bound expires first,
// the returned context's cause is a *TimeoutError. The caller's ctx stays
// the parent, so its own end keeps its own cause (context.Canceled,
// context.DeadlineExceeded).
func turnContext(ctx context.Context, op string, r *run, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, timeout, &TimeoutError{Op: op, RunID: r.controlRef().RunID, Timeout: timeout})
}

// timeoutEvent is the terminal event of a turn whose Timeout expired and
// whose run the bridge then confirmed terminal: a failed status, as the
// package reports every failed run.
func timeoutEvent(r *run, te *TimeoutError) Event {
	ref := r.controlRef()
	return Event{Type: EventStatus, Status: StatusFailed,
		Detail: te.reason() + ": the client cancelled cli-bridge run " + strconv.Quote(ref.RunID),
		RunID:  ref.RunID, SessionID: ref.SessionID, ExecutionID: ref.ExecutionID}
}

// enforceTimeout bounds a dispatched run: at deadline, unless the run was
// seen to end, the environment was destroyed or the Provider closed, it
// cancels the run on the bridge with a reason naming the timeout. The
// watcher is background work of the Provider.
func (e *Environment) enforceTimeout(r *run, deadline time.Time, timeout time.Duration) {
	const op = "environment.Dispatch"
	c := e.p.c
	c.bg.run(func() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.bg.stop:
			return
		}
		ref := r.controlRef()
		e.mu.Lock()
		active := !e.destroyed && e.runs[ref.RunID] == r
		e.mu.Unlock()
		if !active {
			return // it ended, or Destroy cancelled it
		}
		te := &TimeoutError{Op: op, RunID: ref.RunID, Timeout: timeout}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.CancelWait)
		defer cancel()
		if s, err := c.snapshot(ctx, op, r, 0); err == nil && s.Terminal {
			e.settled(r)
			return
		}
		if _, err := c.cancelRun(ctx, r, te.reason()); err != nil {
			c.opts.Logger.WarnContext(ctx, "cli-bridge turn timeout: cancellation not confirmed", "run", ref.RunID, "timeout", timeout, "err", err)
			return
		}
		c.opts.Logger.DebugContext(ctx, "cli-bridge turn timeout: run cancelled", "run", ref.RunID, "timeout", timeout)
		e.settled(r)
	})
}
