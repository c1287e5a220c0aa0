package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/conformance/internal/cutproxy"
	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/emukit"
)

// Chaos selects the chaos family (Options.Chaos): live turns while faults
// are injected, one kind per case and mixed, each run's stream as the
// client saw it checked against the bridge's store.
type Chaos struct {
	// Faults is how many faults each case injects. Default
	// DefaultChaosFaults.
	Faults int
	// Idle is the idle bound of the proxy of the chaos.idle case: it cuts
	// a connection that carried nothing that long. Default
	// cutproxy.DefaultIdle (16 s, as common load balancers).
	Idle time.Duration
	// Lanes is how many turns stream at once in a case, each in a box of
	// its own (a box runs one turn at a time) through its own proxy and
	// client, and checked on its own. The chaos.vendor and chaos.suspend
	// cases run one. Default 1.
	Lanes int
}

// lanes returns how many lanes a case of kind runs.
func (ch Chaos) lanes(kind string) int {
	if kind == FaultVendor || kind == FaultSuspend {
		return 1
	}
	return max(ch.Lanes, 1)
}

// DefaultChaosFaults is the faults per chaos case when Chaos names none.
const DefaultChaosFaults = 10

// Fault kinds of the chaos family, one case each (chaos.<kind>) and mixed.
const (
	FaultDrop   = "drop"   // the client's connection cut mid-stream
	FaultIdle   = "idle"   // a proxy cuts connections idle for its bound
	FaultKill   = "kill"   // kill -9 of the serving bridge in the box
	FaultCaller = "caller" // the calling process killed and replaced
	FaultMixed  = "mixed"  // drop, kill and caller at random
	FaultVendor = "vendor" // the vendor's control plane fails calls (429, 5xx, a lost create)
	// FaultSuspend suspends and resumes the box between turns (a suspend
	// mid-stream must be refused).
	FaultSuspend = "suspend"
)

// FaultSwitch is an emulator's control-plane fault switch and its count
// (the E2B and Daytona emulators; *emukit.Switch for one boxctl emulate
// serves): the chaos.vendor case turns faults on while turns stream.
// Target.Faults.
type FaultSwitch interface {
	SetFaults(ctx context.Context, f emukit.Faults) error
	FaultCounts(ctx context.Context) (emukit.Counts, error)
}

// vendorFaults are the chaos.vendor case's control-plane faults: 30% of
// calls fail, 429 or 5xx, half the failed creates and deletes taking
// effect first (a lost create).
var vendorFaults = emukit.Faults{ErrorRate: 0.3, LostRate: 0.5, RetryAfter: 20 * time.Millisecond}

// vendorSideLabel marks the boxes the chaos.vendor case makes and
// destroys while its turns stream.
const vendorSideLabel = "conformance-chaos-side"

// ChaosStats are a chaos case's figures.
type ChaosStats struct {
	Kind string `json:"kind"`
	// Faults were injected over Runs turns; Events is how many events of
	// the bridge's store were checked against the client's stream.
	Faults int `json:"faults" jsonschema:"minimum=0"`
	Runs   int `json:"runs" jsonschema:"minimum=0"`
	Events int `json:"events" jsonschema:"minimum=0"`
	// Lost are stored events the client never saw; Duplicated events it
	// saw more than once; Mismatched events whose payload differed;
	// Unfinished runs that did not end terminal with their result.
	Lost       int `json:"lost" jsonschema:"minimum=0"`
	Duplicated int `json:"duplicated" jsonschema:"minimum=0"`
	Mismatched int `json:"mismatched" jsonschema:"minimum=0"`
	Unfinished int `json:"unfinished" jsonschema:"minimum=0"`
	// Leaked are boxes the case made that were left after its gc (the
	// vendor case's boxes made under control-plane faults).
	Leaked int `json:"leaked,omitempty" jsonschema:"minimum=0"`
	// Resumes is how many times the client resumed from its cursor;
	// ResumeP50Ms and ResumeP99Ms the time from noticing the cut to the
	// resumed stream's first event (or its end).
	Resumes     int     `json:"resumes" jsonschema:"minimum=0"`
	ResumeP50Ms float64 `json:"resumeP50Ms" jsonschema:"minimum=0"`
	ResumeP99Ms float64 `json:"resumeP99Ms" jsonschema:"minimum=0"`

	resumes []time.Duration
	// stopped is the longest an injector took to stop at a run's end;
	// refused counts the suspends refused mid-stream; redispatched the
	// dispatches sent again after a transport error.
	stopped      time.Duration
	refused      int
	redispatched int
}

func (s *ChaosStats) finish() {
	s.Resumes = len(s.resumes)
	if len(s.resumes) == 0 {
		return
	}
	slices.Sort(s.resumes)
	at := func(q float64) float64 {
		i := min(len(s.resumes)-1, int(q*float64(len(s.resumes))))
		return float64(s.resumes[i].Microseconds()) / 1000
	}
	s.ResumeP50Ms, s.ResumeP99Ms = at(0.50), at(0.99)
}

func (s *ChaosStats) clean() bool {
	return s.Lost == 0 && s.Duplicated == 0 && s.Mismatched == 0 && s.Unfinished == 0 && s.Leaked == 0
}

func chaosCases() []Case {
	var out []Case
	for _, k := range []struct{ kind, desc string }{
		{FaultDrop, "the client's connection cut mid-stream: the resumed stream is the store's, no event lost or repeated"},
		{FaultIdle, "a proxy that cuts idle connections between client and box: no event lost or repeated, every run terminal"},
		{FaultKill, "kill -9 of the serving bridge in the box: it restarts, runs end terminal, readers resume from their cursor"},
		{FaultCaller, "the calling process killed and replaced: the new one reads every event from the persisted reference"},
		{FaultVendor, "429s, 5xx and lost creates on the vendor's control plane while turns stream and boxes come and go: no event lost, no box left"},
		{FaultSuspend, "the box suspended and resumed between turns, refused mid-stream: the resumed box's store replays every run as the client saw it"},
		{FaultMixed, "cuts, bridge kills and caller replacements at random: no event lost or repeated, every run terminal"},
	} {
		out = append(out, Case{ID: "chaos." + k.kind, Description: k.desc, Timeout: time.Hour, run: chaosCase(k.kind)})
	}
	return out
}

// chaosTurnDeltas and chaosTurnGap shape the chaos turns' replies: a
// run that streams for about two seconds.
const (
	chaosTurnDeltas = 24
	chaosTurnGap    = 80 * time.Millisecond
)

// chaosPrompt asks the local endpoint for a paced reply, held back hold
// first (the idle case's silence).
func chaosPrompt(hold time.Duration) string {
	return fmt.Sprintf("%s%d] Write a long answer.", markerChaos, hold.Milliseconds())
}

func chaosCase(kind string) func(c *caseCtx) error {
	return func(c *caseCtx) error {
		if c.local() == nil {
			return skip("local", "the chaos family paces its turns with the local model endpoint")
		}
		ch := c.r.o.Chaos
		if kind == FaultVendor {
			if c.r.t.Faults == nil {
				return skip("faults", "the target's control plane has no fault switch (an emulator's)")
			}
			if _, err := c.r.t.Faults.FaultCounts(c.ctx); err != nil {
				return failErr(c.step("the control plane's fault switch"), "its fault counts", err)
			}
		}
		if _, ok := c.r.t.Vendor.(vendors.Suspender); kind == FaultSuspend && !ok {
			return skip("suspend", "the vendor cannot suspend boxes")
		}
		// Its kills come faster than a crash loop's bound (5 within a
		// minute): the box's supervisor counts crashes within 2 s, so a
		// bridge that cannot start is still caught.
		p, err := c.sandbox(func(o *sandbox.Options) {
			o.BridgeEnv = map[string]string{"BRIDGE_CRASH_WINDOW_MS": "2000"}
			if kind == FaultIdle {
				// The bridge's keepalive (15 s) keeps a stream alive under
				// a 16 s idle bound: the case's bridges keep quiet longer
				// than the proxy's bound, so that it cuts.
				o.BridgeEnv[wire.EnvSSEHeartbeat] = strconv.FormatInt((2*ch.Idle + time.Second).Milliseconds(), 10)
			}
			// A full-size case streams for up to its whole deadline (an
			// hour, E2B's shortest plan limit): its boxes live as long.
			if dl, ok := c.ctx.Deadline(); ok {
				o.Lifetime = max(o.Lifetime, time.Until(dl).Truncate(time.Second))
			}
			if kind == FaultSuspend {
				o.Retention = time.Hour
			}
		})
		if err != nil {
			return err
		}
		idle := time.Duration(-1)
		hold := time.Duration(0)
		if kind == FaultIdle {
			idle = ch.Idle
			hold = idle + idle/4 + 500*time.Millisecond
		}
		st, err := c.runLanes(p, kind, idle, chaosPrompt(hold))
		if err != nil {
			return err
		}
		if kind == FaultVendor {
			if err := c.vendorLeaks(st); err != nil {
				return err
			}
		}
		if kind == FaultSuspend {
			c.note("suspend: %d suspends asked while a run streamed, %d refused", st.Runs, st.refused)
		}
		st.finish()
		c.note("%s: %d faults over %d runs in %d lanes, %d events checked, %d lost, %d duplicated, resume p50 %.1f ms p99 %.1f ms, %d dispatches sent again",
			kind, st.Faults, st.Runs, ch.lanes(kind), st.Events, st.Lost, st.Duplicated, st.ResumeP50Ms, st.ResumeP99Ms, st.redispatched)
		if !st.clean() {
			return failf(c.step("%d %s faults over %d runs", st.Faults, kind, st.Runs), "no event lost, repeated or changed, every run terminal, no box left",
				"%d lost, %d duplicated, %d mismatched, %d unfinished, %d boxes leaked", st.Lost, st.Duplicated, st.Mismatched, st.Unfinished, st.Leaked)
		}
		if st.Faults == 0 {
			return failf(c.step("%d %s runs", st.Runs, kind), "faults injected", "none took effect")
		}
		return nil
	}
}

// runLanes makes the case's lanes, a box each, and runs their turns until
// the faults that took effect reach the case's count; it returns the
// lanes' figures added up (recorded for the result as each lane ends). A
// lane's failure stops the others at their next turn.
func (c *caseCtx) runLanes(p *sandbox.Provider, kind string, idle time.Duration, prompt string) (*ChaosStats, error) {
	ch := c.r.o.Chaos
	n := ch.lanes(kind)
	rigs := make([]*rig, n)
	var g errgroup.Group
	for i := range rigs {
		g.Go(func() error {
			env, err := c.create(p, c.createRequest())
			if err != nil {
				return err
			}
			rigs[i], err = c.rig(env, idle)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	total := &ChaosStats{Kind: kind}
	c.setChaos(total)
	var (
		mu     sync.Mutex
		faults int
		failed error
		wg     sync.WaitGroup
	)
	// A run whose faults all missed (it ended first) injects none: the
	// runs are bounded so a case always ends. A kill goes through the
	// vendor's exec, which on a loaded control plane often lands after
	// the run ended: the bound leaves room for most of them to miss.
	maxRuns := (6*ch.Faults+6)/n + 6
	lane := func(rg *rig) {
		defer wg.Done()
		st := &ChaosStats{Kind: kind}
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			total.add(st)
		}()
		for {
			mu.Lock()
			more := failed == nil && faults < ch.Faults && st.Runs < maxRuns
			mu.Unlock()
			if !more {
				return
			}
			before := st.Faults
			err := rg.turn(c, kind, prompt, st)
			if err == nil && kind == FaultSuspend {
				rg, err = c.suspendCycle(p, rg, st)
			}
			mu.Lock()
			faults += st.Faults - before
			if err != nil && failed == nil {
				failed = err
			}
			mu.Unlock()
		}
	}
	wg.Add(n)
	for _, rg := range rigs {
		go lane(rg)
	}
	wg.Wait()
	if failed != nil {
		total.finish()
		return nil, failed
	}
	return total, nil
}

// add adds o's figures to s.
func (s *ChaosStats) add(o *ChaosStats) {
	s.Faults += o.Faults
	s.Runs += o.Runs
	s.Events += o.Events
	s.Lost += o.Lost
	s.Duplicated += o.Duplicated
	s.Mismatched += o.Mismatched
	s.Unfinished += o.Unfinished
	s.Leaked += o.Leaked
	s.resumes = append(s.resumes, o.resumes...)
	s.stopped = max(s.stopped, o.stopped)
	s.refused += o.refused
	s.redispatched += o.redispatched
}

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

// errCallerKilled is the cause of a reader the caller fault ended.
var errCallerKilled = errors.New("the caller was killed")

// injector injects a case's faults while a turn's events are read.
type injector struct {
	c    *caseCtx
	rg   *rig
	kind string
	st   *ChaosStats
	// ctx is the injection's, cancelled at its stop.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	reader context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}
	first  chan struct{} // closed at the run's first event
	events int
}

func (in *injector) setReader(cancel context.CancelCauseFunc) {
	in.mu.Lock()
	in.reader = cancel
	in.mu.Unlock()
}

func (in *injector) saw(n int) {
	in.mu.Lock()
	if in.events == 0 && n > 0 {
		close(in.first)
	}
	in.events = n
	in.mu.Unlock()
}

// start injects faults at random moments of the run until the returned
// function is called: for drop and caller up to three a run, for kill one
// (it ends the run). The idle case's faults are the proxy's.
func (in *injector) start() (stop func()) {
	in.stop, in.done, in.first = make(chan struct{}), make(chan struct{}), make(chan struct{})
	in.ctx, in.cancel = context.WithCancel(in.c.ctx)
	idleBefore := in.rg.proxy.IdleCuts()
	go func() {
		defer close(in.done)
		if in.kind == FaultIdle {
			<-in.stop
			return
		}
		if in.kind == FaultVendor {
			in.vendor()
			return
		}
		// The faults land in the run's stream: from its first event on.
		select {
		case <-in.stop:
			return
		case <-in.first:
		}
		if in.kind == FaultSuspend {
			in.suspendLive()
			return
		}
		per := 3
		if in.kind == FaultKill {
			per = 1
		}
		run := time.Duration(chaosTurnDeltas) * chaosTurnGap
		for range per {
			t := time.NewTimer(time.Duration(rand.Int64N(int64(run) / int64(per))))
			select {
			case <-in.stop:
				t.Stop()
				return
			case <-t.C:
			}
			kind := in.kind
			if kind == FaultMixed {
				kind = []string{FaultDrop, FaultKill, FaultCaller}[rand.IntN(3)]
			}
			if in.inject(kind) {
				in.st.Faults++ // read once stop returned
			}
			if kind == FaultKill {
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			start := time.Now()
			close(in.stop)
			in.cancel()
			<-in.done
			in.st.stopped = max(in.st.stopped, time.Since(start))
			if in.kind == FaultIdle {
				in.st.Faults += int(in.rg.proxy.IdleCuts() - idleBefore)
			}
		})
	}
}

// inject injects one fault and reports whether it took effect.
func (in *injector) inject(kind string) bool {
	switch kind {
	case FaultDrop:
		return in.rg.proxy.Drop() > 0
	case FaultCaller:
		in.mu.Lock()
		r := in.reader
		in.mu.Unlock()
		if r == nil {
			return false
		}
		r(errCallerKilled)
		in.rg.proxy.Drop()
		return true
	case FaultKill:
		ctx, cancel := context.WithTimeout(in.ctx, time.Minute)
		defer cancel()
		res, err := in.rg.env.Box().Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", killBridgeScript}})
		if err != nil || res.ExitCode != 0 {
			in.c.log.Warn("kill the bridge", "err", err, "stderr", string(res.Stderr))
			return false
		}
		n, _ := strconv.Atoi(string(bytes.TrimSpace(res.Stdout)))
		return n > 0
	}
	return false
}

// killBridgeScript kills the serving bridge of a supervised box-bridge
// with SIGKILL and prints how many processes it killed.
const killBridgeScript = `n=0
for d in /proc/[0-9]*; do
	case "$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)" in
	*box-bridge" -supervised"*) kill -9 "${d#/proc/}" 2>/dev/null && n=$((n+1)) ;;
	esac
done
echo $n`

// setChaos records the case's figures for its result.
func (c *caseCtx) setChaos(st *ChaosStats) {
	c.mu.Lock()
	c.chaos = st
	c.mu.Unlock()
}

func (c *caseCtx) chaosStats() *ChaosStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chaos == nil {
		return nil
	}
	st := *c.chaos
	st.resumes = nil
	return &st
}

// vendor turns the target's control-plane faults on until the injector
// stops, and meanwhile makes and destroys boxes and asks for the serving
// box and its endpoint, as callers do while turns stream. The faults are
// the calls the control plane failed. Its calls run on the injector's
// context: the stop cancels the one in flight and the faults end with
// it, so a cancelled create cleans up after itself without them.
func (in *injector) vendor() {
	fs := in.c.r.t.Faults
	before, err := fs.FaultCounts(in.ctx)
	if err == nil {
		err = fs.SetFaults(in.ctx, vendorFaults)
	}
	if err != nil {
		in.c.log.Warn("set the control plane's faults", "err", err)
		return
	}
	// The switch is asked past the injector's stop, briefly.
	quiet := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(in.ctx), 10*time.Second)
	}
	off := func() {
		ctx, cancel := quiet()
		defer cancel()
		if err := fs.SetFaults(ctx, emukit.Faults{}); err != nil {
			in.c.log.Warn("end the control plane's faults", "err", err)
		}
	}
	stopOff := context.AfterFunc(in.ctx, off)
	defer func() {
		if stopOff() {
			off()
		}
		ctx, cancel := quiet()
		defer cancel()
		n, err := fs.FaultCounts(ctx)
		if err != nil {
			in.c.log.Warn("count the control plane's faults", "err", err)
			return
		}
		in.st.Faults += int(n.Throttled + n.Failed - before.Throttled - before.Failed)
	}()
	v := in.c.r.t.Vendor
	id := in.rg.env.Reference().BoxID
	for in.ctx.Err() == nil {
		if _, err := v.Connect(in.ctx, id); err != nil {
			in.c.log.Debug("get the serving box under faults", "err", err)
		}
		if _, err := in.rg.env.Box().Endpoint(in.ctx, sandbox.BridgePort); err != nil {
			in.c.log.Debug("the endpoint under faults", "err", err)
		}
		box, err := v.Create(in.ctx, vendors.CreateSpec{Image: in.c.r.t.Image, Lifetime: vendorSideLifetime, RunTag: in.c.runTag,
			Labels: map[string]string{vendorSideLabel: "true"}})
		if err != nil {
			in.c.log.Debug("create under faults", "err", err)
			continue
		}
		if err := box.Destroy(in.ctx); err != nil {
			in.c.log.Debug("destroy under faults", "err", err)
		}
	}
}

// vendorSideLifetime is the lifetime of the boxes made beside the serving
// one; the case's gc runs as at their deadline.
const vendorSideLifetime = 10 * time.Minute

// vendorSettle is how long the control plane has to finish the creates
// the case abandoned (a create goes on when its caller hangs up) before
// the gc's last look.
const vendorSettle = 5 * time.Second

// vendorLeaks checks the side boxes with the faults off: none made twice
// by one create (two boxes with one create token), and none left once
// the gc (sandbox.GC, what boxctl gc runs) collected them as at their
// deadline. The gc runs until the control plane had vendorSettle to land
// the abandoned creates; a box it cannot remove leaked.
func (c *caseCtx) vendorLeaks(st *ChaosStats) error {
	v := c.r.t.Vendor
	filter := map[string]string{boxmeta.LabelRunTag: c.runTag, vendorSideLabel: "true"}
	desc := c.step("sandbox.GC(run tag %s, the side boxes) at their deadline", c.runTag)
	settled := time.Now().Add(vendorSettle)
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Minute)
	defer cancel()
	tokens := map[string]map[string]bool{} // create token: box ids
	found, reaped := 0, 0
	var left []vendors.Info
	for {
		boxes, err := v.List(ctx, filter)
		if err != nil {
			return failErr(desc, "the side boxes", err)
		}
		for _, b := range boxes {
			tok := b.Labels[boxmeta.LabelCreate]
			if tokens[tok] == nil {
				tokens[tok] = map[string]bool{}
			}
			if !tokens[tok][b.ID] {
				tokens[tok][b.ID] = true
				found++
			}
		}
		res, err := sandbox.GC(ctx, v, sandbox.GCOptions{Filter: filter,
			Now: func() time.Time { return time.Now().Add(vendorSideLifetime + time.Minute) }})
		if err != nil {
			return failErr(desc, "the gc's listing", err)
		}
		for _, r := range res {
			if r.Err == nil {
				reaped++
			} else {
				c.log.Warn("the gc did not remove a side box", "box", r.Box.ID, "err", r.Err)
			}
		}
		if left, err = v.List(ctx, filter); err != nil {
			return failErr(desc, "the side boxes", err)
		}
		if len(left) == 0 && time.Now().After(settled) {
			break
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		if ctx.Err() != nil {
			break
		}
	}
	dup := 0
	for _, ids := range tokens {
		dup += len(ids) - 1
	}
	st.Leaked = len(left) + dup
	c.note("vendor: side calls stopped within %.1f ms of a run's end; %d side boxes left by failed or cut calls found by the gc (%d removed), %d made twice by one create, %d left",
		float64(st.stopped.Microseconds())/1000, found, reaped, dup, len(left))
	return nil
}

// suspendLive asks for a suspend while the run streams: it must be
// refused (a run it ended does not finish).
func (in *injector) suspendLive() {
	_, err := in.rg.env.Suspend(in.ctx, sandbox.SuspendOptions{})
	var ce *provider.ConflictError
	switch {
	case err == nil:
		in.c.log.Warn("a suspend mid-stream was not refused")
		in.st.Unfinished++
	case errors.As(err, &ce):
		in.st.refused++ // read once stop returned
	case in.ctx.Err() == nil:
		in.c.log.Warn("a suspend mid-stream failed", "err", err)
	}
}

// suspendCycle suspends rg's box between turns and resumes it, then
// checks the last run against the resumed box's store, read through a
// new client of the same environment (its key): every event the client
// saw, none lost or repeated. The time from the resume to that replay is
// the resume's. It returns the rig of the resumed box.
func (c *caseCtx) suspendCycle(p *sandbox.Provider, rg *rig, st *ChaosStats) (*rig, error) {
	desc := c.step("Suspend and Resume box %s between turns", rg.env.Reference().BoxID)
	ref, err := rg.env.Suspend(c.ctx, sandbox.SuspendOptions{})
	if err != nil {
		return nil, failErr(desc, "a suspended box", err)
	}
	start := time.Now()
	env, err := p.Resume(c.ctx, ref)
	if err != nil {
		return nil, failErr(desc, "the resumed box", err)
	}
	if err := c.replaceEnv(rg.env, env); err != nil {
		return nil, err
	}
	st.Faults++
	nrg, err := c.rigKeyed(env, -1, rg.key)
	if err != nil {
		return nil, err
	}
	if nrg.penv.ID() != rg.penv.ID() {
		return nil, failf(c.step("provider.Create with key %s on the resumed box", rg.key), "environment "+rg.penv.ID(), "%s", nrg.penv.ID())
	}
	// The run's events were counted when its turn ended: the replay
	// adds what it finds wrong only.
	again := &ChaosStats{}
	if err := nrg.check(c, rg.last, rg.lastSeen, again); err != nil {
		return nil, err
	}
	st.resumes = append(st.resumes, time.Since(start))
	st.Lost += again.Lost
	st.Duplicated += again.Duplicated
	st.Mismatched += again.Mismatched
	st.Unfinished += again.Unfinished
	return nrg, nil
}

// replaceEnv puts a resumed environment in the place of the suspended
// one for the cleanup.
func (c *caseCtx) replaceEnv(old, env *sandbox.Environment) error {
	c.mu.Lock()
	closed := c.closed
	if !closed {
		for i, e := range c.envs {
			if e == old {
				c.envs[i] = env
			}
		}
	}
	c.mu.Unlock()
	if closed {
		_ = env.Destroy(context.WithoutCancel(c.ctx))
		return failf(c.step("Resume(%s)", env.Reference().BoxID), "a resumed environment", "the case's cleanup ran already")
	}
	return nil
}
