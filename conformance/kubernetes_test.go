package conformance_test

import (
	"context"
	"testing"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/kubetest"
)

// Kubernetes: the vendor on the test bed's cluster, the image pulled from
// the test bed's registry; the pods reach the local endpoint through this
// machine's address on the boxes' Docker network.
func init() { targets = append(targets, target{"kubernetes", kubernetesTarget, liveHarnesses}) }

func kubernetesTarget(t *testing.T, w *world, opts boxtest.Options) conformance.Target {
	image := kubetest.Image(t, opts)
	v := kubetest.Vendor(t)
	inspect := func(ctx context.Context, id string) ([]byte, error) { return kubetest.DescribeID(t, v, id) }
	return conformance.Target{Vendor: inspectedSuspender{inspected{v, inspect}, v}, Broker: w.broker, BrokerURL: w.broker.URL, Image: image, ImageDigest: imageID(t, boxtest.Image(t, opts)), Local: w.local}
}
