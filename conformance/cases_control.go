package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

// turnTimeout is the Turn.Timeout of the control.timeout case.
const turnTimeout = 3 * time.Second

func controlCases() []Case {
	return []Case{
		{ID: "control.cancel", run: cancelCase,
			Description: "cancelling a live run returns once the bridge confirms it terminal and cancelled; the next turn runs"},
		{ID: "control.context-cancel", run: contextCancelCase,
			Description: "ending the caller's context ends the streamed turn with context.Canceled and cancels its run"},
		{ID: "control.timeout", run: timeoutCase,
			Description: "a turn past its timeout is cancelled and ends with a failed status and a *provider.TimeoutError naming it"},
		{ID: "control.busy", run: busyCase,
			Description: "a turn while another runs is a conflict, from this process and from another one"},
		{ID: "control.lookup", run: lookupCase,
			Description: "a lookup by the planned run coordinates finds exactly the run, and nothing for other coordinates"},
	}
}

// dispatchStall dispatches a turn that holds its model call, and returns
// once the model call is in flight (with the local endpoint) or the run
// was admitted.
func dispatchStall(c *caseCtx, env *sandbox.Environment) (provider.Reference, *provider.Session, error) {
	exec := newID("conformance-stall")
	req := c.step("Dispatch(%q, execution %s)", stallPrompt, exec)
	ref, err := env.Dispatch(c.ctx, provider.Turn{Prompt: stallPrompt + " (" + exec + ")", ExecutionID: exec})
	if err != nil {
		return ref, nil, failf(req, "an admitted run", "%v", err)
	}
	if l := c.local(); l != nil {
		if err := l.waitPrompt(c.ctx, exec); err != nil {
			return ref, nil, failf(req, "the model call in flight", "%v", err)
		}
	}
	s, err := env.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
	if err != nil {
		return ref, nil, failf(c.step("environment.Session(%s)", ref.ID), "the run's session", "%v", err)
	}
	return ref, s, nil
}

// sessionEnded checks that the current run of a session env streamed is
// terminal on the bridge, with status want when it is not "".
func sessionEnded(c *caseCtx, env *sandbox.Environment, session, what, want string) error {
	s, err := env.Session(session, provider.SessionOptions{})
	if err != nil {
		return failf(c.step("environment.Session(%s)", session), "the turn's session", "%v", err)
	}
	req := c.step("Session.Status of %s", what)
	st, err := s.Status(c.ctx)
	if err != nil || !st.Terminal || (want != "" && st.Status != want) {
		return failf(req, strings.TrimSpace("terminal "+want+" on the bridge"), "%+v, %v", st, err)
	}
	return nil
}

// nextTurn checks that env runs a plain turn.
func nextTurn(c *caseCtx, env *sandbox.Environment, after string) error {
	req := c.step("Stream(%q) after %s", plainPrompt, after)
	_, text, err := c.stream(c.ctx, env, provider.Turn{Prompt: plainPrompt})
	if err != nil {
		return failf(req, "a completed turn", "%v", err)
	}
	return c.wantText(req, text, ReplyText)
}

func cancelCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	ref, s, err := dispatchStall(c, env)
	if err != nil {
		return err
	}
	req := c.step("Session.Cancel of live run %s", ref.ControlRef.RunID)
	st, err := s.Cancel(c.ctx)
	if err != nil || !st.Terminal || st.Status != provider.StatusCancelled {
		return failf(req, "terminal and cancelled", "%+v, %v", st, err)
	}
	req = c.step("Session.Status of run %s after the cancel", ref.ControlRef.RunID)
	if st, err := s.Status(c.ctx); err != nil || !st.Terminal || st.Status != provider.StatusCancelled {
		return failf(req, "terminal and cancelled", "%+v, %v", st, err)
	}
	return nextTurn(c, env, "the cancel")
}

func contextCancelCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	exec, session := newID("conformance-ctx"), newID("conformance-session")
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	if l := c.local(); l != nil {
		go func() {
			_ = l.waitPrompt(ctx, exec)
			cancel()
		}()
	}
	req := c.step("Stream(%q), its context cancelled once the run is live", stallPrompt)
	var seen int
	var err2 error
	for ev, err := range env.Stream(ctx, provider.Turn{Prompt: stallPrompt + " (" + exec + ")", ExecutionID: exec, SessionID: session}) {
		if err != nil {
			err2 = err
			break
		}
		seen++
		if c.local() == nil && ev.Type == provider.EventExecutionStarted {
			cancel()
		}
	}
	if !errors.Is(err2, context.Canceled) {
		return failf(req, "context.Canceled", "%v after %d events", err2, seen)
	}
	if err := sessionEnded(c, env, session, "the turn whose context ended", provider.StatusCancelled); err != nil {
		return err
	}
	return nextTurn(c, env, "the cancelled context")
}

func timeoutCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	exec, session := newID("conformance-timeout"), newID("conformance-session")
	req := c.step("Stream(%q, Timeout %v)", stallPrompt, turnTimeout)
	start := time.Now()
	evs, _, err := c.stream(c.ctx, env, provider.Turn{Prompt: stallPrompt + " (" + exec + ")", ExecutionID: exec, SessionID: session,
		Timeout: turnTimeout})
	took := time.Since(start)
	var te *provider.TimeoutError
	if !errors.As(err, &te) || te.Timeout != turnTimeout || !errors.Is(err, provider.ErrTurnTimeout) {
		return failf(req, fmt.Sprintf("a *provider.TimeoutError of %v", turnTimeout), "%v after %v and %s", err, took, listEvents(evs))
	}
	if len(evs) == 0 {
		return failf(req, "a failed status event naming the timeout", "no events")
	}
	if last := evs[len(evs)-1]; last.Type != provider.EventStatus || last.Status != provider.StatusFailed || !strings.Contains(last.Detail, "timeout") {
		return failf(req, "a failed status event naming the timeout", "the last event is %s %s %q", last.Type, last.Status, last.Detail)
	}
	if err := sessionEnded(c, env, session, "the timed-out run "+te.RunID, ""); err != nil {
		return err
	}
	c.note("timed out and confirmed terminal %v after the start", took.Round(time.Millisecond))
	return nextTurn(c, env, "the timeout")
}

func busyCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	ref, s, err := dispatchStall(c, env)
	if err != nil {
		return err
	}
	var ce *provider.ConflictError
	req := c.step("Stream(%q) while run %s is live", plainPrompt, ref.ControlRef.RunID)
	if _, _, err := c.stream(c.ctx, env, provider.Turn{Prompt: plainPrompt}); !errors.As(err, &ce) {
		return failf(req, "a *provider.ConflictError", "%v", err)
	}
	// Another process, reconnected from the reference, is refused by the
	// bridge itself.
	e2, err := c.connect(env)
	if err != nil {
		return err
	}
	req = c.step("Stream(%q) from a reconnected provider while run %s is live", plainPrompt, ref.ControlRef.RunID)
	if _, _, err := c.stream(c.ctx, e2, provider.Turn{Prompt: plainPrompt}); !errors.As(err, &ce) {
		return failf(req, "a *provider.ConflictError", "%v", err)
	}
	req = c.step("Session.Cancel of run %s", ref.ControlRef.RunID)
	if st, err := s.Cancel(c.ctx); err != nil || !st.Terminal {
		return failf(req, "a terminal run", "%+v, %v", st, err)
	}
	return nextTurn(c, env, "the busy run ended")
}

func lookupCase(c *caseCtx) error {
	d, err := dispatchDone(c)
	if err != nil {
		return err
	}
	ref := d.ref.ControlRef
	if ref.RunID != ref.ExecutionID {
		return failf("Dispatch with a valid run id as its ExecutionID", "the run id "+ref.ExecutionID, "run id %s", ref.RunID)
	}
	p, err := c.bridge(d.env, provider.Options{Name: ref.Provider})
	if err != nil {
		return err
	}
	planned := provider.PlannedRun{RunID: ref.RunID, EnvironmentID: ref.EnvironmentID, SessionID: ref.SessionID, ExecutionID: ref.ExecutionID}
	req := c.step("LookupRun(%+v)", planned)
	got, err := p.LookupRun(c.ctx, planned)
	if err != nil || got == nil || *got != ref {
		return failf(req, fmt.Sprintf("%+v", ref), "%+v, %v", got, err)
	}
	for name, other := range map[string]provider.PlannedRun{
		"another session":     {RunID: ref.RunID, EnvironmentID: ref.EnvironmentID, SessionID: newID("conformance-other"), ExecutionID: ref.ExecutionID},
		"another execution":   {RunID: ref.RunID, EnvironmentID: ref.EnvironmentID, SessionID: ref.SessionID, ExecutionID: newID("conformance-other")},
		"another environment": {RunID: ref.RunID, EnvironmentID: newID("conformance-other"), SessionID: ref.SessionID, ExecutionID: ref.ExecutionID},
		"a run never started": {RunID: newID("conformance-none"), EnvironmentID: ref.EnvironmentID, SessionID: ref.SessionID, ExecutionID: ref.ExecutionID},
	} {
		req := c.step("LookupRun with %s", name)
		if got, err := p.LookupRun(c.ctx, other); err != nil || got != nil {
			return failf(req, "nil: no such run", "%+v, %v", got, err)
		}
	}
	return nil
}
