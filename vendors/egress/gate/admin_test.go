package gate_test

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/firewall"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
)

func TestGates_API(t *testing.T) {
	// A bridge no interface has, its gateway on loopback: the rules match
	// nothing, the relay and the resolver listen on loopback.
	bridge := "bxg" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	t.Cleanup(func() {
		if err := firewall.Uninstall(bridge); err != nil {
			t.Errorf("Uninstall: %v", err)
		}
	})
	gs := &gate.Gates{}
	t.Cleanup(func() { _ = gs.Close(t.Context()) })
	sock := filepath.Join(t.TempDir(), "gate.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: gs.Handler()}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	c := gate.Dial(sock, bridge)
	box := netip.MustParseAddr("127.0.0.9")
	var apiErr *gate.APIError
	if err := c.Set(t.Context(), box, egress.Policy{}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Fatalf("Set before Start = %v, want a 404", err)
	}
	gw, broker := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddrPort("127.0.0.1:9")
	if err := c.Start(t.Context(), gw, broker); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := c.Start(t.Context(), gw, broker); err != nil {
		t.Fatalf("Start again: %v", err)
	}
	if err := c.Start(t.Context(), gw, netip.MustParseAddrPort("127.0.0.1:10")); err == nil {
		t.Error("Start with another broker = nil, want an error")
	}
	p, _ := egress.Parse("example.com,10.0.0.0/8:22")
	if err := c.Set(t.Context(), box, p); err != nil {
		t.Fatalf("Set: %v", err)
	}
	got, err := c.Policy(t.Context(), box)
	if err != nil || got.String() != p.String() {
		t.Errorf("Policy = %q, %v; want %q", got.String(), err, p.String())
	}
	if err := c.Set(t.Context(), box, egress.Policy{Open: true}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
		t.Errorf("Set(open) = %v, want a 400", err)
	}
	if err := c.Remove(t.Context(), box); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := c.Policy(t.Context(), box); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("Policy after Remove = %v, want a 404", err)
	}
}
