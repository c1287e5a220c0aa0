package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// MaxResultEvents is how many of the newest events a TurnResult keeps.
const MaxResultEvents = 1024

// Session controls one session's current run. It is safe for concurrent
// use.
type Session struct {
	e  *Environment
	id string
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// current returns the session's current run, or nil.
func (s *Session) current() (*run, error) {
	if err := s.e.live(); err != nil {
		return nil, err
	}
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.e.sessions[s.id], nil
}

func (s *Session) requireRun() (*run, error) {
	r, err := s.current()
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("cli-bridge session %q has no run", s.id)
	}
	return r, nil
}

// ControlRef returns the exact reference of the session's current run,
// and false while the session has no admitted run.
func (s *Session) ControlRef() (ControlRef, bool) {
	r, err := s.current()
	if err != nil || r == nil || !r.admitted() {
		return ControlRef{}, false
	}
	return r.controlRef(), true
}

// RunStatus is the bridge's view of a run.
type RunStatus struct {
	// Status is running, completed, failed, cancelled or unknown.
	Status string
	// Terminal reports whether the run ended.
	Terminal bool
	// Snapshot is the bridge's run snapshot.
	Snapshot wire.RunSnapshot
}

// Status reads the current run's status. A run the bridge does not know is
// a *NotFoundError; a snapshot with other coordinates is an
// *IdentityMismatchError.
func (s *Session) Status(ctx context.Context) (RunStatus, error) {
	r, err := s.requireRun()
	if err != nil {
		return RunStatus{}, err
	}
	snap, err := s.e.p.c.snapshot(ctx, "session.Status", r, 0)
	if err != nil {
		return RunStatus{}, err
	}
	return RunStatus{Status: statusOf(snap), Terminal: snap.Terminal, Snapshot: *snap}, nil
}

// Events replays the current run's events strictly after since ("" or "0"
// from the start, or an Event.ID), then follows the live run to its end.
// Breaking out of the loop detaches this reader only; the run goes on. A
// cursor older than the bridge retains is an *ExpiredCursorError.
func (s *Session) Events(ctx context.Context, since string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		r, err := s.requireRun()
		if err != nil {
			yield(Event{}, err)
			return
		}
		if since == "" {
			since = "0"
		}
		err = s.e.readRun(ctx, "session.Events", r, since, func(ev Event) bool { return yield(ev, nil) })
		if err != nil && !errors.Is(err, errStopped) {
			yield(Event{}, err)
		}
	}
}

// readRun replays a run as a detachable reader. A reader stopped by the
// run's confirmed cancellation still reads the run to its end.
func (e *Environment) readRun(ctx context.Context, op string, r *run, since string, yield func(Event) bool) error {
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer e.addReader(stop)()
	defer r.addReader(stop)()
	last := since
	track := func(ev Event) bool {
		if ev.ID != "" {
			last = ev.ID
		}
		return yield(ev)
	}
	err := e.p.c.streamRun(rctx, r, streamSpec{op: op, since: since}, &streamResult{}, track)
	if err != nil && !errors.Is(err, errStopped) && endedBy(ctx, rctx) {
		err = e.readRest(ctx, op, r, last, track)
	}
	if err == nil {
		e.settled(r)
	}
	return err
}

// TurnResult is the outcome of a finished run.
type TurnResult struct {
	RunID       string
	SessionID   string
	ExecutionID string
	// RequestDigest is the bridge's digest of the run's request.
	RequestDigest string
	// Status is completed, failed or cancelled (from the run snapshot).
	Status string
	// Success is true only for a completed run whose stream had no error.
	Success bool
	Error   string
	// Text is the full visible text of the turn.
	Text         string
	FinishReason string
	// Usage sums the usage the run reported; nil if it reported none.
	Usage *Usage
	// ModelRequests is set only when the bridge counted it exactly.
	ModelRequests *int64
	// ProviderModels are the models the model API said served the turn.
	ProviderModels []string
	// Events are the newest MaxResultEvents events; EventCount counts all.
	Events     []Event
	EventCount int
	// Harness says how the harness process came to serve the turn: handed
	// it ready, or started for it and why (a setting that changed names
	// the setting); nil from a bridge that does not say.
	Harness *wire.HarnessStart
}

// Result replays the current run from the start and returns its terminal
// result, waiting for a live run to end. Replay past the bridge's
// retention fails with an *ExpiredCursorError or *NotFoundError.
func (s *Session) Result(ctx context.Context) (*TurnResult, error) {
	r, err := s.requireRun()
	if err != nil {
		return nil, err
	}
	res, err := s.e.collect(ctx, "session.Result", r, func(yield func(Event) bool) error {
		return s.e.readRun(ctx, "session.Result", r, "0", yield)
	})
	if err == nil {
		s.e.recordUsage(res.ExecutionID, res.Usage)
	}
	return res, err
}

// Prompt adds a turn to this session and returns its result. A session of
// a reconstructed environment refuses with a *ReconstructedError. When the
// turn's Timeout expires first, the run is cancelled and Prompt returns
// both the failed TurnResult (Status failed, Error naming the timeout) and
// the *TimeoutError.
func (s *Session) Prompt(ctx context.Context, turn Turn) (*TurnResult, error) {
	const op = "session.Prompt"
	if err := s.e.live(); err != nil {
		return nil, err
	}
	if s.e.reconstructed {
		return nil, &ReconstructedError{Op: op, Session: true}
	}
	if turn.SessionID != "" && turn.SessionID != s.id {
		return nil, fmt.Errorf("%s: cli-bridge session %q cannot prompt session %q", op, s.id, turn.SessionID)
	}
	turn.SessionID = s.id
	r, err := s.e.prepare(op, &turn)
	if err != nil {
		return nil, err
	}
	res, err := s.e.collect(ctx, op, r, func(yield func(Event) bool) error {
		var serr error
		s.e.streamTracked(ctx, op, r, &turn, func(ev Event, err error) bool {
			if err != nil {
				serr = err
				return false
			}
			return yield(ev)
		})
		return serr
	})
	if err == nil {
		s.e.recordUsage(res.ExecutionID, res.Usage)
	}
	return res, err
}

// collect reads a run's events into a TurnResult, then reads the run's
// terminal snapshot.
func (e *Environment) collect(ctx context.Context, op string, r *run, read func(func(Event) bool) error) (*TurnResult, error) {
	res := &TurnResult{}
	var requests *int64
	streamErr := read(func(ev Event) bool {
		res.EventCount++
		res.Events = append(res.Events, ev)
		if len(res.Events) > MaxResultEvents {
			res.Events = append(res.Events[:0:0], res.Events[len(res.Events)-MaxResultEvents:]...)
		}
		if ev.Type == EventResult {
			// The result carries the turn's totals.
			res.Text, res.FinishReason = ev.FinalText, ev.FinishReason
			if ev.ModelRequests != nil {
				res.ModelRequests = ev.ModelRequests
			}
			if ev.Usage != nil {
				res.Usage = ev.Usage
			}
		} else {
			res.Text += ev.Delta
			if ev.Type == EventUsage && ev.ModelRequests != nil {
				requests = addOpt(requests, ev.ModelRequests)
			}
			res.Usage = AddUsage(res.Usage, ev.Usage)
		}
		if len(ev.ProviderModels) > 0 {
			res.ProviderModels = ev.ProviderModels
		}
		return true
	})
	if res.ModelRequests == nil {
		res.ModelRequests = requests
	}
	cctx, cancel := e.cleanupContext(ctx)
	defer cancel()
	snap, err := e.p.c.snapshot(cctx, op, r, 0)
	if err != nil {
		if streamErr != nil {
			return nil, streamErr
		}
		return nil, err
	}
	if !snap.Terminal {
		if streamErr != nil {
			return nil, streamErr
		}
		return nil, fmt.Errorf("%s: cli-bridge run %q has no terminal result", op, snap.ID)
	}
	ref := r.controlRef()
	res.RunID, res.SessionID, res.ExecutionID, res.RequestDigest = ref.RunID, ref.SessionID, ref.ExecutionID, ref.RequestDigest
	res.Status = statusOf(snap)
	res.Harness = snap.Harness
	res.Success = snap.Status == wire.StatusDone && streamErr == nil
	if !res.Success {
		res.Error = "cli-bridge run ended " + snap.Status
		if streamErr != nil {
			res.Error = streamErr.Error()
		}
	}
	if errors.Is(streamErr, ErrTurnTimeout) {
		// The client ended the run: it failed its bound, whatever the
		// bridge calls the cancellation.
		res.Status = StatusFailed
		return res, streamErr
	}
	return res, nil
}

// Cancel cancels the current run and returns only when the bridge
// confirms it terminal (or Options.CancelWait passes).
func (s *Session) Cancel(ctx context.Context) (RunStatus, error) {
	r, err := s.requireRun()
	if err != nil {
		return RunStatus{}, err
	}
	snap, err := s.e.p.c.cancelRun(ctx, r, reasonCleanup)
	if err != nil {
		return RunStatus{}, err
	}
	s.e.settled(r)
	return RunStatus{Status: statusOf(snap), Terminal: snap.Terminal, Snapshot: *snap}, nil
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// Run returns control of an earlier run of this environment by its run
// id alone (one another process started, say): the bridge's snapshot of
// the run gives its exact ControlRef. A run the bridge does not know is a
// *NotFoundError; one of another environment is an
// *IdentityMismatchError.
func (e *Environment) Run(ctx context.Context, runID string) (*Session, error) {
	const op = "environment.Run"
	if err := wire.ValidRunID(runID); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	snap, err := e.p.c.getSnapshot(ctx, op, runID, 0)
	if err != nil {
		return nil, err
	}
	if err := checkSnapshot(op, snap); err != nil {
		return nil, err
	}
	ref := ControlRef{RunID: snap.ID, Provider: snap.Provider, EnvironmentID: snap.EnvironmentID, SessionID: snap.SessionID,
		ExecutionID: snap.ExecutionID, RequestDigest: snap.RequestDigest}
	if ref.RunID != runID || ref.Provider != e.p.Name() || ref.EnvironmentID != e.id {
		return nil, &IdentityMismatchError{Op: op, Reason: fmt.Sprintf("cli-bridge run %q is not of this environment", runID)}
	}
	return e.Session(ref.SessionID, SessionOptions{ControlRef: &ref})
}
