package localrouter_test

import (
	"errors"
	"testing"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/e2b"
)

// TestHostFor: a cloud vendor's client given this machine's address (an
// emulator's, as boxctl emulate prints it) answers it; one given none is
// unreachable.
func TestHostFor(t *testing.T) {
	mk := func(host string) []vendors.Vendor {
		e, err := e2b.New("k", e2b.WithAPIURL("http://127.0.0.1:1"), e2b.WithHostAddress(host))
		if err != nil {
			t.Fatal(err)
		}
		d, err := daytona.New("k", daytona.WithAPIURL("http://127.0.0.1:1/api"), daytona.WithHostAddress(host))
		if err != nil {
			t.Fatal(err)
		}
		return []vendors.Vendor{e, d}
	}
	for _, v := range mk("172.18.0.1") {
		if h, err := localrouter.HostFor(t.Context(), v); err != nil || h != "172.18.0.1" {
			t.Errorf("HostFor(%s with a host address) = %q, %v", v.Name(), h, err)
		}
	}
	for _, v := range mk("") {
		h, err := localrouter.HostFor(t.Context(), v)
		if !errors.Is(err, localrouter.ErrUnreachable) || !errors.Is(err, vendors.ErrNoHostAddress) {
			t.Errorf("HostFor(%s without one) = %q, %v; want ErrUnreachable", v.Name(), h, err)
		}
	}
}
