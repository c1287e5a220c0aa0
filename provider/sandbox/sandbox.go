package sandbox

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/tracing"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Provider makes environments in boxes of one vendor from one image. It
// is safe for concurrent use.
type Provider struct {
	o Options
	// standbys are the boxes this provider booted for a pool, by id, so
	// that a claim in this process needs no vendor call to reach one.
	standbys sync.Map
	// pinned holds the harnesses whose pin a box of the vendor's own
	// standby pool passed: its pods run this provider's image, so the
	// next claims need not ask again.
	pinned sync.Map
}

// New returns a Provider. It makes no vendor call.
func New(o Options) (*Provider, error) {
	o, err := o.normalized()
	if err != nil {
		return nil, err
	}
	return &Provider{o: o}, nil
}

// RunTag returns the run tag of this provider's boxes.
func (p *Provider) RunTag() string { return p.o.RunTag }

// Image is the image the provider makes boxes from.
func (p *Provider) Image() string { return p.o.Image }

// WorkspaceRepo asks for a repository checkout in the box.
type WorkspaceRepo struct {
	// RepoURL is cloned into the box's workspace. Credentials in it are
	// used by git and never appear in an error.
	RepoURL string
	// GitRef is checked out after the clone (branch, tag or commit);
	// empty means the default branch.
	GitRef string
}

// CreateRequest describes one environment in a new box.
type CreateRequest struct {
	// Profile is the agent profile; Profile.Harness is required.
	Profile provider.Profile
	// Workspace asks for a repository in the box's workspace.
	Workspace *WorkspaceRepo
	// Env is added to the harness's environment on every turn.
	Env map[string]string
	// Metadata is forwarded with every turn.
	Metadata map[string]any
	// Lifetime overrides Options.Lifetime for this box.
	Lifetime time.Duration
	// Labels are added to this box's labels.
	Labels map[string]string
	// Pool names a warm pool of the vendor's own (vendors.WarmPools) to
	// claim the box from when one of its boxes serves the request; a
	// vendor that keeps no pools refuses it.
	Pool string
}

func (p *Provider) spec(req CreateRequest) vendors.CreateSpec {
	life := p.o.Lifetime
	if req.Lifetime != 0 {
		life = req.Lifetime
	}
	labels := maps.Clone(p.o.Labels)
	if labels == nil && (len(req.Labels) > 0 || p.o.IdleSuspend > 0) {
		labels = map[string]string{}
	}
	maps.Copy(labels, req.Labels)
	if p.o.IdleSuspend > 0 {
		// gc reads it to suspend the box when no process watches it.
		labels[boxmeta.LabelIdleSuspend] = boxmeta.FormatIdle(p.o.IdleSuspend)
	}
	spec := vendors.CreateSpec{Image: p.o.Image, Lifetime: life, RunTag: p.o.RunTag, Owner: p.o.Owner,
		Labels: labels, Resources: p.o.Resources, Runtime: p.o.Runtime, Ports: []int{BridgePort}, Retention: p.o.Retention, Pool: req.Pool,
		Egress: p.o.Egress}
	if pol, err := p.boxPolicy(req); err == nil { // check refuses the error
		spec.Egress = pol
	}
	if confined(spec) && nativeEgress(p.o.Vendor) {
		// The vendor enforces it: it is told the broker too (New checked
		// that it can be).
		if vp, err := p.vendorPolicy(*spec.Egress); err == nil {
			spec.Egress = &vp
		}
	}
	return spec
}

// check refuses what would fail later, before any vendor call.
func (p *Provider) check(req CreateRequest) (*pins.Harness, vendors.CreateSpec, error) {
	spec := p.spec(req)
	if err := p.checkModel(); err != nil {
		return nil, spec, fmt.Errorf("create box: %w", err)
	}
	if req.Lifetime < 0 {
		return nil, spec, errors.New("create box: lifetime must not be negative")
	}
	if err := vendors.Check(p.o.Vendor, spec); err != nil {
		return nil, spec, fmt.Errorf("create box: %w", err)
	}
	if req.Profile.Harness == "" {
		return nil, spec, errors.New("create box: profile harness is required")
	}
	h, ok := p.o.Pins.Harness(req.Profile.Harness)
	if !ok {
		return nil, spec, fmt.Errorf("create box: harness %q: %w", req.Profile.Harness, pins.ErrUnknownHarness)
	}
	if err := provider.CheckCreate(p.envRequest(req, h)); err != nil {
		return nil, spec, fmt.Errorf("create box: %w", err)
	}
	if w := req.Workspace; w != nil {
		if w.RepoURL == "" {
			return nil, spec, errors.New("create box: workspace repoUrl is required")
		}
		if strings.HasPrefix(w.RepoURL, "-") || strings.HasPrefix(w.GitRef, "-") {
			return nil, spec, errors.New("create box: workspace repoUrl and gitRef must not start with '-'")
		}
		pol, err := p.boxPolicy(req)
		if err == nil && pol != nil && nativeEgress(p.o.Vendor) {
			_, err = p.vendorPolicy(*pol)
		}
		if err != nil {
			return nil, spec, fmt.Errorf("create box: %w", err)
		}
	}
	return h, spec, nil
}

// envRequest is the provider request of an environment.
func (p *Provider) envRequest(req CreateRequest, h *pins.Harness) provider.CreateRequest {
	prof := req.Profile
	prof.Harness = h.Name
	if prof.Name == "" {
		prof.Name = h.Name
	}
	if prof.Model.Default == "" {
		prof.Model.Default = defaultModel(h.Name, p.o.Upstream)
	}
	return provider.CreateRequest{Profile: prof, Workspace: &provider.Workspace{Cwd: Workspace}, Env: req.Env, Metadata: req.Metadata}
}

// firstModel is the model a turn of req's environment names after its
// harness in its route ("sonnet" of "claude-code/sonnet"; "" for the
// harness's default, or a profile whose route cannot be made).
func firstModel(req provider.CreateRequest) string {
	route, err := provider.ModelRoute(req)
	if err != nil {
		return ""
	}
	_, model, _ := strings.Cut(route, "/")
	return model
}

// Create makes a box and returns its environment; see the package
// documentation for the steps and the cleanup rules. Each step is a span
// (a child of "sandbox.create") and a Phase of Environment.Timings.
func (p *Provider) Create(ctx context.Context, req CreateRequest) (_ *Environment, err error) {
	ctx, span := tracer.Start(ctx, "sandbox.create", trace.WithAttributes(
		attribute.String("boxctl.vendor", p.o.Vendor.Name()), attribute.String("boxctl.harness", req.Profile.Harness)))
	defer func() { tracing.End(span, err) }()
	t := &timeline{}
	_, end := t.start(ctx, PhaseChecks)
	h, spec, err := p.check(req)
	end(err)
	if err != nil {
		return nil, err
	}
	span.SetAttributes(attribute.String("boxctl.run_tag", spec.RunTag))
	log := p.o.Logger.With("vendor", p.o.Vendor.Name(), "run", spec.RunTag)
	start := time.Now()
	if env, ok, err := p.claimVendorStandby(ctx, t, req, h, spec); ok || err != nil {
		if err == nil {
			log.Debug("environment claimed from the vendor's pool", "box", env.Box().ID(), "took", time.Since(start))
		}
		return env, err
	}
	vctx, end := t.start(ctx, PhaseVendor)
	box, err := p.o.Vendor.Create(vctx, spec)
	end(err)
	if err != nil {
		return nil, fmt.Errorf("create box: %w", err)
	}
	span.SetAttributes(attribute.String("boxctl.box_id", box.ID()))
	p.emit(Event{Type: EventCreated, BoxID: box.ID(), RunTag: spec.RunTag})
	log = log.With("box", box.ID())
	log.Debug("box created", "took", time.Since(start))
	egressAddr, err := p.confine(ctx, box, spec)
	var env *Environment
	if err == nil {
		env, err = p.boot(ctx, t, box, req, h, spec)
	}
	if err != nil {
		err = p.cleanup(ctx, box, err)
		p.forgetEgress(ctx, egressAddr)
		p.emit(Event{Type: EventDestroyed, BoxID: box.ID(), RunTag: spec.RunTag, Reason: ReasonFailure, Detail: err.Error()})
		return nil, err
	}
	env.phases = t.phases
	env.req = &req
	env.egress, env.egressAddr = p.o.Egress, egressAddr
	if pol, err := p.boxPolicy(req); err == nil {
		env.egress = pol
	}
	env.ref.Egress = env.egress
	env.watchIdle()
	log.Debug("environment ready", "took", time.Since(start))
	p.emit(Event{Type: EventReady, BoxID: box.ID(), RunTag: spec.RunTag})
	return env, nil
}

// cleanup destroys box after a failure, on a context Ctrl-C cannot end.
func (p *Provider) cleanup(ctx context.Context, box vendors.Box, cause error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultDestroyTimeout)
	defer cancel()
	cctx, span := tracer.Start(cctx, "sandbox.destroy", trace.WithAttributes(
		attribute.String("boxctl.box_id", box.ID()), attribute.String("boxctl.reason", ReasonFailure)))
	derr := box.Destroy(cctx)
	tracing.End(span, derr)
	p.revokeModel(cctx, box.ID())
	if derr != nil {
		return &vendors.CleanupError{Vendor: p.o.Vendor.Name(), BoxID: box.ID(), Err: errors.Join(cause, fmt.Errorf("destroy: %w", derr))}
	}
	return cause
}

func (p *Provider) boot(ctx context.Context, t *timeline, box vendors.Box, req CreateRequest, h *pins.Harness, spec vendors.CreateSpec) (*Environment, error) {
	ep, bearer, err := p.startBridge(ctx, t, box, h, firstModel(p.envRequest(req, h)), tokenUntil(spec.Lifetime, spec.Retention))
	if err != nil {
		return nil, err
	}
	if w := req.Workspace; w != nil {
		pctx, end := t.start(ctx, PhaseClone)
		err := p.clone(pctx, box, w)
		end(err)
		if err != nil {
			return nil, err
		}
	}
	deadline, err := boxDeadline(ctx, t, box)
	if err != nil {
		return nil, err
	}
	ref := Reference{Vendor: p.o.Vendor.Name(), BoxID: box.ID(), Endpoint: ep.URL, Bearer: bearer, Harness: h.Name,
		Profile: req.Profile, Env: req.Env, Metadata: req.Metadata, RunTag: spec.RunTag, Deadline: deadline,
		EnvironmentKey: "box-" + strings.ToLower(newSecret()[:24])}
	pctx, end := t.start(ctx, PhaseAttach)
	e, err := p.attach(pctx, box, ep, ref, h)
	end(err)
	return e, err
}

// boxDeadline is the deadline of a box just made: the one its handle
// knows (vendors.Deadlined), else its Status's (PhaseStatus).
func boxDeadline(ctx context.Context, t *timeline, box vendors.Box) (time.Time, error) {
	if d, ok := box.(vendors.Deadlined); ok {
		if at, ok := d.KnownDeadline(); ok {
			return at, nil
		}
	}
	pctx, end := t.start(ctx, PhaseStatus)
	info, err := box.Status(pctx)
	end(err)
	if err != nil {
		return time.Time{}, fmt.Errorf("box status: %w", err)
	}
	return info.Deadline, nil
}

// startBridge starts the bridge in box with a new bearer and model access
// until until, waits until its backend is ready and checks its version against the pin.
//
// model is the model of the box's first turn as its route names it after
// the harness (firstModel): the bridge starts the harness ahead of that
// turn with it.
func (p *Provider) startBridge(ctx context.Context, t *timeline, box vendors.Box, h *pins.Harness, model string, until time.Time) (vendors.Endpoint, string, error) {
	bearer := newSecret()
	modelURL, modelKey, err := p.modelAccess(ctx, box, netip.Addr{}, until)
	if err != nil {
		return vendors.Endpoint{}, "", err
	}
	env := map[string]string{}
	maps.Copy(env, p.o.BridgeEnv)
	maps.Copy(env, map[string]string{
		wire.EnvBearer: bearer, wire.EnvRouterKey: modelKey, wire.EnvRouterURL: modelURL,
		wire.EnvHost: "0.0.0.0", wire.EnvPort: strconv.Itoa(BridgePort), wire.EnvBackends: h.Backend,
		wire.EnvDataDir: "/home/box/.box-bridge", envMaxRuns: "1",
		wire.EnvPrestartCwd: Workspace, wire.EnvPrestartModel: model, wire.EnvModelRelay: "1",
	})
	if len(p.o.BrokerCA) > 0 {
		env[wire.EnvRouterCA] = string(p.o.BrokerCA)
	}
	pctx, end := t.start(ctx, PhaseSpawn)
	proc, err := box.Spawn(pctx, vendors.SpawnSpec{Name: BridgeProcess, Command: []string{"box-bridge", "-supervise"}, Env: env, Dir: Workspace})
	end(err)
	if err != nil {
		return vendors.Endpoint{}, "", fmt.Errorf("start bridge: %w", err)
	}
	pctx, end = t.start(ctx, PhaseEndpoint)
	ep, err := box.Endpoint(pctx, BridgePort)
	end(err)
	if err != nil {
		return vendors.Endpoint{}, "", fmt.Errorf("bridge endpoint: %w", err)
	}
	client := ep.Client()
	exited := make(chan error, 1)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		code, err := proc.Wait(wctx)
		switch {
		case wctx.Err() != nil:
		case err != nil:
			exited <- fmt.Errorf("bridge process: %w", err) // the box died (gone, out of memory, ended)
		default:
			exited <- &BridgeExitError{ExitCode: code, Log: processLog(context.WithoutCancel(ctx), proc)}
		}
	}()
	pctx, end = t.start(ctx, PhaseHealth)
	health, err := healthWait{URL: ep.URL, Client: client, Backend: h.Name, Timeout: p.o.ReadyTimeout}.WaitUntilReady(pctx, exited)
	client.CloseIdleConnections()
	end(err)
	if err != nil {
		return vendors.Endpoint{}, "", fmt.Errorf("wait for bridge: %w", err)
	}
	stopWatch()
	_, end = t.start(ctx, PhasePins, attribute.String("boxctl.harness_version", health.Version))
	if !versionMatches(h, health.Version) {
		err := &PinMismatchError{Harness: h.Name, Pinned: h.Version, Reported: health.Version}
		end(err)
		return vendors.Endpoint{}, "", err
	}
	end(nil)
	return ep, bearer, nil
}

// attach makes the provider environment of a booted box.
func (p *Provider) attach(ctx context.Context, box vendors.Box, ep vendors.Endpoint, ref Reference, h *pins.Harness) (*Environment, error) {
	preq := p.envRequest(CreateRequest{Profile: ref.Profile, Env: ref.Env, Metadata: ref.Metadata}, h)
	preq.IdempotencyKey = ref.EnvironmentKey
	po := provider.Options{BaseURL: ep.URL, BearerToken: ref.Bearer, HTTPClient: ep.Client(), Name: "boxctl-" + ref.Vendor, Logger: p.o.Logger}
	if p.o.Interactive {
		route, err := provider.ModelRoute(preq)
		if err != nil {
			return nil, fmt.Errorf("environment: %w", err)
		}
		po.DefaultModel = route
	}
	pv, err := provider.New(po)
	if err != nil {
		return nil, err
	}
	if p.o.Interactive {
		if _, err := pv.Capabilities(ctx); err != nil {
			_ = pv.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("environment: %w", err)
		}
	}
	penv, err := pv.Create(ctx, preq)
	if err != nil {
		_ = pv.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("environment: %w", err)
	}
	return &Environment{Environment: penv, p: p, pv: pv, box: box, ref: ref}, nil
}

// versionMatches reports whether a backend's reported version is the pin.
func versionMatches(h *pins.Harness, reported string) bool {
	re, err := regexp.Compile(h.VersionPattern)
	if err != nil {
		return false
	}
	return re.MatchString(strings.TrimSpace(reported))
}

// processLog returns the tail of an ended process's output.
func processLog(ctx context.Context, proc vendors.Process) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stdout, stderr, err := proc.Output(ctx)
	if err != nil {
		return ""
	}
	defer stdout.Close()
	defer stderr.Close()
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	b, _ := io.ReadAll(io.LimitReader(stderr, 1<<20))
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

// clone checks the workspace repository out in the box.
func (p *Provider) clone(ctx context.Context, box vendors.Box, w *WorkspaceRepo) error {
	ctx, cancel := context.WithTimeout(ctx, p.o.CloneTimeout)
	defer cancel()
	// The URL and ref travel in the command's environment (in no inspect
	// data, no command line); credentials in the URL become an HTTP header
	// for this clone only, so .git/config keeps the clean URL.
	safe := redactURL(w.RepoURL)
	env := map[string]string{"GIT_TERMINAL_PROMPT": "0", "BOXCTL_REPO": safe, "BOXCTL_REF": w.GitRef}
	if u, err := url.Parse(w.RepoURL); err == nil && u.User != nil {
		pw, _ := u.User.Password()
		auth := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pw))
		env["GIT_CONFIG_COUNT"], env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"] = "1", "http.extraHeader", "Authorization: Basic "+auth
	}
	script := `git clone --quiet -- "$BOXCTL_REPO" . && { [ -z "$BOXCTL_REF" ] || git checkout --quiet "$BOXCTL_REF" --; }`
	res, err := box.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", script}, Dir: Workspace, Env: env})
	if err != nil {
		return &CloneError{Repo: safe, GitRef: w.GitRef, Message: redactIn(err.Error(), w.RepoURL)}
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			msg = "git exited " + strconv.Itoa(res.ExitCode)
		}
		return &CloneError{Repo: safe, GitRef: w.GitRef, Message: redactIn(msg, w.RepoURL)}
	}
	return nil
}

// redactURL drops a URL's credentials.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// redactIn removes the credentials of raw (a URL) from s.
func redactIn(s, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return s
	}
	s = strings.ReplaceAll(s, raw, redactURL(raw))
	if pw, ok := u.User.Password(); ok && pw != "" {
		s = strings.ReplaceAll(s, pw, "xxxxx")
		s = strings.ReplaceAll(s, url.QueryEscape(pw), "xxxxx")
	}
	if name := u.User.Username(); name != "" {
		s = strings.ReplaceAll(s, name+"@", "xxxxx@")
	}
	return s
}

// Connect drives an existing box again from a reference another process
// persisted.
func (p *Provider) Connect(ctx context.Context, ref Reference) (*Environment, error) {
	if ref.Vendor != p.o.Vendor.Name() {
		return nil, fmt.Errorf("connect: reference is of vendor %s, not %s", ref.Vendor, p.o.Vendor.Name())
	}
	if ref.BoxID == "" || ref.Bearer == "" || ref.EnvironmentKey == "" {
		return nil, errors.New("connect: reference lacks its box id, bearer or environment key")
	}
	h, ok := p.o.Pins.Harness(ref.Harness)
	if !ok {
		return nil, fmt.Errorf("connect: harness %q: %w", ref.Harness, pins.ErrUnknownHarness)
	}
	box, err := p.o.Vendor.Connect(ctx, ref.BoxID)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	ep, err := box.Endpoint(ctx, BridgePort)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	ref.Endpoint = ep.URL
	env, err := p.attach(ctx, box, ep, ref, h)
	if err != nil {
		return nil, err
	}
	// A confined box's address at the gate, so that a change, a suspend
	// or a destroy from this process reaches the gate's entry of it.
	env.egress = ref.Egress
	if confined(vendors.CreateSpec{Egress: ref.Egress}) && p.o.EgressGate != nil && (!nativeEgress(p.o.Vendor) || relayedEgress(p.o.Vendor)) {
		if a, ok := box.(vendors.Addressed); ok {
			if addr, err := a.Address(ctx); err == nil {
				env.egressAddr = addr
			}
		}
	}
	return env, nil
}
