package conformance_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/kubetest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

// TestSuite_Security runs the security family (security.*) on every
// vendor that confines a box's egress, each on Docker networks of its
// own (the boxes', and the confined one a gate holds): Docker with a gate
// of this process, the E2B and Daytona emulators enforcing the vendors'
// own network rules with theirs, and the test bed's cluster enforcing a
// NetworkPolicy a box toward a relay of this process. Every case must pass; the notes carry
// the attack table and the live change's figures.
func TestSuite_Security(t *testing.T) {
	t.Parallel()
	w := setup(t)
	env := testbed.Require(t)
	image := boxtest.Image(t, boxtest.Options{})
	for _, name := range []string{"docker", "e2b", "daytona", "kubernetes"} {
		t.Run(name, func(t *testing.T) {
			network := securityNetwork(t)
			sec, err := conformance.StartSecurity(t.Context(), env.DockerHost)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := sec.Close(); err != nil {
					t.Error(err)
				}
			})
			sec.Names = true
			tg := conformance.Target{Image: image, ImageDigest: imageID(t, image), Local: w.local, Broker: w.broker,
				BrokerURL: w.broker.URL, Security: sec}
			switch name {
			case "docker":
				v, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork(network))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = v.Close() })
				g, err := sandbox.StartEgress(t.Context(), v, sandbox.EgressOptions{BrokerURL: w.broker.URL, Resolver: sec.Resolver()})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					_ = g.Close(ctx)
					if err := g.Uninstall(); err != nil {
						t.Error(err)
					}
				})
				tg.Vendor, sec.Gate = v, g
			case "e2b":
				e := e2btest.Start(t, func(o *e2bemu.Options) {
					o.Network, o.EgressResolver, o.Templates = network, sec.Resolver(), map[string]string{"box": image}
				})
				tg.Vendor, tg.Image, tg.Emulated = e.Client(t), e.Template, true
			case "daytona":
				emu, err := daytonaemu.New(daytonaemu.Options{APIKey: daytonaKey, DockerHost: env.DockerHost, Network: network,
					EgressResolver: sec.Resolver(), Snapshots: map[string]string{"box": image}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = emu.Close() })
				v, err := daytona.New(daytonaKey, daytona.WithAPIURL(emu.APIURL()), daytona.WithPollInterval(100*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				tg.Vendor, tg.Image, tg.Emulated = v, "box", true
			case "kubernetes":
				g := kubetest.EgressGate(t, gate.Options{Resolver: sec.Resolver()})
				tg.Vendor, tg.Image = kubetest.Vendor(t, kubernetes.WithEgressRelay(g.Address())), kubetest.Image(t, boxtest.Options{})
				sec.Gate, sec.Relay = g, g.Address()
			}
			rep := run(t, tg, conformance.Options{Cases: []string{"security.*"}, Harnesses: []string{"claude-code"}})
			for _, res := range rep.Results {
				t.Run(res.Case, func(t *testing.T) {
					for _, n := range res.Notes {
						t.Log(n)
					}
					switch {
					case res.Outcome == conformance.Fail:
						t.Errorf("%s failed:\n%s\ncleanup: %v", res.Case, evidence(res), res.Cleanup)
					case res.Outcome == conformance.NotApplicable && !(name == "daytona" && res.Case == "security.egress-change"):
						t.Errorf("%s not applicable (%s: %s), want it run", res.Case, res.Capability, res.Reason)
					case res.Outcome == conformance.Pass && len(res.Boxes) == 0:
						t.Errorf("%s passed without a box", res.Case)
					}
				})
			}
		})
	}
}

// securityNetwork names a Docker network of t's own for the boxes, and
// removes it and its confined twin when t ends (after the boxes and
// the gates, whose cleanups run first).
func securityNetwork(t *testing.T) string {
	t.Helper()
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	name := "bxs-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	t.Cleanup(func() {
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, n := range []string{name + docker.EgressSuffix, name} {
			if err := cli.NetworkRemove(ctx, n); err != nil && !strings.Contains(err.Error(), "not found") {
				t.Errorf("remove network %s: %v", n, err)
			}
		}
	})
	return name
}
