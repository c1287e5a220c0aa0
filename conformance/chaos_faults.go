package conformance

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/emukit"
)

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
		if in.kind == FaultKill {
			// A kill takes the exec's round trip to land (half a second
			// under gVisor): aimed that much earlier, it lands in the run.
			run = max(run-in.rg.killTook, run/4)
		}
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
		// The kill outlives the injector's stop: an exec cancelled once
		// in the box may have killed the bridge already, landing in the
		// next run uncounted. The stop waits for it instead.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(in.ctx), time.Minute)
		defer cancel()
		start := time.Now()
		res, err := in.rg.env.Box().Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", killBridgeScript}})
		in.rg.killTook = time.Since(start)
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
