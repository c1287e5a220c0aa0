// Package e2btest is a test helper: it runs the E2B emulator
// (vendors/e2b/e2bemu) on the test bed's Docker engine and network, with
// the real box image (internal/boxtest) pushed to the test bed's registry
// and published as a template through the emulator's template API, and
// returns e2b clients pointed at it the way a user's would be: WithDomain,
// WithDial (curl's --resolve) and WithScheme("http"), nothing else.
//
// An Env from Start belongs to the test that started it: its cleanup kills
// every sandbox and stops the emulator. Shared returns one Env for the
// whole test process, for tests that run side by side; the tests destroy
// their own boxes, and the containers behind any left end at their
// deadline.
package e2btest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/e2b"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
)

// Network is the Docker network of the test bed's boxes.
const Network = "boxctl-test"

// APIKey is the key of every test emulator.
const APIKey = "e2b_0123456789abcdef0123456789abcdef"

// Env is a running emulator.
type Env struct {
	Server *e2bemu.Server
	// Addr is where it listens (host:port).
	Addr string
	// Image is the box image in the registry.
	Image string
	// Template is the template ID of Image, published through the
	// emulator (or registered directly, with Options.Templates).
	Template string

	srv *httptest.Server
}

var (
	sharedOnce sync.Once
	shared     *Env
	sharedErr  error
)

// Shared returns the test process's emulator, started on first use.
func Shared(t testing.TB) *Env {
	t.Helper()
	img := boxtest.Pushed(t, boxtest.Options{})
	sharedOnce.Do(func() { shared, sharedErr = start(testbed.Require(t), img, nil) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// Start runs an emulator for t with the box image as a template; edit,
// when not nil, changes its options first (faults, or Templates to skip
// the build). The template goes through the template API unless edit
// registered one named "box".
func Start(t testing.TB, edit func(*e2bemu.Options)) *Env {
	t.Helper()
	return startFor(t, boxtest.Pushed(t, boxtest.Options{}), edit)
}

// Emulator runs an emulator for t without any template, for tests that
// publish their own.
func Emulator(t testing.TB, edit func(*e2bemu.Options)) *Env {
	t.Helper()
	return startFor(t, "", edit)
}

func startFor(t testing.TB, img string, edit func(*e2bemu.Options)) *Env {
	t.Helper()
	e, err := start(testbed.Require(t), img, edit)
	if e != nil {
		t.Cleanup(e.close)
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func start(env testbed.Env, img string, edit func(*e2bemu.Options)) (*Env, error) {
	opts := e2bemu.Options{APIKey: APIKey, DockerHost: env.DockerHost, Network: Network, MaxTimeout: time.Hour}
	if edit != nil {
		edit(&opts)
	}
	emu, err := e2bemu.New(opts)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(emu)
	e := &Env{Server: emu, Addr: srv.Listener.Addr().String(), Image: img, srv: srv}
	if _, ok := opts.Templates["box"]; ok {
		e.Template = "box"
		return e, nil
	}
	if img == "" {
		return e, nil
	}
	c, err := e2b.New(APIKey, e.ClientOptions()...)
	if err != nil {
		return e, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := c.ImportImage(ctx, vendors.ImportRequest{Image: img, Name: "boxctl-test-box"})
	if err != nil {
		return e, fmt.Errorf("publish %s as a template: %w", img, err)
	}
	e.Template = res.Reference
	return e, nil
}

// close kills every sandbox, then stops the server (the sandboxes' streams
// end with them, so it stops at once).
func (e *Env) close() {
	e.Server.Close()
	e.srv.Close()
}

// ClientOptions are the options that point an e2b client at the
// emulator.
func (e *Env) ClientOptions() []e2b.Option {
	return []e2b.Option{e2b.WithDomain(e.Server.Domain()), e2b.WithDial(e.Addr), e2b.WithScheme("http"),
		e2b.WithPollInterval(50 * time.Millisecond)}
}

// Client returns an e2b client of the emulator with opts added.
func (e *Env) Client(t testing.TB, opts ...e2b.Option) *e2b.Vendor {
	t.Helper()
	v, err := e2b.New(APIKey, append(e.ClientOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// Inspect returns everything the emulator's control plane and the Docker
// engine show of a sandbox: its GET /sandboxes/{id} and list answers and
// the engine's inspect data of the container behind it and its execs.
func (e *Env) Inspect(t testing.TB, sandboxID string) string {
	t.Helper()
	var all strings.Builder
	for _, path := range []string{"/sandboxes/" + sandboxID, "/v2/sandboxes", "/sandboxes"} {
		req := httptest.NewRequest("GET", "http://api."+e.Server.Domain()+path, nil)
		req.Header.Set("X-API-Key", APIKey)
		w := httptest.NewRecorder()
		e.Server.ServeHTTP(w, req)
		fmt.Fprintf(&all, "%s %d %s\n", path, w.Code, w.Body.String())
	}
	if box, ok := e.Server.Backend(sandboxID); ok {
		all.WriteString(boxtest.Inspect(t, box.ID()))
	}
	return all.String()
}
