// Package gate enforces egress policies on one Linux bridge of boxes from
// outside them: it installs the bridge's kernel rules (package firewall),
// serves the relay and the resolver (package relay) on the bridge's
// gateway, and keeps the policy of each box by its address. Set changes
// a box's policy at once: new connections and queries see it, relayed
// connections it no longer allows are closed, and its address rules are
// replaced in one kernel transaction, before Set returns.
//
// Without a bridge (Options.Bridge empty) a gate is the relay and the
// resolver alone, on the standard ports (80, 443 and 53) of its address:
// the boxes' own network confines them, a Kubernetes NetworkPolicy that
// lets them reach that address and nothing the policy does not name.
//
// A Gate lives in the process that serves the boxes' broker (in-process
// for Go callers). Close stops the relay and the resolver but leaves the
// bridge's drop rules in the kernel: its boxes then reach the broker and
// nothing else. Uninstall removes them.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/firewall"
	"github.com/tangle-network/boxctl/vendors/egress/relay"
)

// Options configures a Gate. Gateway is required.
type Options struct {
	// Bridge is the boxes' Linux bridge interface. Empty: no kernel
	// rules of the gate's; the relay and the resolver listen on
	// Gateway's ports 80, 443 and 53, and the boxes' network must let
	// them reach those and nothing else (a NetworkPolicy).
	Bridge string
	// Gateway is this machine's IPv4 address on the bridge, or where the
	// boxes reach the relay.
	Gateway netip.Addr
	// Broker is the credential broker's TCP address, always reachable.
	// Zero: none.
	Broker netip.AddrPort
	// Resolver resolves allowed names for the relay. Default: this
	// machine's resolver.
	Resolver *net.Resolver
	// Dialer connects the relay to resolved addresses. Default: a
	// net.Dialer.
	Dialer relay.Dialer
	// Logger receives the relay's refusals. Default: discard.
	Logger *slog.Logger
}

// Gate enforces the egress policies of one bridge. It is safe for
// concurrent use.
type Gate struct {
	o      Options
	fw     *firewall.Firewall
	relay  *relay.Relay
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.RWMutex
	policies map[netip.Addr]egress.Policy
}

// Start installs the bridge's rules and serves the relay and the
// resolver until Close.
func Start(ctx context.Context, o Options) (_ *Gate, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if !o.Gateway.Is4() {
		return nil, errors.New("gate: Gateway: want an IPv4 address")
	}
	g := &Gate{o: o, policies: map[netip.Addr]egress.Policy{}}
	g.relay, err = relay.New(relay.Options{Policy: g.Policy, Resolver: o.Resolver, Dialer: o.Dialer, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	var closers []func() error
	defer func() {
		if err != nil {
			for _, c := range closers {
				_ = c()
			}
		}
	}()
	var lc net.ListenConfig
	// With a bridge, the kernel rules send ports 80, 443 and 53 of the
	// gateway to free ports of the relay's; without, it listens on them.
	ports := map[string]string{"http": "0", "tls": "0", "dns": "0"}
	if o.Bridge == "" {
		ports = map[string]string{"http": "80", "tls": "443", "dns": "53"}
	}
	listen := func(kind string) (net.Listener, error) {
		l, err := lc.Listen(ctx, "tcp4", net.JoinHostPort(o.Gateway.String(), ports[kind]))
		if err == nil {
			closers = append(closers, l.Close)
		}
		return l, err
	}
	httpL, err := listen("http")
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	tlsL, err := listen("tls")
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	var dnsL net.Listener
	var dnsPC net.PacketConn
	if o.Bridge == "" {
		dnsL, err = listen("dns")
		if err == nil {
			dnsPC, err = lc.ListenPacket(ctx, "udp4", net.JoinHostPort(o.Gateway.String(), ports["dns"]))
		}
	} else {
		dnsL, dnsPC, err = relay.ListenDNS(ctx, o.Gateway)
		if err == nil {
			closers = append(closers, dnsL.Close)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	closers = append(closers, dnsPC.Close)
	dns, err := relay.NewDNS(g.Policy, o.Gateway)
	if err != nil {
		return nil, err
	}
	if o.Bridge != "" {
		g.fw, err = firewall.Install(firewall.Config{Bridge: o.Bridge, Gateway: o.Gateway, Broker: o.Broker,
			HTTPPort: port(httpL.Addr()), TLSPort: port(tlsL.Addr()), DNSPort: port(dnsL.Addr())})
		if err != nil {
			return nil, err
		}
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.cancel = cancel
	g.wg.Add(3)
	go func() { defer g.wg.Done(); _ = g.relay.Serve(sctx, httpL, relay.HTTP) }()
	go func() { defer g.wg.Done(); _ = g.relay.Serve(sctx, tlsL, relay.TLS) }()
	go func() { defer g.wg.Done(); _ = dns.Serve(sctx, dnsPC, dnsL) }()
	return g, nil
}

func port(a net.Addr) uint16 { return a.(*net.TCPAddr).AddrPort().Port() }

// Policy returns the policy of the box at addr.
func (g *Gate) Policy(addr netip.Addr) (egress.Policy, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	p, ok := g.policies[addr.Unmap()]
	return p, ok
}

// Set gives the box at addr policy p (not Open), replacing any earlier
// one; it has taken effect when Set returns.
func (g *Gate) Set(_ context.Context, addr netip.Addr, p egress.Policy) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	addr = addr.Unmap()
	g.mu.Lock()
	old, had := g.policies[addr]
	g.policies[addr] = p
	g.mu.Unlock()
	if err := g.setBox(addr, p); err != nil {
		g.mu.Lock()
		if had {
			g.policies[addr] = old
		} else {
			delete(g.policies, addr)
		}
		g.mu.Unlock()
		return fmt.Errorf("gate: %w", err)
	}
	g.relay.Revoke(addr)
	return nil
}

// Remove forgets the box at addr: nothing of it is relayed or answered
// any more, and its address rules are gone.
func (g *Gate) Remove(_ context.Context, addr netip.Addr) error {
	addr = addr.Unmap()
	g.mu.Lock()
	delete(g.policies, addr)
	g.mu.Unlock()
	g.relay.Revoke(addr)
	if g.fw == nil {
		return nil
	}
	if err := g.fw.RemoveBox(addr); err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	return nil
}

// setBox installs the address rules of the box at addr, where the gate
// holds a bridge.
func (g *Gate) setBox(addr netip.Addr, p egress.Policy) error {
	if g.fw == nil {
		return nil
	}
	return g.fw.SetBox(addr, p)
}

// Address returns where the boxes reach the relay and the resolver.
func (g *Gate) Address() netip.Addr { return g.o.Gateway }

// Bridge returns the bridge the gate holds ("" for none).
func (g *Gate) Bridge() string { return g.o.Bridge }

// Close stops the relay and the resolver and waits for them. The
// bridge's drop rules stay (see the package documentation).
func (g *Gate) Close(ctx context.Context) error {
	g.cancel()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Uninstall removes the bridge's rules from the kernel; boxes left on it
// are then confined only by what their network does alone.
func (g *Gate) Uninstall() error {
	if g.fw == nil {
		return nil
	}
	return g.fw.Uninstall()
}
