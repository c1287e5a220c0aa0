package conformance

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

func sessionCases() []Case {
	return []Case{
		{ID: "session.dispatch", run: dispatchCase,
			Description: "a dispatched turn returns a valid control reference whose run completes and reads back"},
		{ID: "session.competing-ref", run: competingRefCase,
			Description: "a control reference that names another run, session or request is refused, here and after a restart"},
		{ID: "session.event-ids", run: eventIDsCase,
			Description: "event ids are stable and unique: the live stream and every full replay carry the same events"},
		{ID: "session.replay-cursor", run: replayCursorCase,
			Description: "a replay after a cursor equals the tail of the full replay; a cursor ahead of the stream is a conflict"},
		{ID: "session.rebuilt", run: rebuiltCase,
			Description: "a session rebuilt from the control reference in a new provider replays, resumes and reads the same run"},
		{ID: "session.suspended", run: suspendedCase,
			Description: "after the box is suspended and resumed, the earlier run replays unchanged and the session's next turn continues its conversation"},
	}
}

// dispatched is a completed dispatched turn.
type dispatched struct {
	env  *sandbox.Environment
	ref  provider.Reference
	sess *provider.Session
	res  *provider.TurnResult
}

// dispatchDone makes an environment, dispatches a plain turn with
// planned coordinates and waits for its result.
func dispatchDone(c *caseCtx) (*dispatched, error) {
	env, err := c.env()
	if err != nil {
		return nil, err
	}
	exec := newID("conformance-exec")
	return dispatchOn(c, env, provider.Turn{Prompt: plainPrompt, ExecutionID: exec, SessionID: newID("conformance-session")})
}

// dispatchOn dispatches turn on env and waits for its completed result,
// whose text must be the scripted reply.
func dispatchOn(c *caseCtx, env *sandbox.Environment, turn provider.Turn) (*dispatched, error) {
	req := c.step("Dispatch(%q, execution %s, session %s)", turn.Prompt, turn.ExecutionID, turn.SessionID)
	ref, err := env.Dispatch(c.ctx, turn)
	if err != nil {
		return nil, failf(req, "an admitted run", "%v", err)
	}
	s, err := env.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
	if err != nil {
		return nil, failf(c.step("environment.Session(%s, its ControlRef)", ref.ID), "the session", "%v", err)
	}
	req = c.step("Session.Result of run %s", ref.ControlRef.RunID)
	res, err := s.Result(c.ctx)
	if err != nil {
		return nil, failf(req, "the run's result", "%v", err)
	}
	if !res.Success || res.RunID != ref.ControlRef.RunID {
		return nil, failf(req, "a completed run "+ref.ControlRef.RunID, "run %s %s (%s)", res.RunID, res.Status, res.Error)
	}
	if err := c.wantText(req, res.Text, ReplyText); err != nil {
		return nil, err
	}
	return &dispatched{env: env, ref: ref, sess: s, res: res}, nil
}

func dispatchCase(c *caseCtx) error {
	d, err := dispatchDone(c)
	if err != nil {
		return err
	}
	ref := d.ref.ControlRef
	req := "Dispatch"
	if err := ref.Validate(); err != nil {
		return failf(req, "a valid ControlRef", "%+v: %v", ref, err)
	}
	if ref.EnvironmentID != d.env.ID() || ref.SessionID != d.ref.ID {
		return failf(req, fmt.Sprintf("a ControlRef of environment %s, session %s", d.env.ID(), d.ref.ID), "%+v", ref)
	}
	req = c.step("Session.Status of run %s", ref.RunID)
	st, err := d.sess.Status(c.ctx)
	if err != nil || !st.Terminal || st.Status != provider.StatusCompleted {
		return failf(req, "terminal completed", "%+v, %v", st, err)
	}
	return nil
}

func competingRefCase(c *caseCtx) error {
	d, err := dispatchDone(c)
	if err != nil {
		return err
	}
	ref := d.ref.ControlRef
	otherDigest := ref
	otherDigest.RequestDigest = "sha256:" + fmt.Sprintf("%064x", 1)
	var im *provider.IdentityMismatchError
	req := c.step("environment.Session(%s) with the run's ControlRef but another request digest", d.ref.ID)
	if _, err := d.env.Session(d.ref.ID, provider.SessionOptions{ControlRef: &otherDigest}); !errors.As(err, &im) {
		return failf(req, "a *provider.IdentityMismatchError", "%v", err)
	}
	req = c.step("environment.Session(another session) with the run's ControlRef")
	if _, err := d.env.Session(newID("conformance-other"), provider.SessionOptions{ControlRef: &ref}); !errors.As(err, &im) {
		return failf(req, "a *provider.IdentityMismatchError", "%v", err)
	}
	// After a restart only the bridge knows the run: it refuses the
	// competing reference.
	e2, err := c.connect(d.env)
	if err != nil {
		return err
	}
	s2, err := e2.Session(d.ref.ID, provider.SessionOptions{ControlRef: &otherDigest})
	if err != nil {
		return failf(c.step("environment.Session after a reconnect, another request digest"), "a session to check", "%v", err)
	}
	req = c.step("Session.Status after a reconnect, with the ControlRef's request digest changed")
	if st, err := s2.Status(c.ctx); !errors.As(err, &im) {
		return failf(req, "a *provider.IdentityMismatchError from the bridge's snapshot", "%+v, %v", st, err)
	}
	unknown := ref
	unknown.RunID = newID("conformance-no-run")
	e3, err := c.connect(d.env)
	if err != nil {
		return err
	}
	s3, err := e3.Session(d.ref.ID, provider.SessionOptions{ControlRef: &unknown})
	if err != nil {
		return failf(c.step("environment.Session after a reconnect, an unknown run id"), "a session to check", "%v", err)
	}
	var nf *provider.NotFoundError
	req = c.step("Session.Status after a reconnect, for run %s that never ran", unknown.RunID)
	if st, err := s3.Status(c.ctx); !errors.As(err, &nf) {
		return failf(req, "a *provider.NotFoundError", "%+v, %v", st, err)
	}
	return nil
}

func eventIDsCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	exec, session := newID("conformance-exec"), newID("conformance-session")
	req := c.step("Stream(%q, execution %s)", plainPrompt, exec)
	evs, _, err := c.stream(c.ctx, env, provider.Turn{Prompt: plainPrompt, ExecutionID: exec, SessionID: session})
	if err != nil {
		return failf(req, "a completed turn", "%v", err)
	}
	live := withIDs(evs)
	if len(live) == 0 {
		return failf(req, "events with ids", "%s", listEvents(evs))
	}
	if id := duplicateID(live); id != "" {
		return failf(req, "unique event ids", "id %s twice in %s", id, listEvents(live))
	}
	s, err := env.Session(session, provider.SessionOptions{})
	if err != nil {
		return failf(c.step("environment.Session(%s)", session), "the streamed turn's session", "%v", err)
	}
	var first []provider.Event
	for i := range 2 {
		req := c.step("Session.Events(%s, from the start), replay %d", session, i+1)
		got, err := replay(c.ctx, s, "0")
		if err != nil {
			return failf(req, "the run's events", "%v after %s", err, listEvents(got))
		}
		if d := diffEvents(got, live, false); d != "" {
			return failf(req, "the live stream's events: "+listEvents(live), "%s: %s", d, listEvents(got))
		}
		if i == 1 {
			if d := diffEvents(got, first, true); d != "" {
				return failf(req, "the first replay, byte for byte", "%s", d)
			}
		}
		first = got
	}
	c.note("%d events, the same live and in two replays", len(live))
	return nil
}

func replayCursorCase(c *caseCtx) error {
	d, err := dispatchDone(c)
	if err != nil {
		return err
	}
	return checkReplay(c, d.sess, "")
}

// checkReplay checks s's replays: from the start (equal to want when
// given), after cursors in it, after its last event, and ahead of it.
func checkReplay(c *caseCtx, s *provider.Session, label string) error {
	req := c.step("Session.Events(from the start)%s", label)
	full, err := replay(c.ctx, s, "0")
	if err != nil {
		return failf(req, "the run's events", "%v", err)
	}
	if len(full) < 2 {
		return failf(req, "at least two events", "%s", listEvents(full))
	}
	if id := duplicateID(full); id != "" {
		return failf(req, "unique event ids", "id %s twice in %s", id, listEvents(full))
	}
	for _, k := range []int{0, len(full) / 2, len(full) - 2, len(full) - 1} {
		req := c.step("Session.Events(after %s)%s", full[k].ID, label)
		tail, err := replay(c.ctx, s, full[k].ID)
		if err != nil {
			return failf(req, "the events after the cursor", "%v", err)
		}
		if d := diffEvents(tail, full[k+1:], true); d != "" {
			return failf(req, "the tail of the full replay: "+listEvents(full[k+1:]), "%s: %s", d, listEvents(tail))
		}
	}
	req = c.step("Session.Events(after event 999999, ahead of the stream)%s", label)
	var ce *provider.ConflictError
	if got, err := replay(c.ctx, s, "999999"); !errors.As(err, &ce) {
		return failf(req, "a *provider.ConflictError (invalid_replay_cursor)", "%s, %v", listEvents(got), err)
	}
	return nil
}

func rebuiltCase(c *caseCtx) error {
	d, err := dispatchDone(c)
	if err != nil {
		return err
	}
	full, err := replay(c.ctx, d.sess, "0")
	if err != nil {
		return failf(c.step("Session.Events(from the start)"), "the run's events", "%v", err)
	}
	ref := d.ref.ControlRef

	// A new sandbox provider reconnects from the persisted reference.
	e2, err := c.connect(d.env)
	if err != nil {
		return err
	}
	if err := checkRebuilt(c, e2.Environment, d, full, " through a reconnected sandbox provider"); err != nil {
		return err
	}

	// A bare bridge client rebuilds the environment from its id alone.
	p, err := c.bridge(d.env, provider.Options{Name: ref.Provider})
	if err != nil {
		return err
	}
	req := c.step("provider.Get(%s) in a new provider", d.env.ID())
	ge, err := p.Get(c.ctx, d.env.ID(), provider.GetOptions{})
	if err != nil {
		return failf(req, "the reconstructed environment", "%v", err)
	}
	if !ge.Reconstructed() {
		return failf(req, "a reconstructed environment", "one that is not")
	}
	if err := checkRebuilt(c, ge, d, full, " through provider.Get"); err != nil {
		return err
	}
	req = c.step("Stream on the reconstructed environment")
	var re *provider.ReconstructedError
	for _, err := range ge.Stream(c.ctx, provider.Turn{Prompt: plainPrompt}) {
		if !errors.As(err, &re) {
			return failf(req, "a *provider.ReconstructedError", "%v", err)
		}
		break
	}
	return nil
}

// checkRebuilt checks the run of d through env, a rebuilt environment.
func checkRebuilt(c *caseCtx, env *provider.Environment, d *dispatched, full []provider.Event, label string) error {
	ref := d.ref.ControlRef
	if env.ID() != d.env.ID() {
		return failf(c.step("rebuild the environment%s", label), "environment "+d.env.ID(), "environment %s", env.ID())
	}
	s, err := env.Session(d.ref.ID, provider.SessionOptions{ControlRef: &ref})
	if err != nil {
		return failf(c.step("environment.Session(%s, ControlRef)%s", d.ref.ID, label), "the run's session", "%v", err)
	}
	req := c.step("Session.Status%s", label)
	st, err := s.Status(c.ctx)
	if err != nil || !st.Terminal || st.Status != provider.StatusCompleted {
		return failf(req, "terminal completed", "%+v, %v", st, err)
	}
	req = c.step("Session.Events(from the start)%s", label)
	got, err := replay(c.ctx, s, "0")
	if err != nil {
		return failf(req, "the run's events", "%v", err)
	}
	if diff := diffEvents(got, full, true); diff != "" {
		return failf(req, "the original session's replay: "+listEvents(full), "%s: %s", diff, listEvents(got))
	}
	if err := checkReplay(c, s, label); err != nil {
		return err
	}
	req = c.step("Session.Result%s", label)
	res, err := s.Result(c.ctx)
	if err != nil || res.Text != d.res.Text || res.RunID != ref.RunID {
		return failf(req, fmt.Sprintf("run %s with text %q", ref.RunID, clip(d.res.Text, 200)), "%+v, %v", res, err)
	}
	return nil
}

// suspendedCase runs a turn of a session, suspends the box at the turn
// boundary and resumes it, then checks that the earlier run replays as it
// streamed and that the session's next turn continues the conversation:
// the model's request for it holds the earlier turn (the harness's native
// session came back with the box's disk).
func suspendedCase(c *caseCtx) error {
	if _, ok := c.r.t.Vendor.(vendors.Suspender); !ok {
		return skip("suspend", "the vendor cannot suspend boxes")
	}
	l := c.local()
	if l == nil {
		return skip("local", "the case reads the model's requests at the local model endpoint")
	}
	p, err := c.sandbox(func(o *sandbox.Options) { o.Retention = time.Hour })
	if err != nil {
		return err
	}
	env, err := c.create(p, c.createRequest())
	if err != nil {
		return err
	}
	ses, word := newID("conformance-session"), newID("remember")
	first := fmt.Sprintf("Remember the word %s and reply with one short sentence.", word)
	d, err := dispatchOn(c, env, provider.Turn{Prompt: first, SessionID: ses})
	if err != nil {
		return err
	}
	ref, res := d.ref, d.res
	full, err := replay(c.ctx, d.sess, "0")
	if err != nil {
		return failf(c.step("Session.Events(from the start)"), "the run's events", "%v", err)
	}

	req := c.step("Suspend box %s at the turn boundary, then Resume", env.Reference().BoxID)
	sref, err := env.Suspend(c.ctx, sandbox.SuspendOptions{})
	if err != nil {
		return failErr(req, "a suspended box", err)
	}
	start := time.Now()
	resumed, err := p.Resume(c.ctx, sref)
	if err != nil {
		return failErr(req, "the resumed box", err)
	}
	took := time.Since(start)
	if err := c.replaceEnv(env, resumed); err != nil {
		return err
	}

	req = c.step("Session.Events(run %s, from the start) on the resumed box", ref.ControlRef.RunID)
	rs, err := resumed.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
	if err != nil {
		return failf(req, "the run's session", "%v", err)
	}
	got, err := replay(c.ctx, rs, "0")
	if err != nil {
		return failf(req, "the run's events", "%v", err)
	}
	if diff := diffEvents(got, full, true); diff != "" {
		return failf(req, "the replay before the suspend: "+listEvents(full), "%s: %s", diff, listEvents(got))
	}
	req = c.step("Session.Result(run %s) on the resumed box", ref.ControlRef.RunID)
	if again, err := rs.Result(c.ctx); err != nil || again.Text != res.Text || again.RunID != ref.ControlRef.RunID {
		return failf(req, fmt.Sprintf("run %s with text %q", ref.ControlRef.RunID, clip(res.Text, 200)), "%+v, %v", again, err)
	}

	next := "Which word did I ask you to remember? Answer in one short sentence."
	req = c.step("Stream(%q, session %s) on the resumed box", next, ses)
	evs, text, err := c.stream(c.ctx, resumed, provider.Turn{Prompt: next, SessionID: ses})
	if err != nil {
		return failf(req, "a completed turn", "%v after %s", err, listEvents(evs))
	}
	if len(evs) == 0 || !completed(evs[len(evs)-1]) {
		return failf(req, "a terminal result", "%s", listEvents(evs))
	}
	if err := c.wantText(req, text, ReplyText); err != nil {
		return err
	}
	body, ok := l.request(next)
	switch {
	case !ok:
		return failf(req, "a model request for the turn", "none arrived")
	case !strings.Contains(body, word):
		return failf(req, fmt.Sprintf("the model's request holding the earlier turn (%q)", word),
			"a request of %d bytes without it: the session did not continue", len(body))
	}
	c.note("resume to ready %v; the model saw the earlier turn after it", took.Round(time.Millisecond))
	return nil
}
