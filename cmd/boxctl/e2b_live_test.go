package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
	"github.com/tangle-network/boxctl/vendors/open"
)

// TestE2B_BuildUpTurn publishes the box image with `boxctl build --target
// e2b` (pushed to the test bed's registry, a template built from it by the
// E2B emulator) and drives a box of that template with the box verbs: up,
// turn against a model endpoint on the boxes' network, ls, rm and gc, all
// with --target e2b and the E2B variables pointing at the emulator as
// `boxctl emulate e2b` prints them. The API key is never printed.
func TestE2B_BuildUpTurn(t *testing.T) {
	env := testbed.Require(t)
	emu := e2btest.Emulator(t, nil)
	t.Setenv("BUILDKIT_HOST", env.BuildkitHost)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	for k, v := range e2bemu.SDKEnv("http://"+emu.Addr, emu.Server.Domain(), e2btest.APIKey) {
		t.Setenv(k, v)
	}
	t.Setenv(open.EnvE2BDial, emu.Addr)
	useState(t)
	tr := &transcript{}

	// The model endpoint, where the emulator's boxes reach it.
	dv, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork(e2btest.Network))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dv.Close() })
	key := localrouter.NewKey()
	const reply = "The Router answered an E2B box."
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: routerstub.NewQueue(routerstub.Text(reply)).Side(routerstub.Text(reply))})
	if err != nil {
		t.Fatal(err)
	}
	routerURL := serveRouterStub(t, dv, stub)
	// Where the emulator's boxes reach this machine, as boxctl emulate
	// exports it: the broker serves them there.
	host, err := dv.HostAddress(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(open.EnvE2BHost, host)
	t.Setenv(routerKeyVar, key)
	t.Setenv(routerURLEnv, "")

	r := boxctl(t, t.Context(), tr, "build", "--target", "e2b", "--push", env.Registry+"/boxctl-test/e2b-cli",
		"--harness", "claude-code", "--base", env.BaseImage, "--bridge", boxbridgetest.Build(t),
		"--insecure-registry", env.Registry, "--progress", "plain", "-o", "json")
	if r.code != 0 {
		t.Fatalf("build --target e2b: exit %d: %v", r.code, r.err)
	}
	rec := decodeRecord(t, r.stdout)
	if rec.Target != "e2b" || rec.Reference == "" || !strings.HasPrefix(rec.Image, env.Registry+"/boxctl-test/e2b-cli:") {
		t.Fatalf("build record = %+v, want an e2b template of the pushed image", rec)
	}
	if !strings.Contains(r.stderr, "e2b: Pulled layer") || !strings.Contains(r.stderr, "template "+rec.Reference+" is ready") {
		t.Errorf("build stderr lacks the emulator's build log and the template:\n%s", tail(r.stderr, 2000))
	}

	r = boxctl(t, t.Context(), tr, "up", "--target", "e2b", "--image", rec.Reference, "--router", routerURL,
		"--lifetime", "10m", "-o", "json")
	if r.code != 0 {
		t.Fatalf("up --target e2b: exit %d: %v", r.code, r.err)
	}
	var up upResult
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := emu.Client(t).Connect(context.Background(), up.ID); err == nil {
			_ = b.Destroy(context.Background())
		}
	})
	if !strings.HasPrefix(up.Endpoint, "http://3344-"+up.ID+"."+emu.Server.Domain()) {
		t.Errorf("up endpoint = %s, want the sandbox's host", up.Endpoint)
	}
	if r := boxctl(t, t.Context(), tr, "turn", "last", "Hello from E2B"); r.code != 0 || !strings.Contains(r.stdout, reply) {
		t.Fatalf("turn: exit %d (%v), stdout %q; want the Router's reply", r.code, r.err, r.stdout)
	}
	r = boxctl(t, t.Context(), tr, "ls", "--target", "e2b", "-o", "json")
	var rows []boxstate.Row
	if err := json.Unmarshal([]byte(r.stdout), &rows); r.code != 0 || err != nil || len(rows) != 1 || rows[0].ID != up.ID || !rows[0].InState {
		t.Fatalf("ls --target e2b = %q (exit %d, %v), want the one box, in the state", r.stdout, r.code, err)
	}
	if r := boxctl(t, t.Context(), tr, "rm", "--target", "e2b", "last"); r.code != 0 {
		t.Fatalf("rm --target e2b last: exit %d: %v", r.code, r.err)
	}
	polltest.Until(t, 30*time.Second, "the sandbox to be gone", func() bool { return len(emu.Server.Sandboxes()) == 0 })
	r = boxctl(t, t.Context(), tr, "gc", "--target", "e2b", "-o", "json")
	var res boxstate.Collected
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil || len(res.Removed) != 0 {
		t.Errorf("gc --target e2b after rm = %q (exit %d, %v), want nothing to remove", r.stdout, r.code, err)
	}
	tr.noSecrets(t, map[string]string{"E2B API key": e2btest.APIKey, "router key": key})
}
