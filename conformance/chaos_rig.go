package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/tangle-network/boxctl/conformance/internal/cutproxy"
	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// rig is a chaos case's client of one box: a bridge provider whose
// connections go through a cutting proxy, and a clean one that reads the
// store.
type rig struct {
	env   *sandbox.Environment
	ep    vendors.Endpoint
	proxy *cutproxy.Proxy
	pv    *provider.Provider
	penv  *provider.Environment
	clean *provider.Environment
	name  string
	key   string // the environment's idempotency key

	// last and lastSeen are the last turn's run and the events the
	// client saw of it.
	last     provider.Reference
	lastSeen []provider.Event

	// killTook is how long the last kill took through the vendor's exec
	// (zero before the first): the next is aimed that much earlier.
	killTook time.Duration
}

// rig makes the clients of env's box; idle is the proxy's idle bound
// (negative: none).
func (c *caseCtx) rig(env *sandbox.Environment, idle time.Duration) (*rig, error) {
	return c.rigKeyed(env, idle, newID("chaos-env"))
}

// rigKeyed is rig with the environment's idempotency key: a box's
// environment again (a resumed box's) when the key is its.
func (c *caseCtx) rigKeyed(env *sandbox.Environment, idle time.Duration, key string) (*rig, error) {
	desc := c.step("the endpoint of box %s behind a cutting proxy", env.Reference().BoxID)
	ep, err := env.Box().Endpoint(c.ctx, sandbox.BridgePort)
	if err != nil {
		return nil, failErr(desc, "the box's endpoint", err)
	}
	u, err := url.Parse(ep.URL)
	if err != nil {
		return nil, failErr(desc, "the box's endpoint URL", err)
	}
	// A plain endpoint goes through a TCP proxy; one with a transport of
	// its own (a vendor's gateway) gets the same cuts at the client's end.
	target := ""
	if ep.Transport == nil {
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
		}
		target = u.Hostname() + ":" + port
	}
	proxy, err := cutproxy.Start(target, idle)
	if err != nil {
		return nil, failErr(desc, "a proxy", err)
	}
	c.track(func(context.Context) error { return proxy.Close() })
	rg := &rig{env: env, ep: ep, proxy: proxy, name: "conformance-chaos", key: key}
	if err := rg.connect(c); err != nil {
		return nil, err
	}
	cl, err := c.bridge(env, provider.Options{Name: rg.name})
	if err != nil {
		return nil, err
	}
	if rg.clean, err = cl.Get(c.ctx, rg.penv.ID(), provider.GetOptions{}); err != nil {
		return nil, failErr(c.step("provider.Get(%s) on a clean client", rg.penv.ID()), "the environment", err)
	}
	return rg, nil
}

// connect makes (or makes again, for a replaced caller) the proxied
// client and its environment.
func (rg *rig) connect(c *caseCtx) error {
	ep := rg.ep
	if ep.Transport != nil {
		ep.Transport = rg.proxy.Transport(ep.Transport)
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = rg.proxy.DialContext
		ep.Transport = tr
	}
	pv, err := provider.New(provider.Options{BaseURL: ep.URL, BearerToken: rg.env.Reference().Bearer, HTTPClient: ep.Client(),
		Name: rg.name, Logger: c.log})
	if err != nil {
		return failErr(c.step("provider.New through the proxy"), "a client", err)
	}
	c.track(pv.Close)
	if rg.penv == nil {
		rg.penv, err = pv.Create(c.ctx, provider.CreateRequest{Profile: c.h.Profile, Workspace: &provider.Workspace{Cwd: sandbox.Workspace},
			IdempotencyKey: rg.key})
		if err != nil {
			return failErr(c.step("provider.Create through the proxy"), "an environment", err)
		}
	}
	rg.pv = pv
	return nil
}

// persisted is what a caller keeps to carry on after its death.
type persisted struct {
	EnvironmentID  string             `json:"environmentId"`
	EnvironmentKey string             `json:"environmentKey"`
	Run            provider.Reference `json:"run"`
	Cursor         string             `json:"cursor"`
}

// turn runs one chaos turn: it dispatches the turn, injects faults of kind
// while reading its events (resuming from the cursor after each cut),
// then checks what it read against a clean replay of the store.
func (rg *rig) turn(c *caseCtx, kind, prompt string, st *ChaosStats) error {
	exec := newID("chaos")
	req := c.step("Dispatch(%q)", prompt)
	ref, err := rg.dispatch(c, provider.Turn{Prompt: prompt, ExecutionID: exec, SessionID: exec}, st)
	if err != nil {
		return failErr(req, "an admitted run", err)
	}
	st.Runs++
	saved, _ := json.Marshal(persisted{EnvironmentID: rg.penv.ID(), EnvironmentKey: rg.key, Run: ref, Cursor: "0"})

	inj := &injector{c: c, rg: rg, kind: kind, st: st}
	stopInj := inj.start()
	defer stopInj()

	var seen []provider.Event
	cursor := "0"
	var cutAt time.Time
	stalled := 0 // resumes in a row that read nothing
	for {
		if stalled > 0 {
			// A bridge being restarted answers nothing for a while:
			// resume again a little later, and give up on a box that
			// never comes back.
			if stalled >= resumeAttempts {
				return failf(c.step("Session.Events(%s) of run %s", cursor, ref.ControlRef.RunID), "the run's events",
					"%d resumes in a row read nothing", stalled)
			}
			if err := vendorhttp.Sleep(c.ctx, resumePause(stalled)); err != nil {
				return failErr(c.step("Session.Events of run %s", ref.ControlRef.RunID), "the run's events", err)
			}
		}
		read := len(seen)
		rctx, cancel := context.WithCancelCause(c.ctx)
		inj.setReader(cancel)
		s, err := rg.penv.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
		if err != nil {
			cancel(nil)
			return failErr(c.step("environment.Session(%s)", ref.ID), "the run's session", err)
		}
		var serr error
		for ev, err := range s.Events(rctx, cursor) {
			if err != nil {
				serr = err
				break
			}
			if !cutAt.IsZero() {
				st.resumes = append(st.resumes, time.Since(cutAt))
				cutAt = time.Time{}
			}
			seen = append(seen, ev)
			cursor = ev.ID
			inj.saw(len(seen))
		}
		replaced := errors.Is(context.Cause(rctx), errCallerKilled)
		cancel(nil)
		var te *provider.TransportError
		if serr == nil || !(errors.As(serr, &te) || replaced) {
			if serr != nil && !runFailed(serr) {
				return failErr(c.step("Session.Events(%s) of run %s", cursor, ref.ControlRef.RunID), "the run's events", serr)
			}
			break
		}
		if c.ctx.Err() != nil {
			return failErr(c.step("Session.Events of run %s", ref.ControlRef.RunID), "the run's events", serr)
		}
		if len(seen) > read || replaced {
			stalled = 0
		} else {
			stalled++
		}
		if !cutAt.IsZero() && stalled == 0 {
			// The resumed stream ended before an event: it still resumed.
			st.resumes = append(st.resumes, time.Since(cutAt))
		}
		if cutAt.IsZero() || stalled == 0 {
			cutAt = time.Now()
		}
		if replaced {
			// The new caller has only what the old one persisted.
			var p persisted
			_ = json.Unmarshal(saved, &p)
			p.Cursor = cursor
			if err := rg.replace(c, p); err != nil {
				return err
			}
			ref, cursor = p.Run, p.Cursor
		}
	}
	stopInj()
	rg.last, rg.lastSeen = ref, seen
	return rg.check(c, ref, seen, st)
}

// resumeAttempts bounds the resumes in a row that read nothing before a
// chaos turn fails: about a minute of a box that does not answer.
const resumeAttempts = 80

// resumePause is the pause before the next resume after stalled resumes
// in a row read nothing: short while a killed bridge restarts (tens of
// milliseconds), then growing to a second.
func resumePause(stalled int) time.Duration {
	if stalled <= 10 {
		return 20 * time.Millisecond
	}
	return min(time.Duration(stalled-10)*100*time.Millisecond, time.Second)
}

// dispatchAttempts bounds the calls of a chaos turn's dispatch and of its
// check that a bridge's restart cut: a kill that lands between two runs
// meets the next dispatch or the check's replay.
const dispatchAttempts = 5

// dispatch dispatches turn as a caller keeping Dispatch's contract does:
// a *provider.TransportError leaves the outcome unknown, so the same
// execution is dispatched again (the bridge attaches it to the run it
// admitted, if it did), a little later each time.
func (rg *rig) dispatch(c *caseCtx, turn provider.Turn, st *ChaosStats) (provider.Reference, error) {
	var ref provider.Reference
	tries := 0
	err := throughRestarts(c.ctx, func() (err error) {
		if tries++; tries > 1 {
			st.redispatched++
		}
		ref, err = rg.penv.Dispatch(c.ctx, turn)
		return err
	})
	return ref, err
}

// throughRestarts calls f again, a little later each time, while it
// fails with a *provider.TransportError, up to dispatchAttempts calls: a
// kill can land after its run's end, on the check's clean client too.
func throughRestarts(ctx context.Context, f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		var te *provider.TransportError
		if err == nil || !errors.As(err, &te) || attempt == dispatchAttempts {
			return err
		}
		if serr := vendorhttp.Sleep(ctx, time.Duration(attempt)*100*time.Millisecond); serr != nil {
			return fmt.Errorf("%w (%w)", serr, err)
		}
	}
}

// storeReplay reads run s from the start as a reader that resumes from
// its cursor when a restart of the bridge cuts it.
func storeReplay(ctx context.Context, s *provider.Session) ([]provider.Event, error) {
	var evs []provider.Event
	cursor := "0"
	err := throughRestarts(ctx, func() error {
		more, err := replay(ctx, s, cursor)
		evs = append(evs, more...)
		for _, ev := range more {
			if ev.ID != "" {
				cursor = ev.ID
			}
		}
		return err
	})
	return evs, err
}

// runFailed reports an error that is the run's own failure (a run the
// bridge's restart ended): its stream ended, with its terminal event.
func runFailed(err error) bool {
	var be *provider.BridgeError
	return errors.As(err, &be) && be.Status == 0
}

// replace is the caller's replacement: a new client from the persisted
// state only, whose keyed create names the same environment.
func (rg *rig) replace(c *caseCtx, p persisted) error {
	_ = rg.pv.Close(context.WithoutCancel(c.ctx))
	rg.penv, rg.key = nil, p.EnvironmentKey
	if err := rg.connect(c); err != nil {
		return err
	}
	if rg.penv.ID() != p.EnvironmentID {
		return failf(c.step("provider.Create with the persisted key %s", p.EnvironmentKey), "environment "+p.EnvironmentID, "%s", rg.penv.ID())
	}
	return nil
}

// check compares the events the client saw with a clean replay of the
// run from the store, and the run's snapshot.
func (rg *rig) check(c *caseCtx, ref provider.Reference, seen []provider.Event, st *ChaosStats) error {
	s, err := rg.clean.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
	if err != nil {
		return failErr(c.step("environment.Session(%s) on the clean client", ref.ID), "the run's session", err)
	}
	stored, err := storeReplay(c.ctx, s)
	if err != nil && !runFailed(err) {
		return failErr(c.step("a clean replay of run %s", ref.ControlRef.RunID), "the stored events", err)
	}
	var status provider.RunStatus
	err = throughRestarts(c.ctx, func() (err error) {
		status, err = s.Status(c.ctx)
		return err
	})
	if err != nil {
		return failErr(c.step("Session.Status of run %s", ref.ControlRef.RunID), "the run's snapshot", err)
	}
	st.Events += len(stored)
	count := map[string]int{}
	for _, ev := range seen {
		count[ev.ID]++
	}
	want := map[string]provider.Event{}
	for _, ev := range stored {
		want[ev.ID] = ev
		if count[ev.ID] == 0 {
			st.Lost++
		}
	}
	for id, n := range count {
		st.Duplicated += n - 1
		if _, ok := want[id]; !ok {
			st.Mismatched++
		}
	}
	for _, ev := range seen {
		if w, ok := want[ev.ID]; ok && !sameEvent(ev, w) {
			st.Mismatched++
		}
	}
	if !status.Terminal || len(stored) == 0 || len(seen) == 0 || !terminalEvent(seen[len(seen)-1]) {
		st.Unfinished++
	}
	return nil
}

// sameEvent compares what the bridge sent; the result event a client makes
// at the stream's end carries the text of its own stream only, so of it
// only the kind and status count.
func sameEvent(a, b provider.Event) bool {
	if a.Raw != nil || b.Raw != nil {
		return string(a.Raw) == string(b.Raw) && a.Type == b.Type
	}
	return a.Type == b.Type && a.Status == b.Status
}

func terminalEvent(ev provider.Event) bool {
	return ev.Type == provider.EventResult || (ev.Type == provider.EventStatus &&
		(ev.Status == provider.StatusCompleted || ev.Status == provider.StatusFailed || ev.Status == provider.StatusCancelled))
}
