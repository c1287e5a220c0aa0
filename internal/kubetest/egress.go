package kubetest

import (
	"context"
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
)

// EgressGate starts an egress gate without a bridge (its relay and
// resolver on ports 80, 443 and 53) on the first address of the test
// bed's relay range that no other process holds, and closes it at the end
// of t. o.Gateway is chosen here; pass the gate's Address to
// kubernetes.WithEgressRelay.
func EgressGate(t testing.TB, o gate.Options) *gate.Gate {
	t.Helper()
	env := testbed.Require(t)
	if env.KubeRelayNet == "" {
		t.Fatal("the test bed's state has no BOXCTL_TEST_KUBE_RELAY_NET: run make testbed")
	}
	net, err := netip.ParsePrefix(env.KubeRelayNet)
	if err != nil {
		t.Fatalf("BOXCTL_TEST_KUBE_RELAY_NET: %v", err)
	}
	o.Bridge = ""
	for a := net.Masked().Addr().Next(); net.Contains(a); a = a.Next() {
		o.Gateway = a
		g, err := gate.Start(t.Context(), o)
		if errors.Is(err, syscall.EADDRINUSE) {
			continue // another test process's
		}
		if err != nil {
			t.Fatalf("egress gate on %v: %v", a, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
			defer cancel()
			if err := g.Close(ctx); err != nil {
				t.Errorf("egress gate close: %v", err)
			}
		})
		return g
	}
	t.Fatalf("every address of %s holds an egress gate", net)
	return nil
}
