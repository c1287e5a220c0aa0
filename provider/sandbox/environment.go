package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/tracing"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
)

// Reference is what a process needs to drive a box again (Provider.Connect).
// Bearer is a secret: String and LogValue redact it; only the JSON form
// carries it.
type Reference struct {
	Vendor   string `json:"vendor"`
	BoxID    string `json:"boxId"`
	Endpoint string `json:"endpoint"`
	Bearer   string `json:"bearer"`
	Harness  string `json:"harness"`
	// EnvironmentKey fixes the provider environment's id across
	// processes.
	EnvironmentKey string            `json:"environmentKey"`
	Profile        provider.Profile  `json:"profile"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]any    `json:"metadata,omitempty"`
	RunTag         string            `json:"runTag"`
	Deadline       time.Time         `json:"deadline"`
	// Egress is the box's egress policy (nil: none asked for): a resume
	// or a fork gives the box's new address its policy again.
	Egress *egress.Policy `json:"egress,omitempty"`
	// Continues lists the lost boxes whose sessions this box continues
	// (Environment.Replace), the latest first: their runs stay readable
	// from the replica, and their sessions' history travels with turns.
	Continues []string `json:"continues,omitempty"`
}

// String describes the reference without its bearer.
func (r Reference) String() string {
	return fmt.Sprintf("box %s on %s (%s, %s, until %s)", r.BoxID, r.Vendor, r.Harness, r.Endpoint, r.Deadline.Format(time.RFC3339))
}

// LogValue logs the reference without its bearer.
func (r Reference) LogValue() slog.Value {
	return slog.GroupValue(slog.String("vendor", r.Vendor), slog.String("box", r.BoxID), slog.String("endpoint", r.Endpoint),
		slog.String("harness", r.Harness), slog.Time("deadline", r.Deadline))
}

// GoString keeps %#v from printing the bearer.
func (r Reference) GoString() string { return "sandbox.Reference{" + r.String() + "}" }

// Format keeps every fmt verb from printing the bearer.
func (r Reference) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, r.String()) }

// Environment is a provider environment in a box: every provider
// operation, plus the box. It is safe for concurrent use.
type Environment struct {
	*provider.Environment
	p   *Provider
	pv  *provider.Provider
	box vendors.Box
	ref Reference

	phases []Phase // of the Create that made it

	mu   sync.Mutex
	busy bool
	last *provider.Reference // the latest dispatched run

	suspended  *SuspendedRef      // set by Suspend (suspend.go)
	egress     *egress.Policy     // the box's policy (egress.go), nil if none
	egressAddr netip.Addr         // the box's address at the gate, if confined
	stopIdle   context.CancelFunc // ends the idle watch, when one runs
	watch      *runWatch          // the watch of the last dispatched run (dispatch.go)
	closed     bool               // Close or Destroy began: no more watches
	lost       bool               // the box was lost (lost.go)

	req     *CreateRequest            // the request that made the box (nil from Connect)
	history map[string][]wire.Message // the sessions continued from lost boxes (replace.go); nil: not loaded

	successor *Environment // the environment that continues this lost one (Options.AutoReplace)
}

// Timings returns the phases of the Create that made this environment,
// in order (none for one from Connect).
func (e *Environment) Timings() []Phase { return slices.Clone(e.phases) }

// Box returns the box the environment runs in.
func (e *Environment) Box() vendors.Box { return e.box }

// Reference returns what Provider.Connect needs to drive this box from
// another process: once a successor continues it (Options.AutoReplace),
// the successor's.
func (e *Environment) Reference() Reference {
	if next := e.Successor(); next != nil {
		return next.Reference()
	}
	return e.ref
}

// acquire claims the environment for one turn. A dispatched run of this
// process that may still be live makes it busy (an unknown status counts
// as live); the bridge itself admits one live run per box, so a turn from
// another process is refused there (see busyFromBridge).
func (e *Environment) acquire(ctx context.Context, op string) error {
	e.mu.Lock()
	if e.lost {
		e.mu.Unlock()
		return &LostError{BoxID: e.box.ID(), Reason: "found lost before", Err: fmt.Errorf("%s: the box is gone", op)}
	}
	if e.busy {
		e.mu.Unlock()
		return busy(op)
	}
	e.busy = true
	last := e.last
	e.mu.Unlock()
	if last != nil {
		s, err := e.Session(last.ID, provider.SessionOptions{ControlRef: &last.ControlRef})
		if err == nil {
			var st provider.RunStatus
			if st, err = s.Status(ctx); err == nil && st.Terminal {
				e.settleWatch(ctx, st.Status)
				e.mu.Lock()
				if e.last == last {
					e.last = nil
				}
				e.mu.Unlock()
			} else if err == nil {
				err = busy(op)
			}
		}
		if err != nil {
			e.release()
			if ctx.Err() == nil {
				if reason := e.lostReason(ctx); reason != "" {
					e.noteLost(ctx, reason)
					return &LostError{BoxID: e.box.ID(), Reason: reason, Err: fmt.Errorf("%s: %w", op, err)}
				}
			}
			return fmt.Errorf("%s: the last dispatched turn may still run: %w", op, err)
		}
	}
	return nil
}

// busyFromBridge turns the bridge's refusal of a second live run into the
// conflict a caller tests for.
func busyFromBridge(op string, err error) error {
	var be *provider.BridgeError
	if errors.As(err, &be) && be.Type == wire.TypeExecutorSaturated {
		return fmt.Errorf("%w (%v)", busy(op), err)
	}
	return err
}

func (e *Environment) release() {
	e.mu.Lock()
	e.busy = false
	e.mu.Unlock()
}

func busy(op string) error {
	return &provider.ConflictError{Op: op, Type: wire.TypeSessionBusy, Message: "the environment's box is running another turn"}
}

// Stream starts a turn and yields its events until the run ends; see
// provider.Environment.Stream. A turn while another is live is refused
// with a *provider.ConflictError.
func (e *Environment) Stream(ctx context.Context, turn provider.Turn) iter.Seq2[provider.Event, error] {
	return func(yield func(provider.Event, error) bool) { e.stream(ctx, turn, true, yield) }
}

// stream is Stream; replace allows one replacement of a lost box in the
// call (Options.AutoReplace): a new box lost again before the turn is
// admitted ends the turn.
func (e *Environment) stream(ctx context.Context, turn provider.Turn, replace bool, yield func(provider.Event, error) bool) {
	next, made, err := e.continued(ctx, replace)
	switch {
	case err != nil:
		yield(provider.Event{}, err)
	case next != nil:
		next.stream(ctx, turn, replace && !made, yield)
	case e.streamOnce(ctx, turn, yield):
		e.stream(ctx, turn, replace, yield)
	}
}

// streamOnce is Stream on this environment's own box; lostFirst reports
// that the box was found lost before the turn was sent, nothing yielded,
// when the provider replaces lost boxes by itself. A box lost once the
// turn was sent ends it (the bridge may have admitted it): it is never
// sent again by itself.
func (e *Environment) streamOnce(ctx context.Context, turn provider.Turn, yield func(provider.Event, error) bool) (lostFirst bool) {
	if e.foundGone(ctx) {
		return true
	}
	if err := e.acquire(ctx, "environment.Stream"); err != nil {
		if _, lost := errors.AsType[*LostError](err); lost && e.p.o.AutoReplace {
			return true
		}
		yield(provider.Event{}, err)
		return false
	}
	defer e.release()
	turn, err := e.withHistory(ctx, turn)
	if err != nil {
		yield(provider.Event{}, err)
		return false
	}
	started := false
	outcome := ""
	var runID string
	e.p.emit(Event{Type: EventTurnStarted, BoxID: e.box.ID(), RunTag: e.ref.RunTag})
	before, metered := e.p.boxUsage(ctx, e.box.ID())
	defer func() {
		if outcome == "" {
			outcome = "stopped"
		}
		ev := Event{Type: EventTurnEnded, BoxID: e.box.ID(), RunTag: e.ref.RunTag, RunID: runID, Reason: outcome}
		if after, ok := e.p.boxUsage(context.WithoutCancel(ctx), e.box.ID()); ok && metered {
			ev.Usage = usageSince(before, after)
		}
		e.p.emit(ev)
	}()
	var (
		ref     provider.ControlRef
		lastSeq int64
	)
	for ev, err := range e.Environment.Stream(ctx, turn) {
		if ev.RunID != "" {
			if runID == "" {
				e.noteTurn(ctx, turn, provider.ControlRef{RunID: ev.RunID, SessionID: ev.SessionID, ExecutionID: ev.ExecutionID})
			}
			runID = ev.RunID
			ref = provider.ControlRef{RunID: ev.RunID, SessionID: ev.SessionID, ExecutionID: ev.ExecutionID,
				Provider: e.pv.Name(), EnvironmentID: e.ID()}
		}
		if n := ev.Frame(); n > lastSeq {
			lastSeq = n
		}
		if err != nil && ctx.Err() == nil {
			if reason := e.lostReason(ctx); reason != "" {
				// The box is gone: the rest of the run is the
				// replica's, and it ends saying so.
				e.noteLost(ctx, reason)
				outcome = "lost"
				turnID := turn.TurnID
				if turnID == "" {
					turnID = turn.ExecutionID
				}
				if ref.RunID == "" || !e.replicaRest(ctx, e.box.ID(), ref, turnID, lastSeq, reason, yield) {
					yield(provider.Event{}, &LostError{BoxID: e.box.ID(), Reason: reason, Err: err})
				}
				return false
			}
		}
		switch {
		case err != nil:
			outcome = "error"
		case ev.Type == provider.EventStatus && (ev.Status == provider.StatusCompleted ||
			ev.Status == provider.StatusFailed || ev.Status == provider.StatusCancelled):
			outcome = ev.Status
		case ev.Type == provider.EventResult && outcome == "":
			outcome = provider.StatusCompleted
		}
		if err == nil && !started {
			started = true
			open := provider.Event{Type: provider.EventExecutionStarted, RunID: ev.RunID, SessionID: ev.SessionID,
				ExecutionID: ev.ExecutionID, Model: e.Model()}
			if turn.Model != "" {
				open.Model = turn.Model
			}
			if !yield(open, nil) {
				return false
			}
		}
		if ev.Usage != nil {
			u := *ev.Usage
			u.Cost = nil // the bridge's dollar figure is an estimate
			ev.Usage = &u
			ev.Raw = withoutCost(ev.Raw)
		}
		if err != nil {
			err = busyFromBridge("environment.Stream", err)
		}
		if !yield(ev, err) {
			return false
		}
	}
	return false
}

// Dispatch starts a turn and returns once the bridge admitted it; see
// provider.Environment.Dispatch. A turn while another is live is refused
// with a *provider.ConflictError.
func (e *Environment) Dispatch(ctx context.Context, turn provider.Turn) (provider.Reference, error) {
	return e.dispatch(ctx, turn, true)
}

// dispatch is Dispatch; replace is stream's.
func (e *Environment) dispatch(ctx context.Context, turn provider.Turn, replace bool) (provider.Reference, error) {
	next, made, err := e.continued(ctx, replace)
	switch {
	case err != nil:
		return provider.Reference{}, err
	case next != nil:
		return next.dispatch(ctx, turn, replace && !made)
	}
	if e.foundGone(ctx) {
		return e.dispatch(ctx, turn, replace)
	}
	if err := e.acquire(ctx, "environment.Dispatch"); err != nil {
		if _, lost := errors.AsType[*LostError](err); lost && e.p.o.AutoReplace {
			return e.dispatch(ctx, turn, replace)
		}
		return provider.Reference{}, err
	}
	t, err := e.withHistory(ctx, turn)
	if err != nil {
		e.release()
		return provider.Reference{}, err
	}
	before, metered := e.p.boxUsage(ctx, e.box.ID())
	ref, err := e.Environment.Dispatch(ctx, t)
	err = busyFromBridge("environment.Dispatch", err)
	if err == nil {
		e.noteTurn(ctx, t, ref.ControlRef)
		e.p.emit(Event{Type: EventTurnStarted, BoxID: e.box.ID(), RunTag: e.ref.RunTag, RunID: ref.ControlRef.RunID})
		e.watchRun(ref, before, metered)
	}
	e.mu.Lock()
	e.busy = false
	if err == nil {
		e.last = &ref
	}
	e.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		if reason := e.lostReason(ctx); reason != "" {
			// The box is gone; whether the bridge admitted the turn is
			// unknown, so it is not sent again by itself.
			e.noteLost(ctx, reason)
			return provider.Reference{}, &LostError{BoxID: e.box.ID(), Reason: reason, Err: err}
		}
	}
	return ref, err
}

// Destroy cancels the environment's live runs, then destroys the box, even
// when a cancel fails (the runs end with the box); a failed box destroy
// returns a *vendors.CleanupError naming the box, with the cancel's error.
func (e *Environment) Destroy(ctx context.Context) (err error) {
	ctx, span := tracer.Start(ctx, "sandbox.destroy", trace.WithAttributes(
		attribute.String("boxctl.box_id", e.box.ID()), attribute.String("boxctl.reason", ReasonUser)))
	defer func() { tracing.End(span, err) }()
	e.endIdleWatch()
	e.endRunWatch() // closed: no successor is made from here on
	if next := e.Successor(); next != nil {
		defer func() { err = errors.Join(err, next.Destroy(ctx)) }()
	}
	cancelErr := e.Environment.Destroy(ctx)
	_ = e.pv.Close(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultDestroyTimeout)
	defer cancel()
	if err := e.box.Destroy(cctx); err != nil && !(errors.Is(err, vendors.ErrNotFound) && e.wasLost()) {
		return &vendors.CleanupError{Vendor: e.ref.Vendor, BoxID: e.box.ID(), Err: errors.Join(cancelErr, fmt.Errorf("destroy box: %w", err))}
	}
	e.p.revokeModel(cctx, e.box.ID())
	e.releaseEgress(cctx)
	e.p.emit(Event{Type: EventDestroyed, BoxID: e.box.ID(), RunTag: e.ref.RunTag, Reason: ReasonUser})
	if cancelErr != nil {
		// The box and every run in it are gone: a cancel that failed
		// (often because the box vanished first) changes nothing now.
		e.p.o.Logger.Debug("destroy: runs not confirmed cancelled before the box went", "box", e.box.ID(), "err", cancelErr)
	}
	return nil
}

// Close releases the environment's connections and leaves the box
// running (reconnect with Provider.Connect).
func (e *Environment) Close(ctx context.Context) error {
	e.endIdleWatch()
	e.endRunWatch()
	err := e.pv.Close(ctx)
	if next := e.Successor(); next != nil {
		err = errors.Join(err, next.Close(ctx))
	}
	return err
}

// BridgeLog returns what the bridge process printed so far.
func (e *Environment) BridgeLog(ctx context.Context) (stdout, stderr []byte, err error) {
	proc, err := e.box.Process(ctx, BridgeProcess)
	if err != nil {
		return nil, nil, err
	}
	return proc.Logs(ctx)
}

// FollowBridgeLog follows the bridge process's output from its start until
// it ends or ctx ends; the caller closes the readers.
func (e *Environment) FollowBridgeLog(ctx context.Context) (stdout, stderr io.ReadCloser, err error) {
	proc, err := e.box.Process(ctx, BridgeProcess)
	if err != nil {
		return nil, nil, err
	}
	return proc.Output(ctx)
}

// withoutCost drops every "cost" member from a JSON object tree (the
// bridge's dollar estimate), leaving other bytes as they are when there is
// none.
func withoutCost(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"cost"`)) {
		return raw
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	var strip func(any)
	strip = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			delete(t, "cost")
			for _, c := range t {
				strip(c)
			}
		case []any:
			for _, c := range t {
				strip(c)
			}
		}
	}
	strip(v)
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}
