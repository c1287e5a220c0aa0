package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
	"github.com/tangle-network/boxctl/vendors/egress/relay"
)

// EgressGate enforces boxes' egress policies from outside them, by the
// boxes' addresses (a *gate.Gate, from StartEgress).
type EgressGate interface {
	// Set gives the box at addr policy p; it holds when Set returns.
	Set(ctx context.Context, addr netip.Addr, p egress.Policy) error
	// Remove forgets the box at addr.
	Remove(ctx context.Context, addr netip.Addr) error
}

var _ EgressGate = (*gate.Gate)(nil)

// egressBridger is a vendor whose confined boxes share one Linux bridge
// of this machine (Docker).
type egressBridger interface {
	EgressBridge(ctx context.Context) (string, netip.Addr, error)
}

// EgressOptions configures StartEgress.
type EgressOptions struct {
	// BrokerURL is the broker's URL as the boxes reach it (LocalBroker.URL):
	// always reachable. Empty: no broker.
	BrokerURL string
	// Resolver resolves the names boxes may reach. Default: this
	// machine's resolver.
	Resolver *net.Resolver
	// Dialer connects to what Resolver answered. Default: a net.Dialer.
	Dialer relay.Dialer
	// Logger receives the relay's refusals. Default: discard.
	Logger *slog.Logger
}

// ErrNoEgressGate is the error of Create with an egress policy that is
// not Open and no Options.EgressGate.
var ErrNoEgressGate = errors.New("an egress policy needs Options.EgressGate (StartEgress)")

// ErrEgressOpen is the error of Environment.SetEgress with an Open policy:
// a confined box stays confined.
var ErrEgressOpen = errors.New("a confined box cannot be opened: create an open one")

// StartEgress starts the gate of v's confined boxes in this process: the
// kernel rules of their network, the relay and the resolver, until the
// gate's Close (its rules stay, confining the boxes to the broker, until
// Uninstall). Pass it as Options.EgressGate.
func StartEgress(ctx context.Context, v vendors.Vendor, o EgressOptions) (*gate.Gate, error) {
	eb, ok := v.(egressBridger)
	if !ok {
		return nil, fmt.Errorf("egress: vendor %s: %w", v.Name(), &vendors.UnsupportedError{Vendor: v.Name(), Field: vendors.FieldEgress})
	}
	bridge, gw, err := eb.EgressBridge(ctx)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	var brokerAddr netip.AddrPort
	if o.BrokerURL != "" {
		u, err := url.Parse(o.BrokerURL)
		if err == nil {
			brokerAddr, err = netip.ParseAddrPort(u.Host)
		}
		if err != nil {
			return nil, fmt.Errorf("egress: BrokerURL: want http://IPv4:port: %w", err)
		}
	}
	return gate.Start(ctx, gate.Options{Bridge: bridge, Gateway: gw, Broker: brokerAddr, Resolver: o.Resolver, Dialer: o.Dialer, Logger: o.Logger})
}

// confined reports whether spec asks for a policy enforced outside the
// box.
func confined(spec vendors.CreateSpec) bool { return spec.Egress != nil && !spec.Egress.Open }

// nativeEgress reports whether v enforces a box's policy itself (E2B's
// network rules, Daytona's allow list), with no gate of boxctl's.
func nativeEgress(v vendors.Vendor) bool {
	_, ok := v.(vendors.EgressEnforcer)
	return ok && v.Supports()[vendors.FieldEgress]
}

// urlPort is u's port, or its scheme's (80 for http, 443 for https).
func urlPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return map[string]string{"http": "80", "https": "443"}[u.Scheme]
}

// relayedEgress reports whether v's own rules confine a box to a relay
// of the caller's (Options.EgressGate), which must know the box's policy
// (Kubernetes: a NetworkPolicy, and the gate's relay and resolver).
func relayedEgress(v vendors.Vendor) bool { return nativeEgress(v) && egressRules(v).Relay }

// egressRules is what v's own egress rules can say (vendors.EgressEnforcer);
// a vendor boxctl's gate confines says everything.
func egressRules(v vendors.Vendor) vendors.EgressRules {
	if e, ok := v.(vendors.EgressEnforcer); ok {
		return e.EgressRules()
	}
	return vendors.EgressRules{Domains: true, Ports: true}
}

// hostRule is the rule that lets a box reach host on port where the
// vendor's rules say rules: an IPv4 address on that port (on every port
// where they name none), or a name on 80 or 443 (a domain rule's ports)
// where they name domains.
func hostRule(host, port string, rules vendors.EgressRules) (egress.Rule, error) {
	if _, err := netip.ParseAddr(host); err == nil {
		if !rules.Ports {
			return egress.ParseRule(host) // IPv6 refused
		}
		return egress.ParseRule(net.JoinHostPort(host, port))
	}
	switch {
	case !rules.Domains:
		return egress.Rule{}, fmt.Errorf("%s is a name, and the vendor's egress rules name addresses only: give its address", host)
	case port != "80" && port != "443":
		return egress.Rule{}, fmt.Errorf("%s is reached by name, on port %s: a name is allowed on 80 and 443 only", host, port)
	case !rules.Ports:
		return egress.ParseRule(host)
	}
	return egress.ParseRule(net.JoinHostPort(host, port))
}

// brokerRule is the rule that lets a box of a vendor with rules of its
// own reach the broker at brokerURL.
func brokerRule(brokerURL string, rules vendors.EgressRules) (egress.Rule, error) {
	u, err := url.Parse(brokerURL)
	if err != nil {
		return egress.Rule{}, err
	}
	return hostRule(u.Hostname(), urlPort(u), rules)
}

// repoRule is the rule a confined box needs to clone repoURL, over http or
// https.
func repoRule(repoURL string, rules vendors.EgressRules) (egress.Rule, error) {
	u, err := url.Parse(repoURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return egress.Rule{}, fmt.Errorf("egress: workspace %s: a confined box clones over http or https only", redactURL(repoURL))
	}
	r, err := hostRule(u.Hostname(), urlPort(u), rules)
	if err != nil {
		return egress.Rule{}, fmt.Errorf("egress: workspace %s: %w", redactURL(repoURL), err)
	}
	return r, nil
}

// boxPolicy is the egress policy of a box made for req: Options.Egress,
// and what its workspace clone needs (the repository's host) when it is
// confined.
func (p *Provider) boxPolicy(req CreateRequest) (*egress.Policy, error) {
	pol := p.o.Egress
	if pol == nil || pol.Open || req.Workspace == nil || req.Workspace.RepoURL == "" {
		return pol, nil
	}
	r, err := repoRule(req.Workspace.RepoURL, egressRules(p.o.Vendor))
	if err != nil {
		return nil, err
	}
	withRepo := pol.With(r)
	return &withRepo, nil
}

// vendorPolicy is what a vendor that enforces policies itself is given
// for pol: pol, and the broker.
func (p *Provider) vendorPolicy(pol egress.Policy) (egress.Policy, error) {
	return VendorEgress(pol, p.o.BrokerURL, egressRules(p.o.Vendor))
}

// VendorEgress is the policy a vendor that enforces policies itself
// (vendors.EgressEnforcer, whose rules say rules) is given for a box with
// policy pol whose broker is at brokerURL: pol, and the broker. Where the
// vendor's rules name no port, the broker's address is allowed on every
// port: give the broker an address of its own there (or, on E2B, a name
// on 443). An Open policy, or no broker, is pol itself.
func VendorEgress(pol egress.Policy, brokerURL string, rules vendors.EgressRules) (egress.Policy, error) {
	if pol.Open || brokerURL == "" {
		return pol, nil
	}
	r, err := brokerRule(brokerURL, rules)
	if err != nil {
		return egress.Policy{}, fmt.Errorf("egress: BrokerURL: %w", err)
	}
	out := pol.With(r)
	if err := out.Validate(); err != nil {
		return egress.Policy{}, fmt.Errorf("egress: %w", err)
	}
	if rules.MaxRules > 0 && len(out.Allow) > rules.MaxRules {
		return egress.Policy{}, fmt.Errorf("egress: %d rules with the broker's, the vendor's rules hold %d", len(out.Allow), rules.MaxRules)
	}
	return out, nil
}

// confine hands a new box's policy to the gate, by its address; a vendor
// that enforces policies itself was given it at create.
func (p *Provider) confine(ctx context.Context, box vendors.Box, spec vendors.CreateSpec) (netip.Addr, error) {
	if !confined(spec) || (nativeEgress(p.o.Vendor) && !relayedEgress(p.o.Vendor)) {
		return netip.Addr{}, nil
	}
	addr, err := p.boxAddress(ctx, box)
	if err != nil {
		return netip.Addr{}, err
	}
	if err := p.o.EgressGate.Set(ctx, addr, *spec.Egress); err != nil {
		return netip.Addr{}, fmt.Errorf("egress: %w", err)
	}
	return addr, nil
}

// Egress returns the box's egress policy (nil: none asked for).
func (e *Environment) Egress() *egress.Policy {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.egress == nil {
		return nil
	}
	p := *e.egress
	return &p
}

// SetEgress changes the egress policy of a running confined box; it
// holds when SetEgress returns (new connections and queries see it, and
// relayed connections it no longer allows are closed). An Open policy is
// refused (ErrEgressOpen), as is a box created without a policy.
func (e *Environment) SetEgress(ctx context.Context, p egress.Policy) error {
	if p.Open {
		return fmt.Errorf("set egress: %w", ErrEgressOpen)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("set egress: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if setter, ok := e.box.(vendors.EgressSetter); ok && nativeEgress(e.p.o.Vendor) && e.egress != nil && !e.egress.Open {
		vp, err := e.p.vendorPolicy(p)
		if err != nil {
			return fmt.Errorf("set egress: %w", err)
		}
		if !relayedEgress(e.p.o.Vendor) {
			if err := setter.SetEgress(ctx, vp); err != nil {
				return fmt.Errorf("set egress: %w", err)
			}
			e.egress, e.ref.Egress = &p, &p
			return nil
		}
		// A vendor whose rules lead to the caller's relay, which holds
		// the domains: the relay first (a narrowed list holds at once),
		// then the vendor's rules, the relay put back if those fail.
		if !e.egressAddr.IsValid() || e.p.o.EgressGate == nil {
			return errors.New("set egress: the box's relay does not know its address (Options.EgressGate)")
		}
		old, err := e.p.vendorPolicy(*e.egress)
		if err != nil {
			return fmt.Errorf("set egress: %w", err)
		}
		if err := e.p.o.EgressGate.Set(ctx, e.egressAddr, vp); err != nil {
			return fmt.Errorf("set egress: %w", err)
		}
		if err := setter.SetEgress(ctx, vp); err != nil {
			return errors.Join(fmt.Errorf("set egress: %w", err), e.p.o.EgressGate.Set(context.WithoutCancel(ctx), e.egressAddr, old))
		}
		e.egress, e.ref.Egress = &p, &p
		return nil
	}
	if !e.egressAddr.IsValid() || e.p.o.EgressGate == nil {
		if nativeEgress(e.p.o.Vendor) && e.egress != nil && !e.egress.Open {
			return fmt.Errorf("set egress: %w", &vendors.UnsupportedError{Vendor: e.p.o.Vendor.Name(), Field: vendors.FieldEgress})
		}
		return errors.New("set egress: the box was created without an egress policy")
	}
	if err := e.p.o.EgressGate.Set(ctx, e.egressAddr, p); err != nil {
		return fmt.Errorf("set egress: %w", err)
	}
	e.egress, e.ref.Egress = &p, &p
	return nil
}

// reconfine gives a resumed (or forked) box of ref, at its new address,
// the policy ref records, where a gate of the caller's holds it (Docker,
// and a Kubernetes box's relay); a vendor with rules of its own keeps
// them across a suspend. It returns the address at the gate.
func (p *Provider) reconfine(ctx context.Context, box vendors.Box, ref Reference) (netip.Addr, error) {
	if ref.Egress == nil || ref.Egress.Open || (nativeEgress(p.o.Vendor) && !relayedEgress(p.o.Vendor)) {
		return netip.Addr{}, nil
	}
	if p.o.EgressGate == nil {
		return netip.Addr{}, fmt.Errorf("egress: box %s is confined: %w", box.ID(), ErrNoEgressGate)
	}
	pol := *ref.Egress
	if relayedEgress(p.o.Vendor) {
		vp, err := p.vendorPolicy(pol)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("egress: %w", err)
		}
		pol = vp
	}
	addr, err := p.boxAddress(ctx, box)
	if err != nil {
		return netip.Addr{}, err
	}
	if err := p.o.EgressGate.Set(ctx, addr, pol); err != nil {
		return netip.Addr{}, fmt.Errorf("egress: %w", err)
	}
	return addr, nil
}

// releaseEgress forgets a destroyed box at the gate.
func (e *Environment) releaseEgress(ctx context.Context) { e.p.forgetEgress(ctx, e.egressAddr) }

// forgetEgress forgets the box that was at addr (if any) at the gate.
func (p *Provider) forgetEgress(ctx context.Context, addr netip.Addr) {
	if addr.IsValid() && p.o.EgressGate != nil {
		if err := p.o.EgressGate.Remove(context.WithoutCancel(ctx), addr); err != nil {
			p.o.Logger.Warn("egress: forget box", "addr", addr, "err", err)
		}
	}
}

// ErrEgressMismatch is the error of a claim whose request and standby box
// differ in kind: a confined box for an open provider, or an open box for
// a confined one (a pool's boxes are of one kind: boxctl pool up
// --egress).
var ErrEgressMismatch = errors.New("the standby box and the claim differ in egress: one confined, one open")

// claimEgress gives a claimed standby box the claim's policy (req's, with
// its workspace's host) in place of the pool's, before the handover: at
// the gate by addr, or through the vendor's own rules. It returns the
// policy and the box's address at the gate.
func (p *Provider) claimEgress(ctx context.Context, box vendors.Box, addr netip.Addr, rec StandbyRecord, req CreateRequest) (*egress.Policy, netip.Addr, error) {
	want := p.o.Egress != nil && !p.o.Egress.Open
	if waits := rec.Egress != nil && !rec.Egress.Open; waits != want {
		return nil, netip.Addr{}, fmt.Errorf("standby box %s: %w", rec.BoxID, ErrEgressMismatch)
	}
	pol, err := p.boxPolicy(req)
	if err != nil || !want {
		return pol, netip.Addr{}, err
	}
	if !nativeEgress(p.o.Vendor) || relayedEgress(p.o.Vendor) {
		// Asked now, not taken from the record: a standby box that
		// vanished may have left its address to another box.
		if addr, err = p.boxAddress(ctx, box); err != nil {
			return nil, netip.Addr{}, err
		}
	}
	if !nativeEgress(p.o.Vendor) {
		if err := p.o.EgressGate.Set(ctx, addr, *pol); err != nil {
			return nil, netip.Addr{}, fmt.Errorf("egress: %w", err)
		}
		return pol, addr, nil
	}
	setter, ok := box.(vendors.EgressSetter)
	if !ok {
		return nil, netip.Addr{}, fmt.Errorf("egress: %w", &vendors.UnsupportedError{Vendor: p.o.Vendor.Name(), Field: vendors.FieldEgress})
	}
	vp, err := p.vendorPolicy(*pol)
	if err == nil {
		err = setter.SetEgress(ctx, vp)
	}
	if err == nil && relayedEgress(p.o.Vendor) {
		err = p.o.EgressGate.Set(ctx, addr, vp)
	}
	if err != nil {
		return nil, netip.Addr{}, fmt.Errorf("egress: %w", err)
	}
	if !relayedEgress(p.o.Vendor) {
		addr = netip.Addr{}
	}
	return pol, addr, nil
}

// boxAddress asks box's vendor for the box's address, where a gate knows
// it by.
func (p *Provider) boxAddress(ctx context.Context, box vendors.Box) (netip.Addr, error) {
	a, ok := box.(vendors.Addressed)
	if !ok {
		return netip.Addr{}, fmt.Errorf("egress: vendor %s does not tell a box's address", p.o.Vendor.Name())
	}
	addr, err := a.Address(ctx)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("egress: %w", err)
	}
	return addr, nil
}
