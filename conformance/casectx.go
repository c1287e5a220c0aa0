package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

// caseCtx is what a running case works with: its context (with the case's
// deadline), its harness, its run tag, and helpers that make boxes and
// clients the runner cleans up after. One case's helpers may be called
// from several goroutines.
type caseCtx struct {
	ctx    context.Context
	r      *resolved
	h      Harness
	runTag string
	log    *slog.Logger

	mu      sync.Mutex
	closed  bool
	envs    []*sandbox.Environment
	closers []func(context.Context) error
	boxes   []string
	notes   []string
	request string // the last request described, for unexpected errors
	chaos   *ChaosStats
}

// step records what the case asks next, for the evidence of an error the
// case returns as it is.
func (c *caseCtx) step(format string, args ...any) string {
	s := fmt.Sprintf(format, args...)
	c.mu.Lock()
	c.request = s
	c.mu.Unlock()
	return s
}

func (c *caseCtx) lastRequest() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.request == "" {
		return "the case"
	}
	return c.request
}

// note adds an informational line to the case's result.
func (c *caseCtx) note(format string, args ...any) {
	c.mu.Lock()
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func (c *caseCtx) notesCopy() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.notes...)
}

func (c *caseCtx) boxIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.boxes...)
}

// local returns the local endpoint when the boxes use it, else nil.
func (c *caseCtx) local() *Local { return c.r.t.Local }

// options are the sandbox options of the case's boxes: the target's
// vendor, image, Router (through its broker) and pins, the case's run tag.
func (c *caseCtx) options() sandbox.Options {
	t := c.r.t
	return sandbox.Options{Vendor: t.Vendor, Image: t.Image, Router: t.Router, Broker: t.Broker, BrokerURL: t.BrokerURL,
		Pins: t.Pins, Lifetime: c.r.o.Lifetime, RunTag: c.runTag, ReadyTimeout: c.r.o.ReadyTimeout, Logger: c.log}
}

// sandbox returns a sandbox provider of the case's boxes; edit, when not
// nil, changes its options.
func (c *caseCtx) sandbox(edit func(*sandbox.Options)) (*sandbox.Provider, error) {
	o := c.options()
	if edit != nil {
		edit(&o)
	}
	p, err := sandbox.New(o)
	if err != nil {
		return nil, failf(c.step("sandbox.New"), "a provider", "%v", err)
	}
	return p, nil
}

// createRequest is the case's default request: its harness's profile.
func (c *caseCtx) createRequest() sandbox.CreateRequest {
	return sandbox.CreateRequest{Profile: c.h.Profile}
}

// describeCreate names a create for evidence.
func (c *caseCtx) describeCreate(req sandbox.CreateRequest) string {
	s := fmt.Sprintf("Create(%s, image %s on %s", c.h.Name(), c.r.t.Image, c.r.t.Vendor.Name())
	if w := req.Workspace; w != nil {
		s += ", workspace " + w.RepoURL
		if w.GitRef != "" {
			s += " at " + w.GitRef
		}
	}
	return s + ")"
}

// create makes an environment with p (nil: the case's default provider)
// and tracks it for the cleanup.
func (c *caseCtx) create(p *sandbox.Provider, req sandbox.CreateRequest) (*sandbox.Environment, error) {
	if p == nil {
		var err error
		if p, err = c.sandbox(nil); err != nil {
			return nil, err
		}
	}
	if req.Profile.Harness == "" {
		req.Profile = c.h.Profile
	}
	desc := c.step("%s", c.describeCreate(req))
	env, err := p.Create(c.ctx, req)
	if err != nil {
		return nil, failErr(desc, "a ready environment", err)
	}
	c.mu.Lock()
	c.boxes = append(c.boxes, env.Reference().BoxID)
	closed := c.closed
	if !closed {
		c.envs = append(c.envs, env)
	}
	c.mu.Unlock()
	if closed {
		// The runner cleaned up already (the case outlived its deadline).
		_ = env.Destroy(context.WithoutCancel(c.ctx))
		return nil, failf(desc, "a ready environment", "the case's cleanup ran already")
	}
	return env, nil
}

// env makes the case's default environment.
func (c *caseCtx) env() (*sandbox.Environment, error) { return c.create(nil, c.createRequest()) }

// track registers a closer for the cleanup.
func (c *caseCtx) track(close func(context.Context) error) {
	c.mu.Lock()
	c.closers = append(c.closers, close)
	c.mu.Unlock()
}

// connect drives env's box from a new sandbox provider, as another
// process would from the persisted reference.
func (c *caseCtx) connect(env *sandbox.Environment) (*sandbox.Environment, error) {
	p, err := c.sandbox(func(o *sandbox.Options) { o.Router = sandbox.Router{} })
	if err != nil {
		return nil, err
	}
	desc := c.step("Connect(%s) from a new sandbox provider", env.Reference())
	e2, err := p.Connect(c.ctx, env.Reference())
	if err != nil {
		return nil, failf(desc, "the box's environment", "%v", err)
	}
	c.track(e2.Close)
	return e2, nil
}

// bridge returns a bridge client of env's box, with o's settings and the
// box's endpoint and bearer.
func (c *caseCtx) bridge(env *sandbox.Environment, o provider.Options) (*provider.Provider, error) {
	desc := c.step("provider.New on the endpoint of box %s", env.Reference().BoxID)
	ep, err := env.Box().Endpoint(c.ctx, sandbox.BridgePort)
	if err != nil {
		return nil, failf(desc, "the box's endpoint", "%v", err)
	}
	o.BaseURL, o.BearerToken, o.HTTPClient, o.Logger = ep.URL, env.Reference().Bearer, ep.Client(), c.log
	p, err := provider.New(o)
	if err != nil {
		return nil, failf(desc, "a bridge client", "%v", err)
	}
	c.track(p.Close)
	return p, nil
}

// stream runs a turn on env and returns its events, its text and its
// error.
func (c *caseCtx) stream(ctx context.Context, env *sandbox.Environment, turn provider.Turn) ([]provider.Event, string, error) {
	var evs []provider.Event
	var text strings.Builder
	for ev, err := range env.Stream(ctx, turn) {
		if err != nil {
			return evs, text.String(), err
		}
		evs = append(evs, ev)
		text.WriteString(ev.Delta)
	}
	return evs, text.String(), nil
}

// replay reads a session's events after since to the end of its run.
func replay(ctx context.Context, s *provider.Session, since string) ([]provider.Event, error) {
	var evs []provider.Event
	for ev, err := range s.Events(ctx, since) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// wantText checks a turn's text: the scripted reply with the local
// endpoint, any text with a real Router.
func (c *caseCtx) wantText(request, text, want string) error {
	if l := c.local(); l != nil {
		if !strings.Contains(text, want) {
			return failf(request, fmt.Sprintf("text holding %q", want), "text %q", clip(text, 300))
		}
		return nil
	}
	if strings.TrimSpace(text) == "" {
		return failf(request, "some text", "no text")
	}
	return nil
}

// clip shortens s for evidence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("... (%d bytes)", len(s))
}

// newID returns a fresh identifier for run, session and operation ids.
func newID(prefix string) string {
	return prefix + "-" + strings.TrimPrefix(sandbox.NewRunTag(), "run-")
}
