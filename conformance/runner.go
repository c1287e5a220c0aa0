package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// cleanupTimeout bounds a case's cleanup: destroys and the run tag check.
const cleanupTimeout = 2 * time.Minute

// errCaseDeadline is the cause of a case context whose deadline passed.
var errCaseDeadline = errors.New("the case's deadline passed")

// Run runs the selected cases for each harness against t and returns the
// report; see the package documentation for what it guarantees. The error
// is for a target or options Run cannot use, or ctx ending: then the
// report holds what ran, and the cases that never started are reported
// failed.
func Run(ctx context.Context, t Target, o Options) (*Report, error) {
	r, err := resolve(t, o)
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	defer r.startBroker(ctx)()
	rep := newReport(r)
	type job struct {
		c Case
		h Harness
	}
	var jobs []job
	for _, h := range r.harnesses {
		for _, c := range r.cases {
			jobs = append(jobs, job{c, h})
		}
	}
	results := make([]Result, len(jobs))
	var pmu sync.Mutex
	notify := func(p Progress) {
		if r.o.Progress != nil {
			pmu.Lock()
			defer pmu.Unlock()
			r.o.Progress(p)
		}
	}
	sem := make(chan struct{}, r.o.Parallel)
	var wg sync.WaitGroup
	for i, j := range jobs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			results[i] = notRun(j.c, j.h, context.Cause(ctx))
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			results[i] = r.runCase(ctx, j.c, j.h, notify)
		})
	}
	wg.Wait()
	rep.finish(results)
	if ctx.Err() != nil {
		return rep, fmt.Errorf("conformance: %w", context.Cause(ctx))
	}
	return rep, nil
}

func notRun(c Case, h Harness, cause error) Result {
	return Result{Case: c.ID, Description: c.Description, Harness: h.Name(), Outcome: Fail, Started: time.Now().UTC(),
		Evidence: &Evidence{Request: "run the case", Got: "not started: " + cause.Error(), Want: "the case to run"}}
}

// runCase runs one case for one harness, then cleans up after it.
func (r *resolved) runCase(ctx context.Context, cs Case, h Harness, notify func(Progress)) Result {
	res := Result{Case: cs.ID, Description: cs.Description, Harness: h.Name(), RunTag: sandbox.NewRunTag(), Started: time.Now().UTC()}
	notify(Progress{Case: cs, Harness: h.Name()})
	timeout := cs.Timeout
	if timeout == 0 {
		timeout = r.o.CaseTimeout
	}
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, errCaseDeadline)
	c := &caseCtx{ctx: cctx, r: r, h: h, runTag: res.RunTag,
		log: r.o.Logger.With("case", cs.ID, "harness", h.Name(), "run", res.RunTag)}
	done := make(chan error, 1)
	go func() { done <- c.protect(cs.run) }()
	stuck := time.NewTimer(timeout + caseGrace)
	var err error
	select {
	case err = <-done:
	case <-stuck.C:
		err = failf("run the case", fmt.Sprintf("it to return within its deadline of %v", timeout),
			"it had not returned %v after its deadline; it was left behind", caseGrace)
	}
	stuck.Stop()
	if err != nil && errors.Is(context.Cause(cctx), errCaseDeadline) {
		err = fmt.Errorf("%w (the case's deadline of %v passed)", err, timeout)
	}
	cancel()
	c.result(&res, err)
	res.Cleanup = c.cleanup(ctx)
	if len(res.Cleanup) > 0 {
		res.Outcome = Fail
	}
	res.Boxes = c.boxIDs()
	res.Notes = c.notesCopy()
	res.Chaos = c.chaosStats()
	res.Seconds = time.Since(res.Started).Seconds()
	notify(Progress{Case: cs, Harness: h.Name(), Result: &res})
	return res
}

// result records how a case's function ended.
func (c *caseCtx) result(res *Result, err error) {
	var f *Failure
	var s *Skip
	switch {
	case err == nil:
		res.Outcome = Pass
	case errors.As(err, &s):
		res.Outcome, res.Capability, res.Reason = NotApplicable, s.Capability, s.Reason
	case errors.As(err, &f):
		res.Outcome = Fail
		ev := f.Evidence
		if msg, inner := err.Error(), f.Error(); msg != inner {
			// Wrapped: keep what the wrapping added (a deadline note).
			ev.Got += strings.TrimPrefix(msg, inner)
		}
		res.Evidence = &ev
	default:
		res.Outcome = Fail
		res.Evidence = &Evidence{Request: c.lastRequest(), Got: err.Error(), Want: "no error"}
	}
}

// protect runs fn, turning a panic into a failure.
func (c *caseCtx) protect(fn func(*caseCtx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = failf(c.lastRequest(), "no panic", "panic: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(c)
}

// cleanup destroys what the case made and checks that no box with its run
// tag is left, on a context the caller's cancellation does not reach. It
// returns the cleanup failures.
func (c *caseCtx) cleanup(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	c.mu.Lock()
	c.closed = true
	envs, closers := c.envs, c.closers
	c.mu.Unlock()
	var out []string
	for _, e := range envs {
		if err := e.Destroy(ctx); err != nil && !errors.Is(err, provider.ErrDestroyed) {
			out = append(out, fmt.Sprintf("destroy box %s: %v", e.Reference().BoxID, err))
		}
	}
	for _, close := range closers {
		_ = close(ctx)
	}
	v := c.r.t.Vendor
	left, err := v.List(ctx, map[string]string{boxmeta.LabelRunTag: c.runTag})
	if err != nil {
		return append(out, fmt.Sprintf("list boxes with run tag %s: %v", c.runTag, err))
	}
	for _, b := range left {
		msg := fmt.Sprintf("box %s (%s) was left with run tag %s", b.ID, b.State, c.runTag)
		box, err := v.Connect(ctx, b.ID)
		if err == nil {
			err = box.Destroy(ctx)
		}
		switch {
		case errors.Is(err, vendors.ErrNotFound):
			msg += "; it is gone now"
		case err != nil:
			msg += fmt.Sprintf("; destroying it failed: %v", err)
		default:
			msg += "; the runner destroyed it"
		}
		out = append(out, msg)
	}
	return out
}
