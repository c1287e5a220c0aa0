package conformance_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
)

func TestMain(m *testing.M) { boxbridgetest.Main(m) }

// testNetwork is the Docker network of the test bed's boxes.
const testNetwork = "boxctl-test"

// allHarnesses are every pinned harness: the box image of every target
// holds them all.
var allHarnesses = []string{"claude-code", "codex", "opencode", "gemini", "pi"}

// dockerHarnesses are the harnesses the Docker target proves offline in
// every run: all of them.
var dockerHarnesses = allHarnesses

// liveHarnesses are the harnesses the gVisor, emulator and Kubernetes
// targets prove, from the same image: the vendor's part of the suite is
// the same for every harness, and Docker proves every harness's part.
// -suite-harnesses runs others on every target.
var liveHarnesses = []string{"claude-code"}

// suiteHarnessesFlag, when set, names the harnesses TestSuite_Live runs on
// every target.
var suiteHarnessesFlag = flag.String("suite-harnesses", "", "harnesses TestSuite_Live runs on every target, comma separated (default: all on docker, claude-code elsewhere)")

// world is what the live tests share: the Docker vendor and the local
// endpoint on the boxes' network.
type world struct {
	docker *docker.Vendor
	// gvisor is the same engine with every box under gVisor.
	gvisor *docker.Vendor
	local  *conformance.Local
	// broker serves every target's boxes (all reach the Docker network's
	// gateway) in front of the local endpoint.
	broker *sandbox.LocalBroker
}

var (
	worldOnce sync.Once
	shared    *world
	worldErr  error
)

func setup(t *testing.T) *world {
	t.Helper()
	env := testbed.Require(t)
	worldOnce.Do(func() {
		v, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork(testNetwork))
		if err != nil {
			worldErr = err
			return
		}
		host, err := v.HostAddress(context.Background())
		if err != nil {
			worldErr = err
			return
		}
		l, err := conformance.StartLocal(host)
		if err != nil {
			worldErr = err
			return
		}
		dir, err := os.MkdirTemp("", "boxctl-conformance-replica-")
		if err != nil {
			worldErr = err
			return
		}
		rep, err := replica.Open(context.Background(), dir, replica.Options{})
		if err != nil {
			worldErr = err
			return
		}
		lb, err := sandbox.StartBroker(context.Background(), v, broker.Options{Replica: rep, Upstreams: []broker.Upstream{
			{Name: broker.Router, URL: l.Router.URL, Key: l.Router.Key, Auth: broker.AuthAsPresented}}})
		if err != nil {
			worldErr = err
			return
		}
		gv, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork(testNetwork),
			docker.WithRuntime(vendors.RuntimeGVisor), docker.WithGVisorRuntime(env.GVisorRuntime))
		if err != nil {
			worldErr = err
			return
		}
		shared = &world{docker: v, gvisor: gv, local: l, broker: lb}
	})
	if worldErr != nil {
		t.Fatal(worldErr)
	}
	return shared
}

// target is a vendor the suite runs on in the tests: make returns the
// conformance target of a box image built with opts.
type target struct {
	name string
	make func(t *testing.T, w *world, opts boxtest.Options) conformance.Target
	// harnesses are the harnesses the suite runs for on the target.
	harnesses []string
}

// targets are the vendors of TestSuite_Live, one entry each.
var targets = []target{
	{"docker", dockerTarget, dockerHarnesses},
	{"docker-gvisor", gvisorTarget, liveHarnesses},
}

// gvisorTarget is the Docker target with its boxes under gVisor.
func gvisorTarget(t *testing.T, w *world, opts boxtest.Options) conformance.Target {
	testbed.RequireGVisor(t)
	tg := dockerTarget(t, w, opts)
	tg.Vendor = w.gvisor
	return tg
}

func dockerTarget(t *testing.T, w *world, opts boxtest.Options) conformance.Target {
	image := boxtest.Image(t, opts)
	return conformance.Target{Vendor: w.docker, Image: image, ImageDigest: imageID(t, image), Local: w.local,
		Broker: w.broker, BrokerURL: w.broker.URL}
}

// imageID returns the engine's id (config digest) of a local image.
func imageID(t *testing.T, ref string) string {
	t.Helper()
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	img, err := cli.ImageInspect(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return img.ID
}

// run runs the suite and logs its summary.
func run(t *testing.T, tg conformance.Target, o conformance.Options) *conformance.Report {
	t.Helper()
	start := time.Now()
	rep, err := conformance.Run(t.Context(), tg, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var b bytes.Buffer
	if err := rep.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("suite on %s in %v:\n%s", tg.Vendor.Name(), time.Since(start).Round(time.Millisecond), b.String())
	return rep
}

// TestSuite_Live runs the whole suite, offline, on every target for its
// harnesses (all five on Docker, Claude Code elsewhere; vendorCases for
// the first only), from one image with every harness, one harness after
// the other (TestSuite_Live/<target>/<harness>), and checks that it is green, that
// every box is gone, and that the reports it writes are what their readers
// expect.
func TestSuite_Live(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			target := tg.make(t, w, boxtest.Options{Harnesses: allHarnesses})
			harnesses := tg.harnesses
			if *suiteHarnessesFlag != "" {
				harnesses = strings.Split(*suiteHarnessesFlag, ",")
			}
			for i, h := range harnesses {
				cases := suiteCases()
				if i > 0 && cases == nil {
					cases = harnessCases()
				}
				t.Run(h, func(t *testing.T) {
					want, err := conformance.Select(cases)
					if err != nil {
						t.Fatal(err)
					}
					checkSuite(t, run(t, target, conformance.Options{Harnesses: []string{h}, Cases: cases}), len(want))
				})
			}
		})
	}
}

// vendorCases prove the box and its vendor the same way whatever the
// harness: on a target with several harnesses, the suite runs them for its
// first harness only.
var vendorCases = []string{"provider.keyed-create", "provider.workspace", "provider.destroy",
	"box.broker", "box.clone", "box.lifetime", "box.destroy"}

// harnessCases are the cases but vendorCases.
func harnessCases() []string {
	var ids []string
	for _, c := range conformance.Cases() {
		if !slices.Contains(vendorCases, c.ID) {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// suiteCasesFlag selects the cases TestSuite_Live runs (see
// conformance.Select); empty runs them all.
var suiteCasesFlag = flag.String("suite-cases", "", "cases TestSuite_Live runs, comma separated (default: all)")

func suiteCases() []string {
	if *suiteCasesFlag == "" {
		return nil
	}
	return strings.Split(*suiteCasesFlag, ",")
}

// checkSuite checks that a run of want cases for one harness is green and
// that its reports are what their readers expect.
func checkSuite(t *testing.T, rep *conformance.Report, want int) {
	t.Helper()
	if got := len(rep.Results); got != want {
		t.Errorf("%d results, want %d", got, want)
	}
	for _, res := range rep.Results {
		t.Run(res.Case, func(t *testing.T) {
			switch res.Outcome {
			case conformance.Fail:
				t.Errorf("%s failed:\n%s\ncleanup: %v\nnotes: %v", res.Case, evidence(res), res.Cleanup, res.Notes)
			case conformance.NotApplicable:
				t.Logf("not applicable: needs %s: %s", res.Capability, res.Reason)
			}
			if len(res.Boxes) == 0 && res.Outcome == conformance.Pass {
				t.Errorf("%s passed without a box", res.Case)
			}
		})
	}
	checkReports(t, rep)
}

func evidence(res conformance.Result) string {
	if res.Evidence == nil {
		return "(no evidence)"
	}
	return res.Evidence.String()
}

// result returns the result of case id for harness h.
func result(t *testing.T, rep *conformance.Report, h, id string) conformance.Result {
	t.Helper()
	for _, r := range rep.Results {
		if r.Harness == h && r.Case == id {
			return r
		}
	}
	t.Fatalf("no result for %s/%s", h, id)
	return conformance.Result{}
}

// wantFail checks that a case failed with evidence holding every one of
// parts.
func wantFail(t *testing.T, res conformance.Result, parts ...string) {
	t.Helper()
	if res.Outcome != conformance.Fail || res.Evidence == nil {
		t.Errorf("%s = %s %v, want a failure with evidence", res.ID(), res.Outcome, res.Evidence)
		return
	}
	for _, p := range parts {
		if !strings.Contains(res.Evidence.String(), p) {
			t.Errorf("%s evidence does not name %q:\n%s", res.ID(), p, res.Evidence)
		}
	}
	if len(res.Cleanup) > 0 {
		t.Errorf("%s: cleanup failed: %v", res.ID(), res.Cleanup)
	}
}
