package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// discoveryTimeout bounds one shared capability discovery, which outlives
// the caller that started it when others wait on it too.
const discoveryTimeout = 2 * time.Minute

// Provider is a client of one bridge. It is safe for concurrent use. It
// owns the work it runs past its callers (see Close); Close it when done.
type Provider struct {
	c                 *client
	configuredBackend string

	flight singleflight.Group

	mu       sync.Mutex
	verified map[string]bool          // model routes whose capabilities were discovered on request
	creates  map[string]*createRecord // by idempotency key
}

type createRecord struct {
	digest string
	env    *Environment
}

// New returns a Provider for opts. It makes no request.
func New(opts Options) (*Provider, error) {
	o, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	return &Provider{
		c:                 &client{opts: o, bg: newBackground()},
		configuredBackend: backendOfRoute(o.DefaultModel),
		verified:          map[string]bool{},
		creates:           map[string]*createRecord{},
	}, nil
}

// Name returns the provider coordinate of every run this Provider starts.
func (p *Provider) Name() string { return p.c.opts.Name }

// Capabilities discovers what the bridge offers for the default model
// (Options.DefaultModel) and returns it narrowed to what this client
// implements. Without a default model it returns the local capabilities,
// which claim no retained control. Later environments created for the
// same route use the discovered document.
func (p *Provider) Capabilities(ctx context.Context) (*Capabilities, error) {
	if m := p.c.opts.DefaultModel; m != "" {
		p.mu.Lock()
		p.verified[m] = true
		p.mu.Unlock()
	}
	return p.resolveCapabilities(ctx, p.c.opts.DefaultModel, true)
}

// resolveCapabilities returns the explicit document, the discovered one,
// or the local one.
func (p *Provider) resolveCapabilities(ctx context.Context, model string, remote bool) (*Capabilities, error) {
	if p.c.opts.Capabilities != nil {
		return narrow(p.c.opts, p.c.opts.Capabilities), nil
	}
	if model == "" || !remote {
		return localCapabilities(p.c.opts), nil
	}
	ch := p.flight.DoChan(model, func() (any, error) {
		p.c.bg.add()
		defer p.c.bg.done()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discoveryTimeout)
		defer cancel()
		return p.c.discover(dctx, model)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return narrow(p.c.opts, res.Val.(*Capabilities)), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("discover capabilities: %w", context.Cause(ctx))
	}
}

// Create returns a new environment for req. It fails before any network
// use on an invalid request. Capabilities are discovered from the bridge
// for Pi routes and for routes already discovered through Capabilities;
// other environments claim no retained control.
func (p *Provider) Create(ctx context.Context, req CreateRequest) (*Environment, error) {
	const op = "create environment"
	if p.c.bg.isClosed() {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	if req.Profile.Name == "" {
		return nil, fmt.Errorf("%s: profile name is required", op)
	}
	if err := checkWorkspace(p.c.opts, &req); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	backend := req.Backend
	if backend == "" {
		backend = req.Profile.Harness
	}
	if backend == "" {
		backend = p.configuredBackend
	}
	var model string
	if backend != "" || p.c.opts.DefaultModel != "" || req.Profile.Model.Default != "" {
		m, err := resolveModel(p.c.opts, &req, "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		model = m
	}
	digest, err := wire.Digest(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if key := req.IdempotencyKey; key != "" {
		p.mu.Lock()
		rec := p.creates[key]
		p.mu.Unlock()
		if rec != nil {
			if rec.digest != digest {
				return nil, &ConflictError{Op: op, Type: "idempotency_conflict", Message: "idempotency key was used for a different create request"}
			}
			return rec.env, nil
		}
	}
	id, err := environmentID(route{Backend: backend, Model: model, CreateDigest: digest}, req.IdempotencyKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	p.mu.Lock()
	remote := backend == "pi" || (model != "" && p.verified[model])
	p.mu.Unlock()
	caps, err := p.resolveCapabilities(ctx, model, remote)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	env := newEnvironment(p, id, req, backend, model, caps, false)
	if key := req.IdempotencyKey; key != "" {
		p.mu.Lock()
		if rec := p.creates[key]; rec != nil {
			p.mu.Unlock()
			if rec.digest != digest {
				return nil, &ConflictError{Op: op, Type: "idempotency_conflict", Message: "idempotency key was used for a different create request"}
			}
			return rec.env, nil
		}
		p.creates[key] = &createRecord{digest: digest, env: env}
		p.mu.Unlock()
	}
	return env, nil
}

// Close stops p from starting anything new: Create, and every new turn of
// its environments (Dispatch, Stream, Session.Prompt,
// Session.ContinueNative), fail with ErrClosed from then on. It stops
// enforcing the Timeout of dispatched turns (their runs go on in the
// bridge, as after a process exit), then waits, bounded by ctx, for the
// work p runs on its own: cancellations in flight, including those whose
// caller stopped waiting (a Session.Cancel or Destroy whose ctx ended),
// and shared capability discoveries. Finally it closes the
// idle connections of the HTTP client. Work still running when ctx ends
// goes on within its own bound (Options.CancelWait), and Close returns
// ctx's cause.
//
// Streams already running, and control of existing runs (Status, Events,
// Result, Cancel, Destroy, Get), keep working. Close is idempotent: a later
// call waits again for whatever is still pending.
func (p *Provider) Close(ctx context.Context) error {
	p.c.bg.close()
	err := p.c.bg.wait(ctx)
	p.c.opts.HTTPClient.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("close provider: %w", err)
	}
	return nil
}

// GetOptions tunes Get.
type GetOptions struct {
	// Capabilities, when set, is used instead of discovering the route's
	// capability document from the bridge.
	Capabilities *Capabilities
}

// Get reconstructs an environment from an id that Create returned, in this
// process or another. The id carries the harness, the exact model route and
// the create digest, so no cache is needed. The environment controls
// existing runs only: it starts no turn (except Session.ContinueNative where
// the bridge proves native continuation) and Destroy cancels nothing.
func (p *Provider) Get(ctx context.Context, environmentID string, o GetOptions) (*Environment, error) {
	const op = "get environment"
	r, err := parseEnvironmentID(environmentID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var caps *Capabilities
	if o.Capabilities != nil {
		caps = narrow(p.c.opts, o.Capabilities)
	} else if caps, err = p.resolveCapabilities(ctx, r.Model, true); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	req := CreateRequest{Profile: Profile{Name: "reconnected"}, Backend: r.Backend}
	return newEnvironment(p, environmentID, req, r.Backend, r.Model, caps, true), nil
}

// PlannedRun are the coordinates a caller planned for a run before it
// dispatched it. Provider defaults to the Provider's name.
type PlannedRun struct {
	RunID         string
	EnvironmentID string
	SessionID     string
	ExecutionID   string
	Provider      string
}

// LookupRun recovers the ControlRef of a run whose dispatch the caller may
// have lost (it crashed before saving the reference). It returns the
// bridge-issued reference only when all five planned coordinates match the
// retained run, and nil (with a nil error) when the bridge knows no such
// run or any coordinate differs.
func (p *Provider) LookupRun(ctx context.Context, planned PlannedRun) (*ControlRef, error) {
	const op = "lookup run"
	if planned.Provider == "" {
		planned.Provider = p.Name()
	}
	if err := wire.ValidRunID(planned.RunID); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	for name, v := range map[string]string{"provider": planned.Provider, "environment id": planned.EnvironmentID, "session id": planned.SessionID, "execution id": planned.ExecutionID} {
		if err := wire.ValidIdentifier(v); err != nil {
			return nil, fmt.Errorf("%s: %s %w", op, name, err)
		}
	}
	s, err := p.c.getSnapshot(ctx, op, planned.RunID, 0)
	var nf *NotFoundError
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := checkSnapshot(op, s); err != nil {
		return nil, err
	}
	ref := ControlRef{RunID: s.ID, Provider: s.Provider, EnvironmentID: s.EnvironmentID, SessionID: s.SessionID, ExecutionID: s.ExecutionID, RequestDigest: s.RequestDigest}
	if ref.RunID != planned.RunID || ref.Provider != planned.Provider || ref.EnvironmentID != planned.EnvironmentID ||
		ref.SessionID != planned.SessionID || ref.ExecutionID != planned.ExecutionID {
		return nil, nil
	}
	return &ref, nil
}
