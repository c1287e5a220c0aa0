package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress/attack"
)

// Security is what the security cases (security.*) attack from a box: the
// suite's listeners on Docker networks of its own on this machine (an
// allowed host, and decoys that count every byte that reaches them), a
// DNS resolver of its own that knows their names, and how the target
// confines its boxes. Every target of an attempt is on this machine, so
// the cases apply where the vendor's boxes run here too (Docker, the
// emulators).
type Security struct {
	// Gate confines the boxes where boxctl enforces their policies (the
	// Docker vendor: sandbox.StartEgress, given Resolver); nil where the
	// vendor enforces them itself (vendors.EgressEnforcer).
	Gate sandbox.EgressGate
	// Relay, when valid, is where the boxes' relay and resolver answer
	// if not on their gateway: the address of Gate (a gate without a
	// bridge) of a vendor whose rules lead to it (Kubernetes).
	Relay netip.Addr
	// Names reports that the target's boxes resolve names through
	// Resolver (a gate started with it, or an emulator's EgressResolver):
	// the allowed host is then allowed by name too. Otherwise it is
	// allowed by address only.
	Names bool

	rig *attack.Rig
}

// StartSecurity makes the suite's networks and listeners on the Docker
// engine at dockerHost (empty: DOCKER_HOST, else the local socket). Close
// it after the run.
func StartSecurity(ctx context.Context, dockerHost string) (*Security, error) {
	cli, err := dockerclient.New(dockerHost)
	if err != nil {
		return nil, fmt.Errorf("conformance: security: %w", err)
	}
	defer cli.Close()
	rig, err := attack.Start(ctx, cli)
	if err != nil {
		return nil, fmt.Errorf("conformance: security: %w", err)
	}
	return &Security{rig: rig}, nil
}

// PrepareSecurity sets up t.Security when cases (patterns, as Select takes
// them, of the chaos family or the catalogue) select a security case:
// the suite's listeners on this machine's Docker engine and, for a vendor
// whose boxes boxctl confines itself (Docker), a gate of this process on
// its confined network that resolves the suite's names, in front of a
// broker this process serves (ServeBroker). A vendor that confines its own
// boxes runs them on this machine only when t.Emulated; an emulator
// resolves names its own way, so its boxes are allowed the suite's hosts
// by address. Without a Docker engine the cases do not apply (a warning
// says why). stop ends what it started; the confined network's rules
// stay, so that another box on it stays confined (to the broker) until
// the next gate takes over.
func PrepareSecurity(ctx context.Context, t *Target, cases []string, chaos bool, log *slog.Logger) (stop func(), err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sel, err := SelectFrom(Catalogue(chaos), cases)
	if err != nil || !slices.ContainsFunc(sel, func(c Case) bool { return c.Group() == "security" }) {
		return func() {}, nil // Run reports a bad selection
	}
	v := t.Vendor
	_, own := v.(vendors.EgressEnforcer)
	if own && !t.Emulated {
		return func() {}, nil // its boxes do not reach this machine: the cases say so
	}
	sec, err := StartSecurity(ctx, "")
	if err != nil {
		log.Warn("security cases: no listeners on this machine's Docker engine: they do not apply", "err", err)
		return func() {}, nil
	}
	stops := []func(){func() { _ = sec.Close() }}
	stop = func() {
		for _, s := range slices.Backward(stops) {
			s()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	t.Security = sec
	if own || !v.Supports()[vendors.FieldEgress] {
		return stop, nil
	}
	stopBroker, err := ServeBroker(ctx, t, log)
	if err != nil {
		return nil, fmt.Errorf("security cases: a broker where the boxes reach this machine: %w", err)
	}
	stops = append(stops, stopBroker)
	g, err := sandbox.StartEgress(ctx, v, sandbox.EgressOptions{BrokerURL: t.BrokerURL, Resolver: sec.Resolver(), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("security cases: the egress gate of %s's confined network (stop the process that holds it, or run on another network): %w", v.Name(), err)
	}
	stops = append(stops, func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = g.Close(cctx)
	})
	sec.Gate, sec.Names = g, true
	return stop, nil
}

// Resolver resolves the names of the suite's hosts: what the target's
// gate (or emulator) should resolve the names its boxes may reach with.
func (s *Security) Resolver() *net.Resolver { return s.rig.Resolver.NetResolver() }

// Close stops the listeners and removes the suite's networks.
func (s *Security) Close() error { return s.rig.Close() }

// rules returns what the target vendor's egress rules can say: a
// vendor's own rules (vendors.EgressEnforcer), else boxctl's gate, which
// says everything.
func (s *Security) rules(v vendors.Vendor) vendors.EgressRules {
	r := vendors.EgressRules{Domains: true, Ports: true}
	if e, ok := v.(vendors.EgressEnforcer); ok {
		r = e.EgressRules()
	}
	r.Domains = r.Domains && s.Names
	return r
}

// boxNet is where a box sits, as the box itself sees it.
type boxNet struct {
	// Addr is its IPv4 address; Gateway is its default route's.
	Addr, Gateway netip.Addr
}

// boxNetScript prints the box's first IPv4 address that is not loopback
// and its default gateway (from /proc/net/route, in hex, little-endian).
const boxNetScript = `node -e 'const i=Object.values(require("os").networkInterfaces()).flat().find(x=>x.family==="IPv4"&&!x.internal);
const r=require("fs").readFileSync("/proc/net/route","utf8").split("\n").map(l=>l.trim().split(/\s+/)).find(f=>f[1]==="00000000");
console.log(i?i.address:"", r?r[2]:"")'`

// readBoxNet reads a box's address and gateway from inside it.
func readBoxNet(ctx context.Context, box vendors.Box) (boxNet, error) {
	res, err := box.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", boxNetScript}})
	if err != nil {
		return boxNet{}, err
	}
	f := strings.Fields(string(res.Stdout))
	if len(f) != 2 {
		return boxNet{}, fmt.Errorf("the box printed %q, want its address and its gateway", res.Stdout)
	}
	addr, err := netip.ParseAddr(f[0])
	if err != nil {
		return boxNet{}, err
	}
	hex, err := strconv.ParseUint(f[1], 16, 32)
	if err != nil {
		return boxNet{}, fmt.Errorf("gateway %q: %w", f[1], err)
	}
	gw := netip.AddrFrom4([4]byte{byte(hex), byte(hex >> 8), byte(hex >> 16), byte(hex >> 24)})
	return boxNet{Addr: addr, Gateway: gw}, nil
}

// hostInterface returns this machine's interface that holds addr and its
// IPv6 link-local address, if any; ok is false when no interface of this
// machine holds addr (the box's network is not here).
func hostInterface(addr netip.Addr) (name, linkLocal string, ok bool) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", "", false
	}
	for _, ifc := range ifs {
		as, _ := ifc.Addrs()
		var has bool
		var ll string
		for _, a := range as {
			p, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			if p.Addr() == addr {
				has = true
			}
			if p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() {
				ll = p.Addr().String()
			}
		}
		if has {
			return ifc.Name, ll, true
		}
	}
	return "", "", false
}
