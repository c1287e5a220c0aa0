// Package sandboxtest is the fixture the live tests of the sandbox
// provider and of what is built on it (pools, the box state) share: the
// Docker vendor on the test bed's boxes' network, the real box image, a
// local model endpoint those boxes reach, and the targets the flow runs
// on (Docker, the E2B and Daytona emulators, the test bed's Kubernetes
// cluster), each checked at the end of a test for boxes left behind.
package sandboxtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// The local model endpoint's replies, chosen by the turn's prompt.
const (
	// ReplyText is the reply to any other prompt, in 4 deltas.
	ReplyText = "hello from inside the box"
	// PromptStall stalls the model call for ten minutes.
	PromptStall = "STALL: think for a long time"
	// PromptPaced is answered with PacedText in PacedDeltas deltas,
	// PacedGap apart.
	PromptPaced = "PACED: write slowly"
	PacedText   = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
	PacedDeltas = 16
	PacedGap    = 150 * time.Millisecond
	// ServedModel is the model the endpoint says it served.
	ServedModel = "router-served-model"
	// Network is the Docker network of the boxes and the endpoint.
	Network = "boxctl-test"
)

// Claude is the profile of a Claude Code turn.
var Claude = provider.Profile{Harness: "claude-code", Model: provider.ProfileModel{Default: "claude-sonnet-4-5"}}

// Fixture is what the live tests share: the Docker vendor, the box image,
// a local model endpoint on the boxes' network and a credential broker in
// front of it, where the boxes reach this machine.
type Fixture struct {
	Vendor *docker.Vendor
	Image  string
	// Router is the model endpoint and its key, which only the broker
	// holds.
	Router sandbox.Router
	Stub   *routerstub.Server
	// Broker is what the boxes reach: each gets a token of its own.
	Broker *sandbox.LocalBroker
	// Replica is the broker's: the boxes' bridges ship their events to it.
	Replica *replica.Store
}

var (
	fixOnce sync.Once
	fix     *Fixture
	fixErr  error
)

// Setup returns the process's fixture, made on first use; it needs the
// test bed.
func Setup(t testing.TB) *Fixture {
	t.Helper()
	env := testbed.Require(t)
	image := boxtest.Image(t, boxtest.Options{})
	fixOnce.Do(func() { fix, fixErr = New(env, image) })
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fix
}

// New makes a fixture of image on the test bed env: a child process of a
// test calls it with the parent's image.
func New(env testbed.Env, image string) (*Fixture, error) {
	v, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork(Network))
	if err != nil {
		return nil, err
	}
	host, err := v.HostAddress(context.Background())
	if err != nil {
		return nil, err
	}
	key := "router-key-" + RandText()
	script := routerstub.ScriptFunc(func(r routerstub.Request) routerstub.Reply {
		switch {
		case r.Side:
			return routerstub.Text("side")
		case strings.Contains(r.Prompt, PromptStall):
			return routerstub.Stall(10 * time.Minute)
		case strings.Contains(r.Prompt, PromptPaced):
			return routerstub.Deltas(PacedText, PacedDeltas).Paced(PacedGap)
		}
		return routerstub.Deltas(ReplyText, 4)
	})
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: script, ServedModel: ServedModel})
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen on the boxes' network: %w", err)
	}
	go func() { _ = http.Serve(l, stub) }()
	router := sandbox.Router{URL: "http://" + l.Addr().String(), Key: key}
	dir, err := os.MkdirTemp("", "boxctl-replica-")
	if err != nil {
		return nil, err
	}
	rep, err := replica.Open(context.Background(), dir, replica.Options{})
	if err != nil {
		return nil, err
	}
	lb, err := sandbox.StartBroker(context.Background(), v, broker.Options{Upstreams: []broker.Upstream{
		{Name: broker.Router, URL: router.URL, Key: router.Key, Auth: broker.AuthAsPresented}}, Replica: rep})
	if err != nil {
		return nil, err
	}
	return &Fixture{Vendor: v, Image: image, Stub: stub, Router: router, Broker: lb, Replica: rep}, nil
}

// SawPrompt reports whether the model endpoint received a request whose
// prompt contains s.
func (f *Fixture) SawPrompt(s string) bool {
	for _, r := range f.Stub.Requests() {
		if strings.Contains(r.Prompt, s) {
			return true
		}
	}
	return false
}

// PromptsWith returns how many model requests of a turn the endpoint
// received whose prompt contains every one of parts and none of not.
func (f *Fixture) PromptsWith(parts []string, not ...string) int {
	return f.Stub.Prompts(parts, not...)
}

// RandText is a short random lower-case text, for markers and keys.
func RandText() string { return strings.ToLower(sandbox.NewRunTag()[4:]) }

// Provider returns a provider of Docker boxes (see On).
func (f *Fixture) Provider(t testing.TB, edit func(*sandbox.Options)) *sandbox.Provider {
	t.Helper()
	return f.On(t, f.Docker(), edit)
}

// On returns a provider of the target's boxes with a ten-minute lifetime
// whose boxes reach the fixture's model endpoint through its broker,
// edited by edit when non-nil (an edit that sets a Router of its own has
// the boxes use it directly), checking at the end of t that none of its
// boxes is left.
func (f *Fixture) On(t testing.TB, tg Target, edit func(*sandbox.Options)) *sandbox.Provider {
	t.Helper()
	o := sandbox.Options{Vendor: tg.Vendor, Image: tg.Image, Router: f.Router, Lifetime: 10 * time.Minute}
	if edit != nil {
		edit(&o)
	}
	if o.Router == f.Router && o.Broker == nil {
		o.Router, o.Broker, o.BrokerURL = sandbox.Router{}, f.Broker, f.Broker.URL
	}
	p, err := sandbox.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { AssertNoBoxes(t, tg.Vendor, p.RunTag()) })
	return p
}

// Target is a vendor the sandbox flow runs on, with an image it creates
// boxes from.
type Target struct {
	Name   string
	Vendor vendors.Vendor
	Image  string
	// Inspect returns everything the vendor's control plane shows of a
	// box, for the secrets check; nil where the test cannot see it.
	Inspect func(t testing.TB, boxID string) string
}

// Docker is the Docker target.
func (f *Fixture) Docker() Target {
	return Target{Name: "docker", Vendor: f.Vendor, Image: f.Image, Inspect: boxtest.Inspect}
}

// Targets returns every vendor the flow runs on: Docker, the E2B and
// Daytona emulators and the test bed's Kubernetes cluster.
func (f *Fixture) Targets(t testing.TB) []Target {
	return []Target{f.Docker(), DaytonaTarget(t, f), E2BTarget(t, f), KubernetesTarget(t, f)}
}

// AssertNoBoxes fails t if any box with the run tag remains, and destroys
// it.
func AssertNoBoxes(t testing.TB, v vendors.Vendor, tag string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := v.List(ctx, map[string]string{boxmeta.LabelRunTag: tag})
	if err != nil {
		t.Errorf("list boxes of %s: %v", tag, err)
		return
	}
	for _, b := range list {
		t.Errorf("box %s with run tag %s remains (%s)", b.ID, tag, b.State)
		if box, err := v.Connect(ctx, b.ID); err == nil {
			_ = box.Destroy(ctx)
		}
	}
}

// Turn streams one turn and returns its text, its last event and its error.
func Turn(ctx context.Context, env *sandbox.Environment, tr provider.Turn) (string, []provider.Event, error) {
	var text string
	var evs []provider.Event
	for ev, err := range env.Stream(ctx, tr) {
		if err != nil {
			return text, evs, err
		}
		text += ev.Delta
		evs = append(evs, ev)
	}
	return text, evs, nil
}

// ChildEnv is the environment of a child process of a test (this test
// binary run again) that makes the fixture's provider with ChildProvider:
// the image, the model endpoint, the run tag and the boxes' lifetime.
func (f *Fixture) ChildEnv(runTag string, lifetime time.Duration) []string {
	return []string{"BOXCTL_SANDBOX_IMAGE=" + f.Image, "BOXCTL_SANDBOX_ROUTER=" + f.Router.URL, "BOXCTL_SANDBOX_KEY=" + f.Router.Key,
		"BOXCTL_SANDBOX_RUN=" + runTag, "BOXCTL_SANDBOX_LIFETIME=" + lifetime.String()}
}

// ChildProvider is, in a child process, the provider of its parent's
// fixture that ChildEnv describes (its boxes use the model endpoint
// directly: the parent's broker is in the parent).
func ChildProvider() (*sandbox.Provider, error) {
	env, err := testbed.Load()
	if err != nil {
		return nil, err
	}
	f, err := New(env, os.Getenv("BOXCTL_SANDBOX_IMAGE"))
	if err != nil {
		return nil, err
	}
	lifetime, err := time.ParseDuration(os.Getenv("BOXCTL_SANDBOX_LIFETIME"))
	if err != nil {
		lifetime = 10 * time.Minute
	}
	return sandbox.New(sandbox.Options{Vendor: f.Vendor, Image: f.Image,
		Router:   sandbox.Router{URL: os.Getenv("BOXCTL_SANDBOX_ROUTER"), Key: os.Getenv("BOXCTL_SANDBOX_KEY")},
		Lifetime: lifetime, RunTag: os.Getenv("BOXCTL_SANDBOX_RUN")})
}
