package conformance

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

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
