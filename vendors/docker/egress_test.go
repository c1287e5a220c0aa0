package docker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// TestVendor_Egress: a box with a policy that is not open is refused
// while no gate holds the confined network (so it never runs unconfined),
// and leaves nothing behind; an open one runs on the boxes' network with
// its policy in a label.
func TestVendor_Egress(t *testing.T) {
	env := testbed.Require(t)
	img := boxtest.Image(t, boxtest.Options{})
	name := "bxv-" + vendortest.RunTag(t)[:12]
	v, err := New(WithHost(env.DockerHost), WithNetwork(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range []string{name + EgressSuffix, name} {
			_ = v.cli.NetworkRemove(ctx, n)
		}
		v.Close()
	})
	tag := vendortest.RunTag(t)
	spec := vendors.CreateSpec{Image: img, RunTag: tag, Lifetime: time.Minute, Egress: &egress.Policy{}}
	if _, err := v.Create(t.Context(), spec); !errors.Is(err, ErrEgressUnenforced) {
		t.Fatalf("Create(deny-all, no gate) = %v, want ErrEgressUnenforced", err)
	}
	if list, _ := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag}); len(list) != 0 {
		t.Errorf("a refused create left %d boxes", len(list))
	}
	n, err := v.EgressNetwork(t.Context())
	if err != nil || n.Bridge == "" || !n.Subnet.Contains(n.Gateway) {
		t.Fatalf("EgressNetwork = %+v, %v", n, err)
	}
	spec.Egress = &egress.Policy{Open: true}
	b, err := v.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("Create(open): %v", err)
	}
	t.Cleanup(func() { _ = b.Destroy(context.Background()) })
	info, err := b.Status(t.Context())
	if err != nil || info.Labels[boxmeta.LabelEgress] != "open" {
		t.Errorf("open box labels = %v, %v; want %s=open", info.Labels, err, boxmeta.LabelEgress)
	}
	c, err := v.cli.ContainerInspect(t.Context(), b.ID())
	if err != nil || c.NetworkSettings.Networks[name] == nil {
		t.Errorf("open box is not on the boxes' network %s", name)
	}
}
