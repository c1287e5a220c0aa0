package main

import (
	"context"
	"crypto/x509"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
	"github.com/tangle-network/boxctl/vendors/open"
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
	target       string
	image        string
	harness      string
	model        string
	repo         string
	gitRef       string
	lifetime     time.Duration
	retention    time.Duration
	idle         time.Duration
	router       string
	showBearer   bool
	timings      bool
	bridgeOTLP   string
	noPool       bool
	upstream     string
	upURL        string
	brokerURL    string
	brokerCAFile string
	brokerCA     []byte
	allow        []string
	egressMode   string
	runtime      string
	class        string
	webhooks     []string

	// Resolved by resolve: the box's egress policy (nil: none).
	egress *egress.Policy
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
  boxctl up --repo https://github.com/octocat/Hello-World --git-ref master --lifetime 1h -o json
  boxctl up --router local --allow registry.npmjs.org:443 --allow '*.github.com'`,
		Args: boxArgs(cobra.NoArgs),
		RunE: verbRunE(a, o, func([]string) error { return o.resolve(os.Getenv) }, runF, runUp),
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", o.target, "where the box runs: "+strings.Join(boxTargets, ", "))
	f.StringVar(&o.image, "image", "", "box image (default: the last boxctl build for --target; kubernetes takes a registry build)")
	f.StringVar(&o.harness, "harness", o.harness, "the harness the bridge runs")
	f.StringVar(&o.model, "model", "", "the profile's default model (default: the harness's own; Pi and opencode, which need provider/model, get the upstream's: anthropic/claude-sonnet-4-5, or openai/gpt-5.5 on OpenAI)")
	f.StringVar(&o.repo, "repo", "", "git repository to clone into the box's workspace")
	f.StringVar(&o.gitRef, "git-ref", "", "branch, tag or commit of --repo to check out")
	f.DurationVar(&o.lifetime, "lifetime", o.lifetime, "how long the box lives; it ends by itself then")
	f.DurationVar(&o.retention, "retention", 0, "make the box suspendable: --lifetime is then its running time, and a suspended box is kept this long")
	f.DurationVar(&o.idle, "idle-suspend", 0, "have boxctl gc suspend the box once it had no turn this long (it is suspendable: --retention defaults to 168h)")
	f.StringVar(&o.router, "router", "", `model Router URL (key in $`+routerKeyVar+`), or "local" for a local model endpoint (default: $`+routerURLEnv+`)`)
	f.StringVar(&o.upstream, "upstream", "", "where the broker sends the box's model requests: router, anthropic, openai or gemini (default: see above)")
	f.StringVar(&o.upURL, "upstream-url", "", "the base URL of --upstream anthropic, openai or gemini (default: the provider's public API)")
	f.StringVar(&o.brokerURL, "broker-url", "", "the broker's URL as the box reaches it (boxctl broker --listen behind a tunnel; https unless loopback), for vendors whose boxes do not reach this machine")
	f.StringVar(&o.brokerCAFile, "broker-ca", "", "PEM certificates the box trusts for an https --broker-url beside its system's (a private authority)")
	f.StringArrayVar(&o.allow, "allow", nil, "add RULE to the box's egress allow list (repeatable): a domain (example.com, *.example.com) or IPv4 address or CIDR, with an optional port; the broker is always reachable (docker; e2b and daytona within what their rules say)")
	f.StringVar(&o.egressMode, "egress", egressDeny, `"deny": confine the box's egress to the broker and --allow; "open": let it reach anything`)
	f.StringVar(&o.runtime, "runtime", "", `the box's kernel boundary: "gvisor" (a Docker engine's runsc runtime, a Kubernetes RuntimeClass named gvisor) or a runtime of the engine's (default: the vendor's)`)
	f.StringVar(&o.class, "runtime-class", "", "the RuntimeClass of the box's pod (--target kubernetes)")
	f.StringArrayVar(&o.webhooks, "webhook", nil, "POST the box's lifecycle events to this URL, signed with $"+webhookSecretEnv+" (repeatable; see boxctl webhooks)")
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
	if err := o.resolveRuntime(); err != nil {
		return err
	}
	if err := checkWebhooks(o.webhooks, getenv); err != nil {
		return err
	}
	if err := o.resolveEgress(getenv); err != nil {
		return err
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
	if o.brokerCAFile != "" {
		if !strings.HasPrefix(o.brokerURL, "https://") {
			return usageErrorf("--broker-ca goes with an https --broker-url")
		}
		b, err := os.ReadFile(o.brokerCAFile)
		if err != nil {
			return usageErrorf("--broker-ca: %v", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return usageErrorf("--broker-ca %s: no PEM certificate in it", o.brokerCAFile)
		}
		o.brokerCA = b
	}
	if o.router == routerLocal {
		if o.upstream != "" || o.upURL != "" {
			return usageErrorf("--router local is the upstream: drop --upstream and --upstream-url")
		}
		if getenv(brokerAdminEnv) != "" {
			return usageErrorf("--router local serves on this machine's loopback, which the broker at $%s does not reach: pass --router URL or --upstream", brokerAdminEnv)
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

// resolveEgress reads --egress and --allow into the box's policy.
func (o *upOptions) resolveEgress(getenv func(string) string) error {
	p, err := egressFlags(o.egressMode, o.allow, o.target, getenv(open.EnvKubeEgressRelay) != "")
	if err != nil {
		return err
	}
	o.egress = &p
	return nil
}

// egressFlags reads --egress (deny when empty) and --allow of a box on
// target into its policy; relay reports a Kubernetes relay
// ($BOXCTL_KUBE_EGRESS_RELAY).
func egressFlags(mode string, allow []string, target string, relay bool) (egress.Policy, error) {
	switch mode {
	case "", egressDeny, egress.Open:
	default:
		return egress.Policy{}, usageErrorf("--egress %q: want deny or open", mode)
	}
	p, err := egress.FromFlags(mode == egress.Open, allow)
	if err != nil {
		return egress.Policy{}, usageErrorf("--allow: %v", err)
	}
	if !p.Open && target == kubernetes.Name && !relay {
		return egress.Policy{}, usageErrorf("--target %s: the box's egress is denied by default, through a relay the cluster's pods reach: "+
			"set $%s to an address of this machine they reach (the broker serves the relay there), or pass --egress open", target, open.EnvKubeEgressRelay)
	}
	return p, nil
}

// egressDeny is the --egress value of a confined box.
const egressDeny = "deny"

// confined reports whether up's box has a policy enforced outside it.
func (o *upOptions) confined() bool { return o.egress != nil && !o.egress.Open }

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
