package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/tracing"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/vendors"
)

// Lifecycle events of suspend and resume.
const (
	// EventSuspended: the box stopped with its disk kept; Detail says
	// why (ReasonUser, ReasonIdle).
	EventSuspended EventType = "suspended"
	// EventResumed: a suspended box runs again with a fresh bridge.
	EventResumed EventType = "resumed"
	// EventForked: a suspended box's disk made a new box (BoxID), from
	// the box named in Detail.
	EventForked EventType = "forked"
)

// ReasonIdle is the reason of a suspend the idle clock asked for
// (Options.IdleSuspend).
const ReasonIdle = "idle"

// SuspendedRef is what Provider.Resume takes: a suspended box and its
// environment, without a bearer (the bridge that knew it is gone; Resume
// makes a new one). It is safe to store and print.
type SuspendedRef struct {
	Reference
	SuspendedAt time.Time     `json:"suspendedAt"`
	BudgetLeft  time.Duration `json:"budgetLeft"`
	RetainUntil time.Time     `json:"retainUntil"`
}

// NewSuspendedRef is the reference of box ref once its suspend left
// info: without the bearer and the endpoint (the bridge that had them is
// gone), the retention as its deadline.
func NewSuspendedRef(ref Reference, info vendors.SuspendInfo) SuspendedRef {
	ref.Bearer, ref.Endpoint, ref.Deadline = "", "", info.RetainUntil
	return SuspendedRef{Reference: ref, SuspendedAt: info.SuspendedAt, BudgetLeft: info.BudgetLeft, RetainUntil: info.RetainUntil}
}

// String describes the reference.
func (r SuspendedRef) String() string {
	return fmt.Sprintf("suspended box %s on %s (%s, %s of its budget left, kept until %s)", r.BoxID, r.Vendor, r.Harness,
		r.BudgetLeft, r.RetainUntil.UTC().Format(time.RFC3339))
}

// Format prints String for every verb.
func (r SuspendedRef) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, r.String()) }

// SuspendOptions tunes Environment.Suspend.
type SuspendOptions struct {
	// CancelLive cancels the last turn this environment dispatched, if it
	// is live, instead of refusing the suspend. A turn being streamed by
	// this process, or one started by another, is refused all the same.
	CancelLive bool
	// reason is the event's detail (ReasonUser unless set).
	reason string
}

// suspender returns the vendor's Suspender, or a typed refusal.
func (p *Provider) suspender(boxID string) (vendors.Suspender, error) {
	s, ok := p.o.Vendor.(vendors.Suspender)
	if !ok {
		return nil, &vendors.NotSuspendableError{Vendor: p.o.Vendor.Name(), ID: boxID, Reason: "the vendor cannot suspend boxes"}
	}
	return s, nil
}

// bridgeIdle reads the bridge's idle clock from /health.
func bridgeIdle(ctx context.Context, client *http.Client, url string) (wire.Idle, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return wire.Idle{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return wire.Idle{}, err
	}
	defer resp.Body.Close()
	var h wire.Health
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&h); err != nil {
		return wire.Idle{}, fmt.Errorf("GET /health: %d: %w", resp.StatusCode, err)
	}
	if h.Idle == nil {
		return wire.Idle{}, errors.New("GET /health: the bridge reports no idle clock (an older bridge)")
	}
	return *h.Idle, nil
}

// Suspend stops the environment's box at a turn boundary and keeps its
// disk: the workspace, the bridge's store and the harness's session files.
// A live turn is refused with a *provider.ConflictError (or cancelled
// first, see SuspendOptions). The bridge is stopped first so its store is
// closed cleanly, then the vendor stops the box; the environment is
// unusable after, and Provider.Resume takes the returned reference.
func (e *Environment) Suspend(ctx context.Context, o SuspendOptions) (_ SuspendedRef, err error) {
	ctx, span := tracer.Start(ctx, "sandbox.suspend", trace.WithAttributes(attribute.String("boxctl.box_id", e.box.ID())))
	defer func() { tracing.End(span, err) }()
	const op = "environment.Suspend"
	s, err := e.p.suspender(e.box.ID())
	if err != nil {
		return SuspendedRef{}, err
	}
	if o.CancelLive {
		e.mu.Lock()
		last := e.last
		e.mu.Unlock()
		if last != nil {
			if ses, err := e.Session(last.ID, provider.SessionOptions{ControlRef: &last.ControlRef}); err == nil {
				_, _ = ses.Cancel(ctx)
			}
		}
	}
	if err := e.acquire(ctx, op); err != nil {
		return SuspendedRef{}, err
	}
	if _, err := turnBoundary(ctx, e.box, op); err != nil {
		e.release()
		return SuspendedRef{}, err
	}
	// From here the environment takes no more turns (busy stays set).
	stopBridge(ctx, e.box)
	_ = e.pv.Close(ctx)
	info, err := s.Suspend(ctx, e.box.ID())
	if err != nil {
		return SuspendedRef{}, fmt.Errorf("suspend: %w", err)
	}
	// The box's address may be another's until it resumes (at another).
	e.releaseEgress(ctx)
	e.mu.Lock()
	e.egressAddr = netip.Addr{}
	e.mu.Unlock()
	ref := NewSuspendedRef(e.ref, info)
	reason := o.reason
	if reason == "" {
		reason = ReasonUser
	}
	e.mu.Lock()
	e.suspended = &ref
	e.mu.Unlock()
	e.p.emit(Event{Type: EventSuspended, BoxID: e.box.ID(), RunTag: e.ref.RunTag, Reason: reason})
	e.endIdleWatch()
	return ref, nil
}

// turnBoundary reads the idle clock of box's bridge and refuses a box
// with a live run (a *provider.ConflictError of op): the check before
// every suspend.
func turnBoundary(ctx context.Context, box vendors.Box, op string) (wire.Idle, error) {
	ep, err := box.Endpoint(ctx, BridgePort)
	if err != nil {
		return wire.Idle{}, fmt.Errorf("suspend: %w", err)
	}
	client := ep.Client()
	defer client.CloseIdleConnections()
	idle, err := bridgeIdle(ctx, client, ep.URL)
	if err != nil {
		return idle, fmt.Errorf("suspend: %w", err)
	}
	if idle.LiveRuns > 0 {
		return idle, &provider.ConflictError{Op: op, Type: wire.TypeSessionBusy,
			Message: fmt.Sprintf("the box has %d live run(s): suspend only between turns", idle.LiveRuns)}
	}
	return idle, nil
}

// stopBridge ends box's bridge process with SIGTERM and waits a while for
// it (its shutdown closes the store); the box's stop ends it anyway.
func stopBridge(ctx context.Context, box vendors.Box) {
	proc, err := box.Process(ctx, BridgeProcess)
	if err != nil {
		return
	}
	if proc.Signal(ctx, syscall.SIGTERM) != nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _ = proc.Wait(wctx)
}

// Suspended returns the reference of the environment's suspend, once it
// was suspended (by Suspend or the idle clock).
func (e *Environment) Suspended() (SuspendedRef, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.suspended == nil {
		return SuspendedRef{}, false
	}
	return *e.suspended, true
}

// Resume starts a suspended box again and returns its environment: a new
// bridge with a fresh bearer (the old one opens nothing), on the same
// store, so earlier runs replay and the harness's retained sessions
// continue (the bridge resumes each native session in a fresh process).
// The pin is checked as at Create. A box past its retention is
// *vendors.RetentionError; a failure after the box started suspends it
// again.
func (p *Provider) Resume(ctx context.Context, ref SuspendedRef) (_ *Environment, err error) {
	ctx, span := tracer.Start(ctx, "sandbox.resume", trace.WithAttributes(
		attribute.String("boxctl.vendor", ref.Vendor), attribute.String("boxctl.box_id", ref.BoxID)))
	defer func() { tracing.End(span, err) }()
	h, err := p.resumable(ref)
	if err != nil {
		return nil, err
	}
	s, err := p.suspender(ref.BoxID)
	if err != nil {
		return nil, err
	}
	box, err := s.Resume(ctx, ref.BoxID)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	env, err := p.reattach(ctx, box, ref.Reference, h)
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultDestroyTimeout)
		defer cancel()
		if _, serr := s.Suspend(cctx, box.ID()); serr != nil {
			return nil, errors.Join(err, fmt.Errorf("suspend again: %w", serr))
		}
		return nil, err
	}
	p.emit(Event{Type: EventResumed, BoxID: box.ID(), RunTag: ref.RunTag})
	return env, nil
}

// resumable checks a reference before any vendor call.
func (p *Provider) resumable(ref SuspendedRef) (*pins.Harness, error) {
	if ref.Vendor != p.o.Vendor.Name() {
		return nil, fmt.Errorf("resume: reference is of vendor %s, not %s", ref.Vendor, p.o.Vendor.Name())
	}
	if ref.BoxID == "" || ref.EnvironmentKey == "" {
		return nil, errors.New("resume: reference lacks its box id or environment key")
	}
	if err := p.checkModel(); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	h, ok := p.o.Pins.Harness(ref.Harness)
	if !ok {
		return nil, fmt.Errorf("resume: harness %q: %w", ref.Harness, pins.ErrUnknownHarness)
	}
	return h, nil
}

// reattach boots the bridge of a started box again and attaches the
// environment of ref to it.
func (p *Provider) reattach(ctx context.Context, box vendors.Box, ref Reference, h *pins.Harness) (*Environment, error) {
	t := &timeline{}
	ep, bearer, err := p.startBridge(ctx, t, box, h, firstModel(p.envRequest(CreateRequest{Profile: ref.Profile}, h)), tokenUntil(p.o.Lifetime, p.o.Retention))
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	info, err := box.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("resume: box status: %w", err)
	}
	ref.BoxID, ref.Bearer, ref.Endpoint, ref.Deadline = box.ID(), bearer, ep.URL, info.Deadline
	addr, err := p.reconfine(ctx, box, ref)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	env, err := p.attach(ctx, box, ep, ref, h)
	if err != nil {
		p.forgetEgress(ctx, addr)
		return nil, fmt.Errorf("resume: %w", err)
	}
	env.egress, env.egressAddr = ref.Egress, addr
	env.phases = t.phases
	env.watchIdle()
	return env, nil
}

// Fork suspends the environment at a turn boundary, makes n new boxes of
// its disk, and resumes it and each of them: n environments of their own,
// each with its own bearer, each continuing the same session history on
// its own.
func (e *Environment) Fork(ctx context.Context, n int) ([]*Environment, *Environment, error) {
	ref, err := e.Suspend(ctx, SuspendOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("fork: %w", err)
	}
	forks, ferr := e.p.Fork(ctx, ref, n)
	self, rerr := e.p.Resume(ctx, ref)
	return forks, self, errors.Join(ferr, rerr)
}

// Fork makes n new boxes from suspended box ref's disk and resumes each:
// n environments with their own bearers, continuing the box's sessions
// from where it was suspended. The source stays suspended. On an error no
// fork is left running: those made are destroyed.
func (p *Provider) Fork(ctx context.Context, ref SuspendedRef, n int) (_ []*Environment, err error) {
	ctx, span := tracer.Start(ctx, "sandbox.fork", trace.WithAttributes(
		attribute.String("boxctl.box_id", ref.BoxID), attribute.Int("boxctl.forks", n)))
	defer func() { tracing.End(span, err) }()
	h, err := p.resumable(ref)
	if err != nil {
		return nil, err
	}
	s, err := p.suspender(ref.BoxID)
	if err != nil {
		return nil, err
	}
	ids, err := s.Fork(ctx, ref.BoxID, n)
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	envs := make([]*Environment, len(ids))
	errs := make([]error, len(ids))
	done := make(chan struct{})
	for i, id := range ids {
		p.emit(Event{Type: EventForked, BoxID: id, RunTag: ref.RunTag, Detail: ref.BoxID})
		go func() {
			defer func() { done <- struct{}{} }()
			box, err := s.Resume(ctx, id)
			if err == nil {
				envs[i], err = p.reattach(ctx, box, ref.Reference, h)
			}
			if err == nil {
				p.emit(Event{Type: EventResumed, BoxID: id, RunTag: ref.RunTag})
			}
			errs[i] = err
		}()
	}
	for range ids {
		<-done
	}
	if err := errors.Join(errs...); err != nil {
		for i, id := range ids {
			if envs[i] != nil {
				_ = envs[i].Destroy(context.WithoutCancel(ctx))
			} else if box, cerr := p.o.Vendor.Connect(context.WithoutCancel(ctx), id); cerr == nil {
				_ = box.Destroy(context.WithoutCancel(ctx))
			}
		}
		return nil, fmt.Errorf("fork: %w", err)
	}
	return envs, nil
}

// watchIdle starts the idle clock's watch of the environment when
// Options.IdleSuspend is set: it polls the bridge's /health (which moves
// no clock) and suspends the box once it was idle that long. Close,
// Destroy and Suspend end the watch.
func (e *Environment) watchIdle() {
	after := e.p.o.IdleSuspend
	if after <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.mu.Lock()
	e.stopIdle = cancel
	e.mu.Unlock()
	every := min(max(after/5, 100*time.Millisecond), 5*time.Second)
	go func() {
		defer cancel()
		ep, err := e.box.Endpoint(ctx, BridgePort)
		if err != nil {
			e.p.o.Logger.Debug("idle watch: no endpoint", "box", e.box.ID(), "err", err)
			return
		}
		client := ep.Client()
		defer client.CloseIdleConnections()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			idle, err := bridgeIdle(ctx, client, ep.URL)
			if err != nil && e.suspendedElsewhere(ctx) {
				return
			}
			if err != nil || time.Duration(idle.IdleMS)*time.Millisecond < after {
				continue
			}
			if _, err := e.Suspend(ctx, SuspendOptions{reason: ReasonIdle}); err == nil || ctx.Err() != nil {
				return
			} else {
				e.p.o.Logger.Debug("idle suspend refused", "box", e.box.ID(), "err", err)
			}
		}
	}()
}

// suspendedElsewhere reports whether the box was suspended by another
// process (`boxctl gc`, SuspendIdle) and, if so, records it as Suspended
// reports it: what the suspend left is read from the box (its deadline is
// the retention's end; when it stopped and the budget it kept are not
// known here).
func (e *Environment) suspendedElsewhere(ctx context.Context) bool {
	info, err := e.box.Status(ctx)
	if err != nil || info.State != vendors.StateSuspended {
		return false
	}
	ref := NewSuspendedRef(e.ref, vendors.SuspendInfo{RetainUntil: info.Deadline})
	e.mu.Lock()
	if e.suspended == nil {
		e.suspended = &ref
	}
	e.mu.Unlock()
	return true
}

// endIdleWatch stops the idle clock's watch, if one runs.
func (e *Environment) endIdleWatch() {
	e.mu.Lock()
	stop := e.stopIdle
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
}
