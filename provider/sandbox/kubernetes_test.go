package sandbox_test

import (
	"testing"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/kubetest"
)

// The sandbox flow runs on Kubernetes too: the Kubernetes vendor on the
// test bed's cluster, the box image pulled from the test bed's registry,
// the bridge reached through a port-forward, and the fixture's model
// endpoint reached from the pods through this machine's address.
func init() { extraTargets = append(extraTargets, kubernetesTarget) }

func kubernetesTarget(t testing.TB, _ *fixture) target {
	v := kubetest.Vendor(t)
	return target{name: "kubernetes", vendor: v, image: kubetest.Image(t, boxtest.Options{}),
		inspect: func(t testing.TB, id string) string {
			out, err := kubetest.DescribeID(t, v, id)
			if err != nil {
				t.Fatal(err)
			}
			return string(out)
		}}
}
