package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/egress/firewall"
)

// EgressSuffix ends the name of the network of confined boxes: the boxes'
// network's name plus it.
const EgressSuffix = "-egress"

// bridgeNameOption names a bridge network's Linux interface.
const bridgeNameOption = "com.docker.network.bridge.name"

// ErrEgressUnenforced is the error of a create with an egress policy (not
// Open) while nothing enforces policies on the confined network: no gate
// (package vendors/egress/gate, e.g. sandbox.StartEgress or boxctl
// broker) has installed its kernel rules.
var ErrEgressUnenforced = errors.New("no egress gate holds the confined network: start one (sandbox.StartEgress, or boxctl broker) before creating a box with an egress policy")

// EgressNetwork is the Docker network of the boxes whose egress is
// confined, as a gate needs it.
type EgressNetwork struct {
	// Name and ID are the network's.
	Name, ID string
	// Bridge is its Linux bridge interface.
	Bridge string
	// Subnet is its IPv4 subnet.
	Subnet netip.Prefix
	// Gateway is this machine's address on it.
	Gateway netip.Addr
}

// EgressNetwork finds or creates the network of confined boxes (inter-
// container traffic off, as the boxes' network).
func (v *Vendor) EgressNetwork(ctx context.Context) (EgressNetwork, error) {
	name := v.opts.network + EgressSuffix
	n, err := v.findNetwork(ctx, name)
	if cerrdefs.IsNotFound(err) {
		_, err = v.cli.NetworkCreate(ctx, name, network.CreateOptions{
			Driver:  "bridge",
			Labels:  map[string]string{boxmeta.LabelManaged: "true", boxmeta.LabelEgress: "confined"},
			Options: map[string]string{iccOption: "false"},
		})
		if cerrdefs.IsConflict(err) || (err != nil && strings.Contains(err.Error(), "already exists")) {
			err = nil
		}
		if err == nil {
			n, err = v.findNetwork(ctx, name)
		}
	}
	if err != nil {
		return EgressNetwork{}, fmt.Errorf("docker: network %s: %w", name, err)
	}
	if n.Options[iccOption] != "false" {
		return EgressNetwork{}, fmt.Errorf("docker: network %s lets containers reach each other (%s is not false)", name, iccOption)
	}
	out := EgressNetwork{Name: name, ID: n.ID, Bridge: n.Options[bridgeNameOption]}
	if out.Bridge == "" {
		out.Bridge = "br-" + n.ID[:12]
	}
	for _, c := range n.IPAM.Config {
		sub, err := netip.ParsePrefix(c.Subnet)
		gw, gerr := netip.ParseAddr(c.Gateway)
		if err == nil && gerr == nil && sub.Addr().Is4() && gw.Is4() {
			out.Subnet, out.Gateway = sub, gw
			return out, nil
		}
	}
	return EgressNetwork{}, fmt.Errorf("docker: network %s has no IPv4 subnet and gateway", name)
}

// findNetwork returns the oldest network named exactly name, with its
// IPAM configuration.
func (v *Vendor) findNetwork(ctx context.Context, name string) (network.Inspect, error) {
	all, err := v.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return network.Inspect{}, err
	}
	all = slices.DeleteFunc(all, func(n network.Summary) bool { return n.Name != name })
	if len(all) == 0 {
		return network.Inspect{}, cerrdefs.ErrNotFound.WithMessage("network " + name)
	}
	slices.SortFunc(all, func(a, b network.Summary) int { return a.Created.Compare(b.Created) })
	return v.cli.NetworkInspect(ctx, all[0].ID, network.InspectOptions{})
}

// confineEgress puts a box whose spec has a policy (not Open) on the
// confined network, with the gate's resolver as its DNS, once a gate's
// rules hold that network; other boxes stay where they are.
func (v *Vendor) confineEgress(ctx context.Context, spec vendors.CreateSpec, host *container.HostConfig) error {
	if spec.Egress == nil || spec.Egress.Open {
		return nil
	}
	n, err := v.EgressNetwork(ctx)
	if err != nil {
		return err
	}
	ok, err := firewall.Installed(n.Bridge)
	if err != nil {
		return fmt.Errorf("docker: create box: %w", err)
	}
	if !ok {
		return fmt.Errorf("docker: create box: %w", ErrEgressUnenforced)
	}
	host.NetworkMode = container.NetworkMode(n.ID)
	host.DNS = []string{n.Gateway.String()}
	return nil
}

// boxNetworks are the networks a box may be on, in the order Address
// looks.
func (v *Vendor) boxNetworks() []string {
	return []string{v.opts.network, v.opts.network + EgressSuffix}
}

// EgressBridge returns the Linux bridge of the confined network and this
// machine's address on it, creating the network if needed: what a gate
// (package vendors/egress/gate) holds.
func (v *Vendor) EgressBridge(ctx context.Context) (string, netip.Addr, error) {
	n, err := v.EgressNetwork(ctx)
	return n.Bridge, n.Gateway, err
}
