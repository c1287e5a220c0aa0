package provider

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Environment is one agent profile on one bridge. It is safe for
// concurrent use.
type Environment struct {
	p             *Provider
	id            string
	req           CreateRequest
	backend       string
	model         string
	caps          *Capabilities
	reconstructed bool

	mu        sync.Mutex
	destroyed bool
	runs      map[string]*run // runs this environment started and has not seen end
	sessions  map[string]*run // the current run of each session id
	natives   map[string]*nativeSession
	readers   map[*int]context.CancelCauseFunc
	usage     *usageRecord
}

func newEnvironment(p *Provider, id string, req CreateRequest, backend, model string, caps *Capabilities, reconstructed bool) *Environment {
	return &Environment{p: p, id: id, req: req, backend: backend, model: model, caps: caps, reconstructed: reconstructed,
		runs: map[string]*run{}, sessions: map[string]*run{}, natives: map[string]*nativeSession{}, readers: map[*int]context.CancelCauseFunc{}}
}

// ID returns the environment id: pass it to Provider.Get in another
// process to control this environment's runs.
func (e *Environment) ID() string { return e.id }

// Model returns the exact bridge model route of the environment, or "" if
// the environment was created without one.
func (e *Environment) Model() string { return e.model }

// Capabilities returns what this environment offers.
func (e *Environment) Capabilities() *Capabilities { return e.caps }

// Reconstructed reports whether the environment came from Provider.Get.
func (e *Environment) Reconstructed() bool { return e.reconstructed }

// native reports whether turns use the retained native session routes.
func (e *Environment) native() bool { return e.caps.InteractionsProven() }

func (e *Environment) live() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.destroyed {
		return ErrDestroyed
	}
	return nil
}

// prepare checks a new turn and fixes its run identity. Every refusal here
// happens before any network use.
func (e *Environment) prepare(op string, turn *Turn) (*run, error) {
	if err := e.live(); err != nil {
		return nil, err
	}
	if e.p.c.bg.isClosed() {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	if e.reconstructed {
		return nil, &ReconstructedError{Op: op}
	}
	if turn.Timeout < 0 {
		return nil, fmt.Errorf("%s: turn timeout must not be negative", op)
	}
	if err := wire.CheckHistory(turn.History); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	model, err := resolveModel(e.p.c.opts, &e.req, turn.Model)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if e.model != "" && e.caps.RetainedControl != nil && model != e.model {
		return nil, fmt.Errorf("%s: cli-bridge environment model is %q; create another environment for %q", op, e.model, model)
	}
	if turn.Interactions != nil {
		advertised := map[string]bool{}
		if e.caps.Interactions != nil {
			for _, k := range e.caps.Interactions.Kinds {
				advertised[k] = true
			}
		}
		var missing []string
		for k := range turn.Interactions {
			if !advertised[k] {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return nil, fmt.Errorf("%s: cli-bridge environment does not advertise requested interaction kind(s): %s", op, strings.Join(missing, ", "))
		}
	}
	r, err := prepareRun(e.p.Name(), e.id, turn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	r.model = model
	body := chatBody(e.p.c.opts, &e.req, turn, model, r)
	if r.body, err = jsonMarshal(body); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return r, nil
}

// bind makes r the environment's active run and its session's current
// run; the returned function restores the previous bindings (for a turn
// the bridge rejected).
func (e *Environment) bind(r *run) (restore func()) {
	ref := r.controlRef()
	e.mu.Lock()
	prevRun, prevSession := e.runs[ref.RunID], e.sessions[ref.SessionID]
	e.runs[ref.RunID], e.sessions[ref.SessionID] = r, r
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.runs[ref.RunID] == r {
			if prevRun != nil {
				e.runs[ref.RunID] = prevRun
			} else {
				delete(e.runs, ref.RunID)
			}
		}
		if e.sessions[ref.SessionID] == r {
			if prevSession != nil {
				e.sessions[ref.SessionID] = prevSession
			} else {
				delete(e.sessions, ref.SessionID)
			}
		}
	}
}

// settled forgets r as an active run: it reached its end.
func (e *Environment) settled(r *run) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id := r.controlRef().RunID; e.runs[id] == r {
		delete(e.runs, id)
	}
}

func (e *Environment) addReader(cancel context.CancelCauseFunc) func() {
	key := new(int)
	e.mu.Lock()
	e.readers[key] = cancel
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		delete(e.readers, key)
		e.mu.Unlock()
	}
}

// cleanupContext is the context of a cleanup that must run even when the
// caller's context ended.
func (e *Environment) cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.p.c.opts.CancelWait)
}

// Reference is a dispatched run: its session id and exact ControlRef.
type Reference struct {
	ID         string     `json:"id"`
	ControlRef ControlRef `json:"controlRef"`
}

// Dispatch starts a turn and returns as soon as the bridge durably
// admitted the run, detaching its reader; the run goes on in the bridge.
// Persist the returned ControlRef before treating the turn as accepted.
// A *TransportError means the outcome is unknown: retry with the same
// ExecutionID, or use Provider.LookupRun. A turn Timeout is enforced from
// a goroutine the Provider owns: when it expires before the run ended, the
// run is cancelled on the bridge, until Provider.Close stops enforcing.
func (e *Environment) Dispatch(ctx context.Context, turn Turn) (Reference, error) {
	const op = "environment.Dispatch"
	start := time.Now()
	r, err := e.prepare(op, &turn)
	if err != nil {
		return Reference{}, err
	}
	restore := e.bind(r)
	res := &streamResult{}
	if e.native() {
		err = e.beginNative(ctx, op, r, &turn, res)
	} else {
		resp, oerr := e.p.c.openStream(ctx, r, streamSpec{op: op, direct: true}, cursor{}, res)
		if oerr == nil {
			resp.Body.Close() // detach: only cancel stops the run
		}
		err = oerr
	}
	if err == nil {
		err = r.controlRef().Validate()
	}
	if err != nil {
		if res.rejected {
			restore()
			return Reference{}, err
		}
		if res.admitted {
			cctx, cancel := e.cleanupContext(ctx)
			defer cancel()
			if _, cerr := e.p.c.cancelRun(cctx, r, reasonCleanup); cerr != nil {
				err = errors.Join(err, fmt.Errorf("cli-bridge dispatch %q failed and cancellation was not confirmed: %w", r.controlRef().RunID, cerr))
			} else {
				e.settled(r)
			}
			return Reference{}, err
		}
		restore()
		return Reference{}, err
	}
	if turn.Timeout > 0 {
		e.enforceTimeout(r, start.Add(turn.Timeout), turn.Timeout)
	}
	ref := r.controlRef()
	return Reference{ID: ref.SessionID, ControlRef: ref}, nil
}

// Stream starts a turn and yields its events until the run ends. The
// iterator is single-use. Breaking out of the loop (or ctx ending) cancels
// the run and waits for the bridge to confirm it terminal. An error ends
// the sequence. When the turn's Timeout expires first, the run is
// cancelled, and once the bridge confirms it terminal the stream ends with
// a failed status event naming the timeout, then a *TimeoutError.
func (e *Environment) Stream(ctx context.Context, turn Turn) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, ts := startTurnSpan(ctx, e.id, &turn)
		var serr error
		defer func() { ts.end(serr) }()
		r, err := e.prepare("environment.Stream", &turn)
		if err != nil {
			serr = err
			yield(Event{}, err)
			return
		}
		e.streamTracked(ctx, "environment.Stream", r, &turn, func(ev Event, err error) bool {
			if err != nil {
				serr = err
			} else {
				ts.see(ev)
			}
			return yield(ev, err)
		})
	}
}

// streamTracked runs a new turn's stream with the cleanup rules of
// Stream.
func (e *Environment) streamTracked(ctx context.Context, op string, r *run, turn *Turn, yield func(Event, error) bool) {
	tctx, stopTimer := turnContext(ctx, op, r, turn.Timeout)
	defer stopTimer()
	rctx, stop := context.WithCancelCause(tctx)
	defer stop(nil)
	defer e.addReader(stop)()
	defer r.addReader(stop)()
	restore := e.bind(r)
	res := &streamResult{}
	var usage *Usage
	last := turn.LastEventID
	emit := func(ev Event) bool {
		if ev.ID != "" {
			last = ev.ID
		}
		if ev.Usage != nil {
			if ev.Type == EventResult {
				// The result carries the turn's totals.
				usage = ev.Usage
			} else {
				usage = AddUsage(usage, ev.Usage)
			}
			e.recordUsage(r.controlRef().ExecutionID, usage)
		}
		return yield(ev, nil)
	}
	var err error
	spec := streamSpec{op: op, direct: true, since: turn.LastEventID}
	if e.native() {
		if err = e.beginNative(rctx, op, r, turn, res); err == nil {
			spec.direct = false
			err = e.p.c.streamRun(rctx, r, spec, &streamResult{}, emit)
		}
	} else {
		err = e.p.c.streamRun(rctx, r, spec, res, emit)
	}
	if err != nil && !errors.Is(err, errStopped) && endedBy(tctx, rctx) {
		// The run's confirmed cancellation stopped this stream: its last
		// events are stored.
		err = e.readRest(tctx, op, r, last, emit)
	}
	if err == nil {
		e.settled(r)
		return
	}
	// Whatever failed once the turn's bound expired failed because of it;
	// the caller's own ctx never yields a *TimeoutError.
	var te *TimeoutError
	reason := reasonCleanup
	if errors.As(err, &te) {
		err, reason = te, te.reason()
	}
	if res.rejected {
		restore()
		yield(Event{}, err)
		return
	}
	cctx, cancel := e.cleanupContext(ctx)
	defer cancel()
	if errors.Is(err, errStopped) {
		// The consumer stopped reading: the run must not go on unobserved.
		if _, cerr := e.p.c.cancelRun(cctx, r, reasonCleanup); cerr == nil {
			e.settled(r)
		}
		return
	}
	s, serr := e.p.c.snapshot(cctx, op, r, 0)
	var nf *NotFoundError
	ended := false // the bridge confirmed the run terminal
	switch {
	case errors.As(serr, &nf) && !res.admitted:
		restore() // the bridge never admitted the run
	case serr == nil && s.Terminal:
		e.settled(r)
		ended = true
	case ctx.Err() != nil || te != nil || !r.admitted() || isIdentityFailure(err):
		if _, cerr := e.p.c.cancelRun(cctx, r, reason); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cli-bridge stream %q failed and exact cancellation was not confirmed: %w", r.controlRef().RunID, cerr))
		} else {
			e.settled(r)
			ended = true
		}
	}
	if te != nil && ended && !yield(timeoutEvent(r, te), nil) {
		return
	}
	yield(Event{}, err)
}

func isIdentityFailure(err error) bool {
	var im *IdentityMismatchError
	var pe *ProtocolError
	return errors.As(err, &im) || errors.As(err, &pe)
}

// SessionOptions tunes Session.
type SessionOptions struct {
	// ControlRef re-attaches to exactly this run; it must name this
	// provider, environment and session.
	ControlRef *ControlRef
}

// Session returns control of a session's current run. With a ControlRef
// (after a restart) the session attaches to exactly that run, and any
// coordinate or digest that does not bind is refused with an
// *IdentityMismatchError.
func (e *Environment) Session(id string, o SessionOptions) (*Session, error) {
	const op = "environment.Session"
	if err := e.live(); err != nil {
		return nil, err
	}
	if o.ControlRef != nil {
		ref := *o.ControlRef
		if err := ref.Validate(); err != nil {
			return nil, &IdentityMismatchError{Op: op, Reason: "cli-bridge control reference is invalid: " + err.Error()}
		}
		if ref.Provider != e.p.Name() || ref.EnvironmentID != e.id || ref.SessionID != id {
			return nil, &IdentityMismatchError{Op: op, Reason: "cli-bridge control reference does not bind to this session"}
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		cur := e.sessions[id]
		if cur == nil {
			cur = e.runs[ref.RunID]
		}
		if cur != nil {
			if cur.controlRef() != ref {
				return nil, &IdentityMismatchError{Op: op, Reason: "cli-bridge control reference conflicts with the retained run"}
			}
		} else {
			cur = &run{ref: ref, turnID: ref.ExecutionID}
		}
		e.sessions[id] = cur
	}
	return &Session{e: e, id: id}, nil
}

// Destroy ends the environment. An environment from Create cancels the
// runs it started and still controls, and waits until the bridge confirms
// each terminal; a reconstructed one cancels nothing. Readers are then
// stopped. If a cancellation is not confirmed, the environment stays usable
// and Destroy can be called again.
func (e *Environment) Destroy(ctx context.Context) error {
	e.mu.Lock()
	if e.destroyed {
		e.mu.Unlock()
		return nil
	}
	runs := make([]*run, 0, len(e.runs))
	for _, r := range e.runs {
		runs = append(runs, r)
	}
	e.mu.Unlock()
	if !e.reconstructed {
		var wg sync.WaitGroup
		errs := make([]error, len(runs))
		for i, r := range runs {
			wg.Go(func() {
				if _, err := e.p.c.cancelRun(ctx, r, reasonCleanup); err != nil {
					errs[i] = err
					return
				}
				e.settled(r)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("destroy environment: %w", err)
		}
	}
	e.mu.Lock()
	e.destroyed = true
	readers := e.readers
	e.readers = map[*int]context.CancelCauseFunc{}
	e.runs, e.sessions, e.natives = map[string]*run{}, map[string]*run{}, map[string]*nativeSession{}
	e.mu.Unlock()
	for _, stop := range readers {
		stop(ErrDestroyed)
	}
	return nil
}

// statusOf maps a run snapshot status to a session status.
func statusOf(s *wire.RunSnapshot) string {
	switch s.Status {
	case wire.StatusDone:
		return StatusCompleted
	case wire.StatusError:
		return StatusFailed
	case wire.StatusCancelled:
		return StatusCancelled
	case wire.StatusRunning:
		return "running"
	default:
		return "unknown"
	}
}
