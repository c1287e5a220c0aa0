package sandbox_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// BenchmarkColdStart measures the time from nothing to a ready bridge in a
// fresh box of the Claude Code image: through the sandbox provider
// (impl=boxctl: Create makes the hardened box, spawns the bridge with its
// secrets, waits for /health ready, checks the pin and makes the provider
// environment) against a bare container of the same image with the bridge
// on its command line, polled until /health answers 200 (impl=baseline).
// Both poll every 50 ms. Destroying the box is not timed.
func BenchmarkColdStart(b *testing.B) {
	f := setup(b)
	env := testbed.Require(b)
	b.Run("impl=baseline", func(b *testing.B) {
		cli, err := dockerclient.New(env.DockerHost)
		if err != nil {
			b.Fatal(err)
		}
		defer cli.Close()
		for b.Loop() {
			id, url := bareRun(b, cli, f)
			waitHealthy(b, url)
			b.StopTimer()
			if err := cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("impl=boxctl", func(b *testing.B) {
		p := f.Provider(b, nil)
		for b.Loop() {
			e, err := p.Create(b.Context(), sandbox.CreateRequest{Profile: claude})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := e.Destroy(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

// bareRun starts the image with the bridge as its command, as a
// hand-written `docker run -p 127.0.0.1::3344 IMAGE box-bridge` would, and
// returns the container id and the bridge URL.
func bareRun(b *testing.B, cli *client.Client, f *fixture) (string, string) {
	b.Helper()
	ctx := context.Background()
	port := nat.Port(strconv.Itoa(sandbox.BridgePort) + "/tcp")
	cfg := &container.Config{Image: f.Image, Cmd: []string{"box-bridge"}, ExposedPorts: nat.PortSet{port: {}},
		Env: []string{"BRIDGE_HOST=0.0.0.0", "BRIDGE_PORT=" + strconv.Itoa(sandbox.BridgePort), "BRIDGE_BEARER=bench",
			"BRIDGE_BACKENDS=claude", "BRIDGE_DATA_DIR=/tmp/bridge", "TANGLE_API_KEY=" + f.Router.Key, "TANGLE_ROUTER_URL=" + f.Router.URL,
			boxmeta.EnvLifetime + "=600"}}
	hc := &container.HostConfig{NetworkMode: testNetwork, PortBindings: nat.PortMap{port: {{HostIP: "127.0.0.1"}}}}
	created, err := cli.ContainerCreate(ctx, cfg, hc, nil, nil, "")
	if err != nil {
		b.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		b.Fatal(err)
	}
	c, err := cli.ContainerInspect(ctx, created.ID)
	if err != nil {
		b.Fatal(err)
	}
	return created.ID, "http://127.0.0.1:" + c.NetworkSettings.Ports[port][0].HostPort
}

func waitHealthy(b *testing.B, url string) {
	b.Helper()
	polltest.UntilNil(b, time.Minute, "the bare bridge at "+url+" to answer /health 200", func() error {
		resp, err := http.Get(url + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
}
