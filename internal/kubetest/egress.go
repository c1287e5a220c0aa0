package kubetest

import (
	"context"
	"errors"
	"net"
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
	pfx, err := netip.ParsePrefix(env.KubeRelayNet)
	if err != nil {
		t.Fatalf("BOXCTL_TEST_KUBE_RELAY_NET: %v", err)
	}
	o.Bridge = ""
	for a := pfx.Masked().Addr().Next(); pfx.Contains(a); a = a.Next() {
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
	t.Fatalf("every address of %s holds an egress gate", pfx)
	return nil
}

// FreeRelay returns an address of the test bed's relay range on which
// nothing listens now, from the top of the range (EgressGate takes them
// from the bottom), for a relay another process of the test starts (a
// boxctl broker).
func FreeRelay(t testing.TB) netip.Addr {
	t.Helper()
	env := testbed.Require(t)
	pfx, err := netip.ParsePrefix(env.KubeRelayNet)
	if err != nil {
		t.Fatalf("BOXCTL_TEST_KUBE_RELAY_NET %q: %v (run make testbed)", env.KubeRelayNet, err)
	}
	last := pfx.Masked().Addr()
	for a := last; pfx.Contains(a); a = a.Next() {
		last = a
	}
	for a := last.Prev(); pfx.Contains(a) && a != pfx.Masked().Addr(); a = a.Prev() {
		l, err := net.Listen("tcp4", netip.AddrPortFrom(a, 443).String())
		if err != nil {
			continue
		}
		_ = l.Close()
		return a
	}
	t.Fatalf("every address of %s holds a relay", pfx)
	return netip.Addr{}
}
