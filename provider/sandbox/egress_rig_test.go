package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/egresstest"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
)

// The names the egress tests' resolvers know.
const (
	allowedName = "allowed.test"
	otherName   = "other.test"
	allowedBody = "allowed-host-ok"
)

// egressRig is everything an egress test runs against, all on this
// machine: a Docker vendor on networks of the test's own (the boxes' and
// the confined one), a gate in this process, and two more Docker networks
// of the test's whose gateways (this machine's addresses there) carry the
// listeners: the allowed host on one, the decoys on the other.
type egressRig struct {
	f       *sandboxtest.Fixture
	vendor  *docker.Vendor
	gate    *gate.Gate
	bridge  string
	gw      netip.Addr // this machine on the confined network
	allowed netip.Addr // the allowed host's address
	decoy   netip.Addr // where everything else listens
	// resolver is the gate's (on loopback); direct is a resolver of the
	// test's on the decoy network that a box might query itself.
	resolver, direct *egresstest.Resolver
	// allowedTLS and allowedHTTP count what reaches the allowed host.
	allowedTLS, allowedHTTP *egresstest.Counter
	cli                     *client.Client
}

func newEgressRig(t testing.TB) *egressRig {
	t.Helper()
	f := setup(t)
	env := testbed.Require(t)
	cli, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	name := "bxe-" + randText()[:10]
	// Removed last: after the boxes (whose cleanups run first).
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
	r := &egressRig{f: f, vendor: v, cli: cli}
	r.allowed = egresstest.Network(t, cli, "bxt-allowed-")
	r.decoy = egresstest.Network(t, cli, "bxt-decoy-")
	names := map[string]netip.Addr{allowedName: r.allowed, otherName: r.decoy}
	r.resolver = egresstest.StartResolver(t, "127.0.0.1", 0, names)
	r.direct = egresstest.StartResolver(t, r.decoy.String(), 53, names)
	g, err := sandbox.StartEgress(t.Context(), v, sandbox.EgressOptions{BrokerURL: f.Broker.URL, Resolver: r.resolver.NetResolver()})
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
	r.bridge, r.gw, err = v.EgressBridge(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r.allowedTLS = serveAllowed(t, r.allowed, 443, true)
	r.allowedHTTP = serveAllowed(t, r.allowed, 80, false)
	return r
}

// serveAllowed serves the allowed host on addr:port (TLS with a test
// certificate, or plain HTTP), counting what reaches it.
func serveAllowed(t testing.TB, addr netip.Addr, port int, tls bool) *egresstest.Counter {
	t.Helper()
	l, err := net.Listen("tcp4", netip.AddrPortFrom(addr, uint16(port)).String())
	if err != nil {
		t.Fatal(err)
	}
	cl, c := egresstest.Counting(l)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, allowedBody)
	}))
	s.Listener = cl
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return c
}

// provider returns a provider of confined boxes with policy.
func (r *egressRig) provider(t testing.TB, policy string) *sandbox.Provider {
	t.Helper()
	p, err := egress.Parse(policy)
	if err != nil {
		t.Fatal(err)
	}
	return r.f.On(t, sandboxtest.Target{Name: "docker", Vendor: r.vendor, Image: r.f.Image}, func(o *sandbox.Options) {
		o.Egress, o.EgressGate = &p, r.gate
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
