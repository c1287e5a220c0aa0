package conformance

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
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
	// Continued are the sessions of lost boxes continued on new ones whose
	// history reached the model with their next turn; NoHistory those
	// whose did not; Interrupted the turns a loss cut short, offered and
	// run again once by the caller; RunTwice the turns the model got more
	// often than they were sent (chaos.box_lost).
	Continued   int `json:"continued,omitempty" jsonschema:"minimum=0"`
	NoHistory   int `json:"noHistory,omitempty" jsonschema:"minimum=0"`
	Interrupted int `json:"interrupted,omitempty" jsonschema:"minimum=0"`
	RunTwice    int `json:"runTwice,omitempty" jsonschema:"minimum=0"`
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
	s.ResumeP50Ms, s.ResumeP99Ms = quantileMs(s.resumes, 0.50), quantileMs(s.resumes, 0.99)
}

func (s *ChaosStats) clean() bool {
	return s.Lost == 0 && s.Duplicated == 0 && s.Mismatched == 0 && s.Unfinished == 0 && s.Leaked == 0 &&
		s.NoHistory == 0 && s.RunTwice == 0
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
	return append(out, Case{ID: "chaos." + FaultBoxLost, Timeout: time.Hour, run: boxLostCase,
		Description: "the box deleted by its vendor in a turn or between turns: the turn's reader gets every event the replica outside the box holds, once, and an end saying so; the next turn says the box was lost; the session continues on a new box with its history, the interrupted turn run again once"})
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
