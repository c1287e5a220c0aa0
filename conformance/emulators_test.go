package conformance_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
	"github.com/tangle-network/boxctl/vendors/emukit"
)

// The emulators of the cloud vendors: the vendor's own client against a
// local emulator of its control plane, whose boxes are the image on the
// test bed's engine and network (where the local endpoint listens).
func init() {
	targets = append(targets, target{"e2b-emulator", e2bTarget, liveHarnesses}, target{"daytona-emulator", daytonaTarget, liveHarnesses})
}

// inspected adds the Inspector of a test to a vendor.
type inspected struct {
	vendors.Vendor
	inspect func(ctx context.Context, id string) ([]byte, error)
}

func (v inspected) Inspect(ctx context.Context, id string) ([]byte, error) { return v.inspect(ctx, id) }

// inspectedSuspender is inspected of a vendor that suspends boxes (both
// emulators' clients, Kubernetes): the chaos.suspend case runs on it.
type inspectedSuspender struct {
	inspected
	vendors.Suspender
}

func e2bTarget(t *testing.T, w *world, opts boxtest.Options) conformance.Target {
	image := boxtest.Image(t, opts)
	env := e2btest.Start(t, func(o *e2bemu.Options) { o.Templates = map[string]string{"box": image} })
	v := env.Client(t)
	inspect := func(ctx context.Context, id string) ([]byte, error) {
		out := controlPlane(env.Server, "http://api."+env.Server.Domain(), "X-API-Key", e2btest.APIKey, "/sandboxes/"+id, "/v2/sandboxes")
		box, ok := env.Server.Backend(id)
		if !ok {
			return nil, fmt.Errorf("the emulator has no box behind sandbox %s", id)
		}
		raw, err := w.docker.Inspect(ctx, box.ID())
		return append(out, raw...), err
	}
	return conformance.Target{Vendor: inspectedSuspender{inspected{v, inspect}, v}, Broker: w.broker, BrokerURL: w.broker.URL, Image: env.Template, ImageDigest: imageID(t, image),
		Emulated: true, Local: w.local, Faults: faultSwitch(t, "http://"+env.Addr, "X-API-Key", e2btest.APIKey)}
}

const daytonaKey = "dtn_conformance_test_key"

func daytonaTarget(t *testing.T, w *world, opts boxtest.Options) conformance.Target {
	image := boxtest.Image(t, opts)
	env := testbed.Require(t)
	emu, err := daytonaemu.New(daytonaemu.Options{APIKey: daytonaKey, DockerHost: env.DockerHost, Network: testNetwork,
		Snapshots: map[string]string{"box": image}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	v, err := daytona.New(daytonaKey, daytona.WithAPIURL(emu.APIURL()), daytona.WithPollInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	inspect := func(ctx context.Context, id string) ([]byte, error) {
		out := controlPlane(emu, emu.APIURL(), "Authorization", "Bearer "+daytonaKey, "/sandbox/"+id)
		cs, err := cli.ContainerList(ctx, container.ListOptions{
			Filters: filters.NewArgs(filters.Arg("label", "io.daytona.emulator.sandbox="+id))})
		if err != nil || len(cs) != 1 {
			return nil, fmt.Errorf("containers of sandbox %s: %d, %v", id, len(cs), err)
		}
		raw, err := w.docker.Inspect(ctx, cs[0].ID)
		return append(out, raw...), err
	}
	return conformance.Target{Vendor: inspectedSuspender{inspected{v, inspect}, v}, Broker: w.broker, BrokerURL: w.broker.URL, Image: "box", ImageDigest: imageID(t, image), Emulated: true,
		Faults: faultSwitch(t, emu.APIURL(), "Authorization", "Bearer "+daytonaKey), Local: w.local}
}

// faultSwitch is the fault switch of the emulator whose control plane is
// at apiURL, asked over HTTP as boxctl conformance asks one boxctl
// emulate serves.
func faultSwitch(t *testing.T, apiURL, header, value string) *emukit.Switch {
	t.Helper()
	sw, err := emukit.NewSwitch(apiURL, header, value, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sw
}

// controlPlane returns what an emulator's control plane answers for
// paths, asked in-process with the API key in header.
func controlPlane(h http.Handler, base, header, key string, paths ...string) []byte {
	var out []byte
	for _, p := range paths {
		req := httptest.NewRequest(http.MethodGet, base+p, nil)
		req.Header.Set(header, key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Result().Body)
		out = append(out, fmt.Sprintf("%s %d %s\n", p, rec.Code, b)...)
	}
	return out
}
