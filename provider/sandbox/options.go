package sandbox

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/webhook"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// Defaults.
const (
	// DefaultLifetime is a box's lifetime when neither Options nor the
	// request sets one.
	DefaultLifetime = 30 * time.Minute
	// DefaultReadyTimeout bounds the wait for the bridge's backend.
	DefaultReadyTimeout = 2 * time.Minute
	// DefaultCloneTimeout bounds the workspace clone.
	DefaultCloneTimeout = 5 * time.Minute
	// DefaultDestroyTimeout bounds the destroy after a failed create.
	DefaultDestroyTimeout = time.Minute
	// BridgePort is the port the bridge listens on in the box.
	BridgePort = 3344
	// Workspace is the directory the harness works in, in the box.
	Workspace = "/workspace"
	// BridgeProcess is the name of the bridge's process in the box.
	BridgeProcess = "bridge"
)

// Router is where the harnesses' model traffic goes.
type Router struct {
	// URL is the Router's base URL, as the box reaches it.
	URL string
	// Key is the per-run router key. Secret: it is passed to the bridge
	// process only.
	Key string
}

// ErrRouterURLCredentials is the error of CheckRouterURL for a URL with
// user information: the router key travels apart from the URL.
var ErrRouterURLCredentials = errors.New("must not carry credentials")

// CheckRouterURL is the one check of a model Router's base URL: an
// absolute http or https URL with a host and no credentials
// (ErrRouterURLCredentials). Its errors never quote the URL, which may
// hold a secret.
func CheckRouterURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err == nil && u.User != nil:
		return ErrRouterURLCredentials
	case raw == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("want an absolute http or https URL")
	}
	return nil
}

// check validates a router; Create requires one, Connect does not.
func (r Router) check() error {
	if err := CheckRouterURL(r.URL); errors.Is(err, ErrRouterURLCredentials) {
		return fmt.Errorf("Router.URL %w: pass the key as Router.Key", err)
	} else if err != nil {
		return fmt.Errorf("Router.URL: %w", err)
	}
	if r.Key == "" {
		return errors.New("Router.Key is required")
	}
	return nil
}

// String hides the key.
func (r Router) String() string { return "router(" + r.URL + ")" }

// LogValue hides the key.
func (r Router) LogValue() slog.Value { return slog.StringValue(r.String()) }

// GoString keeps %#v from printing the key.
func (r Router) GoString() string { return r.String() }

// Format keeps every fmt verb from printing the key.
func (r Router) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(r.String())) }

// MarshalJSON leaves the key out.
func (r Router) MarshalJSON() ([]byte, error) { return json.Marshal(map[string]string{"url": r.URL}) }

// Options configures a Provider. Vendor and Image are required, and
// Router for Create;
// every other zero value means the documented default.
type Options struct {
	// Vendor makes the boxes.
	Vendor vendors.Vendor
	// Image is the box image (a reference the vendor can create from).
	Image string
	// Router is the model Router the box's harnesses use; required by
	// Create without a Broker (a provider that only reconnects with
	// Connect needs none). Without a Broker, its key enters every box.
	Router Router
	// Broker keeps the model credential out of the boxes: each box gets a
	// token of its own from it (broker.Granter: a broker in this process,
	// or a client of one in another), valid while the box lives, rotated
	// at each claim and resume, and reaches it at BrokerURL. Router is
	// then not used.
	Broker broker.Granter
	// BrokerURL is the broker's base URL as the boxes reach it. Required
	// with Broker.
	BrokerURL string
	// BrokerCA are PEM certificates the boxes trust for an https
	// BrokerURL beside their system's (a broker whose certificate a
	// private authority signed). Not a secret: it goes to each box's
	// bridge, whose model relay is the one client of the broker there.
	BrokerCA []byte
	// Upstream names the broker's upstream of this provider's boxes ("" for
	// the broker's default).
	Upstream string
	// Budget bounds what each box spends through the broker (zero: no
	// bound).
	Budget broker.Budget
	// Egress is every box's egress policy. Nil: none, the box's network
	// is open as the vendor makes it. A policy that is not Open (the zero
	// Policy denies all but the broker) needs a vendor that enforces it
	// and EgressGate.
	Egress *egress.Policy
	// EgressGate enforces Egress outside the boxes (StartEgress).
	EgressGate EgressGate
	// Pins are the versions to check the box's harnesses against.
	// Default: the embedded pins.
	Pins *pins.Pins
	// Lifetime is each box's lifetime. Default: DefaultLifetime.
	Lifetime time.Duration
	// RunTag labels every box this provider makes. Default: a random tag
	// per Provider.
	RunTag string
	// Owner is the owner label of every box. Default: reaper.ProcessOwner().
	Owner string
	// Resources are each box's limits. Default: the vendor's.
	Resources vendors.Resources
	// Runtime is the runtime of every box (vendors.CreateSpec.Runtime):
	// vendors.RuntimeGVisor puts each box under gVisor's kernel (a Docker
	// engine's runsc, a Kubernetes RuntimeClass named gvisor), or a
	// vendor's own runtime name. Default: the vendor's.
	Runtime string
	// Labels are added to every box.
	Labels map[string]string
	// ReadyTimeout bounds the wait for the bridge. Default:
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// CloneTimeout bounds the workspace clone. Default:
	// DefaultCloneTimeout.
	CloneTimeout time.Duration
	// BridgeEnv is extra bridge configuration (bridge-protocol.md), such
	// as BRIDGE_LOG_LEVEL; it may not set the bearer, the router or the
	// listen address.
	BridgeEnv map[string]string
	// Logger receives progress records (never a secret). Default: discard.
	Logger *slog.Logger
	// Interactive, when true, has Create and Connect discover the bridge's
	// capabilities for the box's model route, so that its turns run in the
	// bridge's retained native sessions where the bridge proves them: a
	// permission the harness asks for then reaches the caller as an
	// interaction event to answer (provider.NewInteractionCommand) instead
	// of the turn running unattended. Default: one-shot turns.
	Interactive bool
	// Retention makes every box suspendable (Environment.Suspend): its
	// Lifetime becomes an active budget that suspended time does not use,
	// and a suspended box is kept this long after each suspend (then gc
	// and, where it can, the vendor remove it). Zero: boxes are not
	// suspendable, unless IdleSuspend is set (then
	// vendors.DefaultRetention).
	Retention time.Duration
	// IdleSuspend, when set, suspends a box whose bridge has had no turn
	// (no live run, no attached stream) for this long; health polls and
	// other reads do not count. The environment's Suspended reports it.
	IdleSuspend time.Duration
	// AutoReplace, when true, asks the vendor before each turn whether the
	// box is still there; a box it no longer has (or one found lost
	// before) has its sessions continued on a new box
	// (Environment.Replace), and the turn runs there; the environment then
	// drives the new box (Environment.Successor). A box lost once a turn
	// was sent ends that turn as interrupted: it is never sent again by
	// itself. Default: off, a turn on a lost box is a *LostError.
	AutoReplace bool
	// OnEvent, when set, receives each lifecycle event of this provider's
	// boxes (created, ready, turn started and ended, destroyed with its
	// reason), synchronously on the goroutine that caused it (a
	// dispatched turn's end: on the goroutine that watched for it, after
	// Dispatch returned): it must not block for long.
	OnEvent func(Event)
	// Webhooks, when set, delivers each lifecycle event OnEvent receives
	// to its endpoints (WebhookEvent), from its outbox: the event is
	// recorded there before the call that caused it goes on. The caller
	// opens it and closes it after the provider's last use.
	Webhooks *webhook.Sender
}

func (o Options) normalized() (Options, error) {
	var errs []error
	if o.Vendor == nil {
		errs = append(errs, errors.New("Vendor is required"))
	}
	if o.Image == "" {
		errs = append(errs, errors.New("Image is required"))
	}
	if o.Router != (Router{}) {
		if err := o.Router.check(); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Broker != nil {
		if err := CheckRouterURL(o.BrokerURL); err != nil {
			errs = append(errs, fmt.Errorf("BrokerURL: %w", err))
		}
		if len(o.BrokerCA) > 0 && !x509.NewCertPool().AppendCertsFromPEM(o.BrokerCA) {
			errs = append(errs, errors.New("BrokerCA holds no PEM certificate"))
		}
	} else if o.BrokerURL != "" || o.Upstream != "" || o.Budget != (broker.Budget{}) || len(o.BrokerCA) > 0 {
		errs = append(errs, errors.New("BrokerURL, BrokerCA, Upstream and Budget need a Broker"))
	}
	if o.Egress != nil {
		if err := o.Egress.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("Egress: %w", err))
		} else if !o.Egress.Open && o.EgressGate == nil && (o.Vendor == nil || !nativeEgress(o.Vendor) || relayedEgress(o.Vendor)) {
			errs = append(errs, ErrNoEgressGate)
		} else if !o.Egress.Open && o.Vendor != nil && nativeEgress(o.Vendor) && o.BrokerURL != "" {
			if _, err := VendorEgress(*o.Egress, o.BrokerURL, egressRules(o.Vendor)); err != nil {
				errs = append(errs, fmt.Errorf("BrokerURL: %w", err))
			}
		}
	}
	for k := range o.BridgeEnv {
		if reservedBridgeEnv[k] {
			errs = append(errs, fmt.Errorf("BridgeEnv may not set %s", k))
		}
	}
	if o.Lifetime < 0 || o.ReadyTimeout < 0 || o.CloneTimeout < 0 || o.Retention < 0 || o.IdleSuspend < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("sandbox options: %w", err)
	}
	if o.Pins == nil {
		p, err := pins.Load()
		if err != nil {
			return o, fmt.Errorf("sandbox options: %w", err)
		}
		o.Pins = p
	}
	if o.Lifetime == 0 {
		o.Lifetime = DefaultLifetime
	}
	if o.IdleSuspend > 0 && o.Retention == 0 {
		o.Retention = vendors.DefaultRetention
	}
	if o.RunTag == "" {
		o.RunTag = NewRunTag()
	}
	if o.Owner == "" {
		o.Owner = reaper.ProcessOwner()
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.CloneTimeout == 0 {
		o.CloneTimeout = DefaultCloneTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// NewRunTag returns a fresh random run tag.
func NewRunTag() string {
	return "run-" + strings.ToLower(rand.Text()[:16])
}

// newSecret returns 256 random bits, hex encoded.
func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	const hexdigits = "0123456789abcdef"
	out := make([]byte, 64)
	for i, c := range b {
		out[2*i], out[2*i+1] = hexdigits[c>>4], hexdigits[c&15]
	}
	return string(out)
}

// envMaxRuns bounds the bridge's live runs: one box runs one turn at a
// time, whichever process asks.
const envMaxRuns = "BRIDGE_MAX_RUNS"

// reservedBridgeEnv are the bridge variables the provider sets itself.
var reservedBridgeEnv = map[string]bool{
	wire.EnvBearer: true, wire.EnvRouterKey: true, wire.EnvRouterURL: true, wire.EnvHost: true,
	wire.EnvPort: true, wire.EnvBackends: true, wire.EnvDataDir: true, envMaxRuns: true, wire.EnvPrestartCwd: true, wire.EnvPrestartModel: true, wire.EnvModelRelay: true, wire.EnvRouterCA: true,
}
