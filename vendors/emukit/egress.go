package emukit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
)

// ErrNotConfined is the error of SetEgress on a sandbox created with open
// egress: the emulators confine a sandbox's network from its create on
// (its container is then on the confined network), never later.
var ErrNotConfined = errors.New("the sandbox was created with open egress: create it with network rules to change them later")

// gates are the egress gates of this process, one a confined network's
// bridge, shared by every registry on it (the kernel holds one table a
// bridge, and one process serves it).
var gates = struct {
	sync.Mutex
	m map[string]*sharedGate
}{m: map[string]*sharedGate{}}

type sharedGate struct {
	g        *gate.Gate
	resolver *net.Resolver
	refs     int
}

// egressGate returns the gate of the registry's confined network,
// starting it (or taking a reference to this process's) on first use.
func (g *Registry) egressGate(ctx context.Context) (*gate.Gate, error) {
	g.gateMu.Lock()
	defer g.gateMu.Unlock()
	if g.gate != nil {
		return g.gate, nil
	}
	bridge, gw, err := g.docker.EgressBridge(ctx)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	gates.Lock()
	defer gates.Unlock()
	sg, ok := gates.m[bridge]
	switch {
	case !ok:
		gt, err := gate.Start(ctx, gate.Options{Bridge: bridge, Gateway: gw, Resolver: g.opts.EgressResolver, Logger: g.log})
		if err != nil {
			return nil, fmt.Errorf("egress: %w", err)
		}
		sg = &sharedGate{g: gt, resolver: g.opts.EgressResolver}
		gates.m[bridge] = sg
	case sg.resolver != g.opts.EgressResolver:
		return nil, fmt.Errorf("egress: the confined network %s is held by another emulator of this process with another resolver: give each its own network", bridge)
	}
	sg.refs++
	g.gate = sg.g
	return g.gate, nil
}

// releaseGate drops the registry's reference to its gate; the last one
// stops it and removes its rules (no confined box of this process is
// left on the bridge).
func (g *Registry) releaseGate() error {
	g.gateMu.Lock()
	defer g.gateMu.Unlock()
	if g.gate == nil {
		return nil
	}
	gt := g.gate
	g.gate = nil
	gates.Lock()
	defer gates.Unlock()
	sg := gates.m[gt.Bridge()]
	if sg == nil || sg.g != gt {
		return nil
	}
	if sg.refs--; sg.refs > 0 {
		return nil
	}
	delete(gates.m, gt.Bridge())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(gt.Close(ctx), gt.Uninstall())
}

// confine gives the confined box of a sandbox, at addr, its policy.
func (g *Registry) confine(ctx context.Context, sandboxID string, addr netip.Addr, p egress.Policy) error {
	g.egressMu.Lock()
	defer g.egressMu.Unlock()
	return g.confineLocked(ctx, sandboxID, addr, p)
}

// confineLocked is confine with g.egressMu held.
func (g *Registry) confineLocked(ctx context.Context, sandboxID string, addr netip.Addr, p egress.Policy) error {
	gt, err := g.egressGate(ctx)
	if err != nil {
		return err
	}
	if err := gt.Set(ctx, addr, p); err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	g.mu.Lock()
	g.confined[sandboxID] = addr
	g.mu.Unlock()
	return nil
}

// SetEgress replaces the egress policy of a confined sandbox (one created
// with a policy that is not Open); it holds when SetEgress returns. An
// Open policy, or a sandbox created open, is refused (ErrNotConfined).
func (g *Registry) SetEgress(ctx context.Context, sandboxID string, p egress.Policy) error {
	// Held across the read and the change: a sandbox removed meanwhile
	// (forget) never gets its rules back on an address freed for another.
	g.egressMu.Lock()
	defer g.egressMu.Unlock()
	g.mu.Lock()
	addr, ok := g.confined[sandboxID]
	g.mu.Unlock()
	if !ok || p.Open {
		return ErrNotConfined
	}
	return g.confineLocked(ctx, sandboxID, addr, p)
}

// Confined reports whether a sandbox's egress is confined.
func (g *Registry) Confined(sandboxID string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.confined[sandboxID]
	return ok
}

// forget removes a removed sandbox's box from its gate.
func (g *Registry) forget(ctx context.Context, sandboxID string) {
	g.egressMu.Lock()
	defer g.egressMu.Unlock()
	g.mu.Lock()
	addr, ok := g.confined[sandboxID]
	delete(g.confined, sandboxID)
	g.mu.Unlock()
	g.gateMu.Lock()
	gt := g.gate
	g.gateMu.Unlock()
	if ok && gt != nil {
		if err := gt.Remove(ctx, addr); err != nil {
			g.log.Warn("emulator: forget a confined box", "sandbox", sandboxID, "err", err)
		}
	}
}
