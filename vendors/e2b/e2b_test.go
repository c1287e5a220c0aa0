package e2b_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
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

// TestVendor_EmulatorUnderGVisor: the emulator's sandboxes run under the
// runtime it is given, gVisor here: a command in one sees gVisor's kernel.
func TestVendor_EmulatorUnderGVisor(t *testing.T) {
	tb := testbed.RequireGVisor(t)
	img := boxtest.Pushed(t, boxtest.Options{})
	env := e2btest.Start(t, func(o *e2bemu.Options) {
		o.Runtime = tb.GVisorRuntime
		o.Templates = map[string]string{"box": img} // no template build: the image as it is
	})
	c := env.Client(t)
	box, err := c.Create(t.Context(), vendors.CreateSpec{Image: env.Template, RunTag: vendortest.RunTag(t), Lifetime: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Destroy(context.WithoutCancel(t.Context()))
	res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"uname", "-r"}})
	if err != nil || !strings.Contains(string(res.Stdout), "gvisor") {
		t.Fatalf("uname -r in an emulated sandbox = %q, %v; want gVisor's kernel", res.Stdout, err)
	}
}
