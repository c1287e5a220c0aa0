package main

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/internal/tracing"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// The Router's environment: its URL and the key (never a flag).
const (
	routerURLEnv = sandbox.RouterURLEnv
	routerKeyVar = sandbox.RouterKeyEnv
)

// routerLocal is the --router value that starts a local model endpoint.
const routerLocal = "local"

// routerMargin is how long a local model endpoint outlives its box's
// lifetime, for a box created a moment after the endpoint started.
const routerMargin = time.Minute

// upOptions are the flags of `boxctl up`.
type upOptions struct {
	target     string
	image      string
	harness    string
	model      string
	repo       string
	gitRef     string
	lifetime   time.Duration
	retention  time.Duration
	idle       time.Duration
	router     string
	showBearer bool
	timings    bool
	bridgeOTLP string
	noPool     bool
	upstream   string
	upURL      string
	brokerURL  string

	// Resolved by resolve: the upstream whose key the broker holds for
	// the box, unless routerLocal (up starts the local endpoint).
	up broker.Upstream
}

func newUpCmd(a *app, runF func(context.Context, *upOptions) error) *cobra.Command {
	o := &upOptions{target: docker.Name, harness: "claude-code", lifetime: sandbox.DefaultLifetime}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create a box with the bridge inside and remember it",
		Long: `up creates a box from a box image (default: the last ` + "`boxctl build`" + ` for --target),
starts the bridge in it with a random bearer and a box token, waits until
the harness is ready, and records the box in the state file so that turn, exec,
logs and rm can find it by id, id prefix or "last". It prints the box's id,
endpoint, harness and deadline; the bearer only with --show-bearer.

The model key never enters the box: the user's credential broker (boxctl broker,
started on demand, outliving up) holds it, and the box holds a token of its own
that the broker swaps for the key on each model request, refused once the box is
gone, from any other box, or on any route but the model APIs. The upstream is
--upstream: router (--router URL with the key in $` + routerKeyVar + `, else $` + routerURLEnv + `
and $` + routerKeyVar + `), anthropic ($ANTHROPIC_API_KEY), openai ($OPENAI_API_KEY) or gemini
($GEMINI_API_KEY), each at its public API or at --upstream-url; by default the Router
when its environment is set, else the provider whose key is set (the harness's own
when several are). --router local instead runs a local model endpoint (boxctl
router-stub, with a random key) behind the broker, for as long as the box lives.

The state file is $` + boxstate.PathEnv + `, else $XDG_STATE_HOME/boxctl/boxes.json, else
~/.local/state/boxctl/boxes.json (mode 0600: it holds each box's bearer).`,
		Example: `  boxctl up --router local
  TANGLE_ROUTER_URL=https://router.tangle.tools TANGLE_API_KEY=... boxctl up --model sonnet
  boxctl up --repo https://github.com/octocat/Hello-World --git-ref master --lifetime 1h -o json`,
		Args: boxArgs(cobra.NoArgs),
		RunE: verbRunE(a, o, func([]string) error { return o.resolve(os.Getenv) }, runF, runUp),
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", o.target, "where the box runs: "+strings.Join(boxTargets, ", "))
	f.StringVar(&o.image, "image", "", "box image (default: the last boxctl build for --target; kubernetes takes a registry build)")
	f.StringVar(&o.harness, "harness", o.harness, "the harness the bridge runs")
	f.StringVar(&o.model, "model", "", "the profile's default model (default: the harness's)")
	f.StringVar(&o.repo, "repo", "", "git repository to clone into the box's workspace")
	f.StringVar(&o.gitRef, "git-ref", "", "branch, tag or commit of --repo to check out")
	f.DurationVar(&o.lifetime, "lifetime", o.lifetime, "how long the box lives; it ends by itself then")
	f.DurationVar(&o.retention, "retention", 0, "make the box suspendable: --lifetime is then its running time, and a suspended box is kept this long")
	f.DurationVar(&o.idle, "idle-suspend", 0, "have boxctl gc suspend the box once it had no turn this long (it is suspendable: --retention defaults to 168h)")
	f.StringVar(&o.router, "router", "", `model Router URL (key in $`+routerKeyVar+`), or "local" for a local model endpoint (default: $`+routerURLEnv+`)`)
	f.StringVar(&o.upstream, "upstream", "", "where the broker sends the box's model requests: router, anthropic, openai or gemini (default: see above)")
	f.StringVar(&o.upURL, "upstream-url", "", "the base URL of --upstream anthropic, openai or gemini (default: the provider's public API)")
	f.StringVar(&o.brokerURL, "broker-url", "", "the broker's URL as the box reaches it (boxctl broker --listen behind a tunnel; https unless loopback), for vendors whose boxes do not reach this machine")
	f.BoolVar(&o.showBearer, "show-bearer", false, "also print the bridge's bearer token (a secret)")
	f.BoolVar(&o.timings, "timings", false, "also print how long each phase of the create took")
	f.BoolVar(&o.noPool, "no-pool", false, "create the box even when a pool of the same target, harness and image has one waiting")
	f.StringVar(&o.bridgeOTLP, "bridge-otlp", "", "OTLP/HTTP endpoint the bridge in the box exports its spans to (one the box reaches)")
	_ = cmd.RegisterFlagCompletionFunc("target", cobra.FixedCompletions(boxTargets, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// resolve checks the flags and finds the Router; getenv reads the
// environment.
func (o *upOptions) resolve(getenv func(string) string) error {
	if err := checkBoxTarget(o.target); err != nil {
		return err
	}
	switch {
	case o.lifetime < time.Second:
		return usageErrorf("--lifetime %v: want at least 1s: every box ends", o.lifetime)
	case o.lifetime > vendors.MaxLifetime:
		return usageErrorf("--lifetime %v: the longest is %v", o.lifetime, vendors.MaxLifetime)
	case o.gitRef != "" && o.repo == "":
		return usageErrorf("--git-ref goes with --repo")
	case strings.HasPrefix(o.repo, "-") || strings.HasPrefix(o.gitRef, "-"):
		return usageErrorf("--repo and --git-ref must not start with '-'")
	}
	if o.bridgeOTLP != "" {
		if err := sandbox.CheckRouterURL(o.bridgeOTLP); err != nil {
			return usageErrorf("--bridge-otlp: %v", err)
		}
	}
	p, err := pins.Load()
	if err != nil {
		return err
	}
	if _, ok := p.Harness(o.harness); !ok {
		return usageErrorf("--harness %q: known harnesses are %s", o.harness, strings.Join(p.HarnessNames(), ", "))
	}
	if o.brokerURL != "" {
		if err := checkBrokerURL(o.brokerURL); err != nil {
			return err
		}
	}
	if o.router == routerLocal {
		if o.upstream != "" || o.upURL != "" {
			return usageErrorf("--router local is the upstream: drop --upstream and --upstream-url")
		}
		return nil
	}
	kind, err := pickUpstream(o.upstream, o.router, o.harness, getenv)
	if err != nil {
		return err
	}
	if kind != broker.Router {
		if o.router != "" {
			return usageErrorf("--router goes with --upstream router")
		}
		o.up, err = providerUpstream(kind, o.upURL, getenv)
		return err
	}
	if o.upURL != "" {
		return usageErrorf("--upstream router takes its URL from --router")
	}
	url, key, err := routerFromFlag(o.router, getenv)
	if err != nil {
		return err
	}
	o.up = broker.Upstream{Name: upstreamName(broker.Router, url, false), URL: url, Key: key, Auth: broker.AuthAsPresented}
	return nil
}

// lastImage defaults --image to the last build for --target.
func (o *upOptions) lastImage(a *app) (err error) {
	if o.image != "" {
		return nil
	}
	_, st, err := a.readState()
	if err == nil {
		o.image, err = st.LastImage(boximage.TargetFor(o.target))
	}
	return err
}

func runUp(ctx context.Context, a *app, o *upOptions) error {
	s, err := a.openState()
	if err != nil {
		return err
	}
	if err := o.lastImage(a); err != nil {
		return err
	}
	v, closeVendor, err := a.openVendor(o.target)
	if err != nil {
		return err
	}
	defer closeVendor()

	now := time.Now()
	rec := boxstate.Record{Target: o.target, Image: o.image, RunTag: sandbox.NewRunTag(), Created: now.UTC(), Deadline: now.Add(o.lifetime).UTC()}
	up := o.up
	if o.router == routerLocal {
		lr, key, err := startRouterFor(ctx, s, rec.RunTag, now.Add(o.lifetime+o.retention+routerMargin))
		if err != nil {
			return err
		}
		rec.Router = lr
		up = broker.Upstream{Name: "local-" + strings.ToLower(rec.RunTag), URL: lr.URL, Key: key, Auth: broker.AuthAsPresented}
		a.log.Info("local model endpoint started", "url", lr.URL, "pid", lr.PID)
	}
	access, err := a.upstreamAccess(ctx, s, v, up, o.brokerURL)
	if err != nil {
		return err
	}
	rec.Upstream, rec.BrokerURL = up.Name, o.brokerURL
	var (
		phases  []sandbox.Phase
		outcome pool.Outcome
	)
	rec, err = s.Create(ctx, v, rec, func(ctx context.Context, tag string) (sandbox.Reference, error) {
		env, how, err := createBox(ctx, a, v, o, tag, s.Owner(), access, s.Record)
		if err != nil {
			return sandbox.Reference{}, err
		}
		phases, outcome = env.Timings(), how
		ref := env.Reference()
		_ = env.Close(context.WithoutCancel(ctx))
		return ref, nil
	})
	if err != nil {
		return err
	}
	return printUp(a, o, rec, phases, outcome)
}

// poolable reports whether up's box may come from a pool: a pooled box
// is not suspendable.
func (o *upOptions) poolable() bool { return !o.noPool && o.retention == 0 && o.idle == 0 }

// createBox makes the box through the sandbox provider.
func createBox(ctx context.Context, a *app, v vendors.Vendor, o *upOptions, tag, owner string, access boxstate.ModelAccess, onEvent func(sandbox.Event)) (*sandbox.Environment, pool.Outcome, error) {
	var bridgeEnv map[string]string
	if o.bridgeOTLP != "" {
		bridgeEnv = map[string]string{tracing.EndpointEnv: o.bridgeOTLP}
	}
	p, err := sandbox.New(sandbox.Options{Vendor: v, Image: o.image, Broker: access.Broker, BrokerURL: access.BrokerURL,
		Upstream: access.Upstream, Lifetime: o.lifetime, Retention: o.retention,
		IdleSuspend: o.idle, RunTag: tag, Owner: owner, Logger: a.log, OnEvent: onEvent, BridgeEnv: bridgeEnv})
	if err != nil {
		return nil, "", err
	}
	req := sandbox.CreateRequest{Profile: provider.Profile{Harness: o.harness, Model: provider.ProfileModel{Default: o.model}},
		Lifetime: o.lifetime}
	if o.repo != "" {
		req.Workspace = &sandbox.WorkspaceRepo{RepoURL: o.repo, GitRef: o.gitRef}
	}
	a.log.Info("creating box", "target", o.target, "image", o.image, "harness", o.harness, "lifetime", o.lifetime)
	// A box waiting in the pool of this target, harness and image is
	// claimed (boxctl pool up); else, or with --no-pool, one is created.
	var env *sandbox.Environment
	outcome := pool.Cold
	if !o.poolable() {
		env, err = p.Create(ctx, req)
	} else {
		env, outcome, err = pool.For(v, "").Claim(ctx, p, pool.DefaultName(o.target, o.harness, o.image), req)
	}
	a.log.Debug("box", "pool", outcome)
	if errors.Is(err, pins.ErrUnknownHarness) {
		return nil, "", usageError{err}
	}
	return env, outcome, err
}

// upstreamAccess registers up at the user's broker (starting it) and has
// the broker serve v's boxes: the model access of a new box.
func (a *app) upstreamAccess(ctx context.Context, s *boxstate.Store, v vendors.Vendor, up broker.Upstream, url string) (boxstate.ModelAccess, error) {
	bc, err := a.ensureBroker(ctx, s)
	if err != nil {
		return boxstate.ModelAccess{}, err
	}
	if err := bc.SetUpstream(ctx, up); err != nil {
		return boxstate.ModelAccess{}, err
	}
	if url == "" {
		if url, err = brokerURL(ctx, bc, v); err != nil {
			return boxstate.ModelAccess{}, err
		}
	}
	return boxstate.ModelAccess{Broker: bc, BrokerURL: url, Upstream: up.Name}, nil
}

// checkBrokerURL refuses a --broker-url that is not http(s), carries
// credentials, or is plain http to anything but loopback.
func checkBrokerURL(raw string) error {
	if err := sandbox.CheckRouterURL(raw); err != nil {
		return usageErrorf("--broker-url: %v", err)
	}
	u, _ := url.Parse(raw)
	if ip := net.ParseIP(u.Hostname()); u.Scheme == "http" && (ip == nil || !ip.IsLoopback()) && u.Hostname() != "localhost" {
		return usageErrorf("--broker-url %s: boxes reach a broker off this machine over https only", raw)
	}
	return nil
}
