package sandboxtest

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/kubetest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// GVisor is the test bed's Docker engine with every box under gVisor, on
// the boxes' network.
func GVisor(t testing.TB) *docker.Vendor {
	t.Helper()
	env := testbed.RequireGVisor(t)
	v, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork(Network),
		docker.WithRuntime(vendors.RuntimeGVisor), docker.WithGVisorRuntime(env.GVisorRuntime))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// DaytonaKey is the API key of the Daytona emulators the tests start.
const DaytonaKey = "dtn_sandbox_test_key"

// E2BTarget is the e2b client on the shared E2B emulator, whose sandboxes
// are containers on the test bed's engine and the boxes' network (so they
// reach the fixture's model endpoint), with the box image published as a
// template through the emulator.
func E2BTarget(t testing.TB, _ *Fixture) Target {
	env := e2btest.Shared(t)
	return Target{Name: "e2b", Vendor: env.Client(t), Image: env.Template, Inspect: env.Inspect}
}

// DaytonaTarget is the daytona client on an emulator of t's own whose
// sandboxes are the box image on the test bed's engine, on the boxes'
// network.
func DaytonaTarget(t testing.TB, f *Fixture) Target {
	emu, v := DaytonaEmulator(t, f, daytonaemu.Options{})
	return Target{Name: "daytona", Vendor: v, Image: "box", Inspect: func(t testing.TB, boxID string) string {
		return DaytonaDescribe(t, emu, boxID)
	}}
}

// DaytonaEmulator starts a Daytona emulator with opts (its key, engine,
// network unless opts names one, and the snapshot "box" of the fixture's
// image set), closed at the end of t, and a client of it.
func DaytonaEmulator(t testing.TB, f *Fixture, opts daytonaemu.Options) (*daytonaemu.Server, *daytona.Vendor) {
	t.Helper()
	env := testbed.Require(t)
	opts.APIKey, opts.DockerHost = DaytonaKey, env.DockerHost
	if opts.Network == "" {
		opts.Network = Network
	}
	opts.Snapshots = map[string]string{"box": f.Image}
	emu, err := daytonaemu.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	v, err := daytona.New(DaytonaKey, daytona.WithAPIURL(emu.APIURL()), daytona.WithPollInterval(100*time.Millisecond),
		daytona.WithRetry(8, 10*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return emu, v
}

// DaytonaDescribe returns what the emulator shows of a box: the control
// plane's sandbox, the toolbox's sessions (their commands' text) and the
// engine's inspect data of the sandbox's container and its execs.
func DaytonaDescribe(t testing.TB, emu *daytonaemu.Server, id string) string {
	t.Helper()
	get := func(url string) string {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+DaytonaKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
		}
		return string(b)
	}
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", "io.daytona.emulator.sandbox="+id))})
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers of sandbox %s: %d, %v", id, len(cs), err)
	}
	return get(emu.APIURL()+"/sandbox/"+id) + get(emu.URL()+"/toolbox/"+id+"/process/session") + boxtest.Inspect(t, cs[0].ID)
}

// KubernetesTarget is the Kubernetes vendor on the test bed's cluster, the
// box image pulled from the test bed's registry, the bridge reached
// through a port-forward, and the fixture's model endpoint reached from
// the pods through this machine's address.
func KubernetesTarget(t testing.TB, _ *Fixture) Target {
	v := kubetest.Vendor(t)
	return Target{Name: "kubernetes", Vendor: v, Image: kubetest.Image(t, boxtest.Options{}),
		Inspect: func(t testing.TB, id string) string {
			out, err := kubetest.DescribeID(t, v, id)
			if err != nil {
				t.Fatal(err)
			}
			return string(out)
		}}
}
