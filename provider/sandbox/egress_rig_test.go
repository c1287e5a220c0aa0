package sandbox_test

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/kubetest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/attack"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

// egressRig is everything an egress test runs against, all on this
// machine: a vendor on networks of the test's own (the boxes' and the
// confined one), the gate that holds the confined network (in this
// process for Docker, in the emulator for E2B and Daytona, each with the
// same mechanism), and two more Docker networks of the test's whose
// gateways (this machine's addresses there) carry the listeners: the
// allowed host on one, the decoys on the other.
type egressRig struct {
	f      *sandboxtest.Fixture
	target string // "docker", "e2b", "daytona" or "kubernetes"
	vendor vendors.Vendor
	image  string
	gate   *gate.Gate // Docker's, or Kubernetes' relay; nil where the vendor enforces policies
	bridge string
	gw     netip.Addr // this machine on the confined network
	// atk is the attack suite's listeners and resolvers.
	atk *attack.Rig
	cli *client.Client
	// containerLabel names a sandbox's container on an emulator.
	containerLabel string
	// network is the boxes' Docker network.
	network string
	// kube: the boxes are pods of the test bed's cluster, confined by
	// NetworkPolicies to the gate's relay (a gate without a bridge).
	kube bool
}

// newEgressRigOn makes the rig of target: "docker" (the Docker vendor and
// a gate of this process's), "kubernetes" (the test bed's cluster, each
// box under a NetworkPolicy toward a relay of this process's), "e2b" or
// "daytona" (the vendor's client on
// an emulator of the test's, which enforces the vendor's network rules).
func newEgressRigOn(t testing.TB, target string) *egressRig {
	t.Helper()
	f := setup(t)
	env := testbed.Require(t)
	cli, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	name := "bxe-" + randText()[:10]
	// Removed last: after the boxes and the emulator (whose cleanups run
	// first).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, n := range []string{name + docker.EgressSuffix, name} {
			if err := cli.NetworkRemove(ctx, n); err != nil && !strings.Contains(err.Error(), "not found") {
				t.Errorf("remove network %s: %v", n, err)
			}
		}
	})
	v, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	r := &egressRig{f: f, target: target, vendor: v, image: f.Image, cli: cli, network: name}
	atk, err := attack.Start(t.Context(), cli)
	if err != nil {
		t.Fatal(err)
	}
	r.atk = atk
	t.Cleanup(func() {
		if err := atk.Close(); err != nil {
			t.Error(err)
		}
	})
	switch target {
	case "docker":
		g, err := sandbox.StartEgress(t.Context(), v, sandbox.EgressOptions{BrokerURL: f.Broker.URL, Resolver: r.atk.Resolver.NetResolver()})
		if err != nil {
			t.Fatalf("StartEgress: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := g.Close(ctx); err != nil {
				t.Errorf("gate close: %v", err)
			}
			if err := g.Uninstall(); err != nil {
				t.Errorf("gate uninstall: %v", err)
			}
		})
		r.gate = g
	case "e2b":
		e := e2btest.Start(t, func(o *e2bemu.Options) {
			o.Network, o.EgressResolver, o.Templates = name, r.atk.Resolver.NetResolver(), map[string]string{"box": f.Image}
		})
		r.vendor, r.image, r.containerLabel = e.Client(t), e.Template, "dev.e2b.emulator.sandbox"
	case "daytona":
		_, dv := sandboxtest.DaytonaEmulator(t, f, daytonaemu.Options{Network: name, EgressResolver: r.atk.Resolver.NetResolver()})
		r.vendor, r.image, r.containerLabel = dv, "box", "io.daytona.emulator.sandbox"
	case "kubernetes":
		g := kubetest.EgressGate(t, gate.Options{Resolver: r.atk.Resolver.NetResolver()})
		r.vendor, r.image, r.gate, r.kube = kubetest.Vendor(t, kubernetes.WithEgressRelay(g.Address())), kubetest.Image(t, boxtest.Options{}), g, true
	default:
		t.Fatalf("no egress rig for %s", target)
	}
	r.bridge, r.gw, err = v.EgressBridge(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// podGateway returns this machine's address on the network of the pod at
// addr (its gateway), and that network's interface.
func podGateway(t testing.TB, addr netip.Addr) (netip.Addr, string) {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifs {
		as, _ := ifc.Addrs()
		for _, a := range as {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && p.Contains(addr) {
				return p.Addr(), ifc.Name
			}
		}
	}
	t.Fatalf("no interface of this machine is on the network of %v", addr)
	return netip.Addr{}, ""
}

// address returns box's address on the confined network.
func (r *egressRig) address(t testing.TB, box vendors.Box) netip.Addr {
	t.Helper()
	if r.kube {
		a, err := box.(vendors.Addressed).Address(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	c, err := r.cli.ContainerInspect(t.Context(), r.container(t, box))
	if err != nil {
		t.Fatal(err)
	}
	n, ok := c.NetworkSettings.Networks[r.network+docker.EgressSuffix]
	a, err := netip.ParseAddr(n.IPAddress)
	if !ok || err != nil {
		t.Fatalf("box %s is not on the confined network: %+v", box.ID(), c.NetworkSettings.Networks)
	}
	return a
}

// container returns the Docker container of box.
func (r *egressRig) container(t testing.TB, box vendors.Box) string {
	t.Helper()
	if r.containerLabel == "" {
		return box.ID()
	}
	cs, err := r.cli.ContainerList(t.Context(), container.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", r.containerLabel+"="+box.ID()))})
	if err != nil || len(cs) != 1 {
		t.Fatalf("the container of sandbox %s: %d found, %v", box.ID(), len(cs), err)
	}
	return cs[0].ID
}

// provider returns a provider of confined boxes with policy, and more
// options from more.
func (r *egressRig) provider(t testing.TB, policy string, more ...func(*sandbox.Options)) *sandbox.Provider {
	t.Helper()
	p, err := egress.Parse(policy)
	if err != nil {
		t.Fatal(err)
	}
	return r.f.On(t, sandboxtest.Target{Name: r.target, Vendor: r.vendor, Image: r.image}, func(o *sandbox.Options) {
		o.Egress = &p
		if r.gate != nil {
			o.EgressGate = r.gate
		}
		for _, f := range more {
			f(o)
		}
	})
}

// execAsRoot runs script in box as uid 0 (root in the box: the Docker
// vendor drops every capability and sets no-new-privileges, so root there
// is an ordinary user without its own uid's files) and returns its
// output, stdout and stderr together.
func (r *egressRig) execAsRoot(ctx context.Context, box string, script string, env map[string]string) (string, error) {
	opts := container.ExecOptions{User: "0", Cmd: []string{"sh", "-c", script}, AttachStdout: true, AttachStderr: true}
	for k, v := range env {
		opts.Env = append(opts.Env, k+"="+v)
	}
	created, err := r.cli.ContainerExecCreate(ctx, box, opts)
	if err != nil {
		return "", err
	}
	att, err := r.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", err
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		return "", err
	}
	return out.String(), nil
}
