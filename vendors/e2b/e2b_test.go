package e2b_test

import (
	"testing"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

func TestMain(m *testing.M) { boxbridgetest.Main(m) }

// TestVendor_Suite runs the behavioural suite every vendor passes against
// the client on the emulator, with the box image published as a template.
func TestVendor_Suite(t *testing.T) {
	env := e2btest.Start(t, nil)
	vendortest.Run(t, vendortest.Config{Vendor: env.Client(t), Image: env.Template,
		Describe: func(t testing.TB, b vendors.Box, _ vendors.Process) []byte { return []byte(env.Inspect(t, b.ID())) }})
}
