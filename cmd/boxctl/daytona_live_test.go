package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/open"
)

// TestDaytona_BuildUpTurn publishes the real box image with `boxctl build
// --target daytona` to Daytona's emulator (pushed to the registry push
// access names, made a snapshot that pulls it), then runs the box verbs on
// a box of that snapshot: up, a live turn with Claude Code against a
// model endpoint, ls, rm and gc, none of which prints a secret. No
// buildkitd is named: the engine's own BuildKit builds, and the engine
// pushes with the push access's credentials.
func TestDaytona_BuildUpTurn(t *testing.T) {
	env := testbed.Require(t)
	bridge := boxbridgetest.Build(t)
	useState(t)
	t.Setenv("BUILDKIT_HOST", "")
	t.Setenv("DOCKER_HOST", env.DockerHost)
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no stray logins
	const key = "dtn_boxctl_live_test_key_0123456789"
	// With its defaults the emulator hands out push access to the test
	// bed's registry, as the real service always hands out its own.
	emu, err := daytonaemu.New(daytonaemu.Options{APIKey: key, DockerHost: env.DockerHost, Network: "boxctl-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	t.Setenv(open.EnvDaytonaKey, key)
	t.Setenv(open.EnvDaytonaURL, emu.APIURL())
	tr := &transcript{}

	args := []string{"build", "--target", "daytona", "-o", "json", "--progress", "plain", "--harness", "claude",
		"--base", env.BaseImage, "--bridge", bridge, "--name", "boxctl-test/daytona-box"}
	r := boxctl(t, t.Context(), tr, args...)
	if r.code != 0 {
		t.Fatalf("build --target daytona: exit %d: %v", r.code, r.err)
	}
	var rec boximage.Record
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("build -o json printed %q: %v", r.stdout, err)
	}
	if rec.Target != "daytona" || !strings.HasPrefix(rec.Reference, "daytona-box-") ||
		!strings.HasPrefix(rec.Image, env.Registry+"/daytona/daytona-box:") || !strings.Contains(r.stderr, "is active") {
		t.Fatalf("record = %+v, want a daytona snapshot of the image pushed to the registry", rec)
	}

	routerKey := localrouter.NewKey()
	stub, err := routerstub.New(routerstub.Options{Keys: []string{routerKey}, Script: routerstub.ScriptFunc(func(routerstub.Request) routerstub.Reply {
		return routerstub.Text(localReply)
	})})
	if err != nil {
		t.Fatal(err)
	}
	dv, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork("boxctl-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dv.Close() })
	routerURL := serveRouterStub(t, dv, stub)
	// Where the emulator's boxes reach this machine, as boxctl emulate
	// exports it: the broker serves them there.
	host, err := dv.HostAddress(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(open.EnvDaytonaHost, host)
	t.Setenv(routerKeyVar, routerKey)
	t.Setenv(routerURLEnv, "")

	v, err := daytona.New(key, daytona.WithAPIURL(emu.APIURL()))
	if err != nil {
		t.Fatal(err)
	}
	cleanupState(t, v)
	r = boxctl(t, t.Context(), tr, "up", "--target", "daytona", "--image", rec.Reference, "--router", routerURL,
		"--lifetime", "10m", "-o", "json")
	if r.code != 0 {
		t.Fatalf("up --target daytona: exit %d: %v", r.code, r.err)
	}
	var up upResult
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil {
		t.Fatal(err)
	}
	if up.Target != "daytona" || !strings.HasPrefix(up.Endpoint, "http://127.0.0.1:") || strings.HasPrefix(emu.APIURL(), up.Endpoint) {
		t.Errorf("up printed %+v, want a daytona box behind its preview URL (a loopback origin of its own)", up)
	}
	bearer := mustState(t).Find(up.ID).Reference.Bearer

	if r := boxctl(t, t.Context(), tr, "turn", "last", "Say hello"); r.code != 0 || !strings.Contains(r.stdout, localReply) {
		t.Fatalf("turn: exit %d (%v), stdout %q; want the model's reply", r.code, r.err, r.stdout)
	}
	r = boxctl(t, t.Context(), tr, "ls", "--target", "daytona", "-o", "json")
	var rows []boxstate.Row
	if err := json.Unmarshal([]byte(r.stdout), &rows); r.code != 0 || err != nil || len(rows) != 1 || rows[0].ID != up.ID ||
		rows[0].State != "running" || !rows[0].InState || rows[0].Image != rec.Reference {
		t.Errorf("ls --target daytona = %+v (exit %d, %v), want the box running, in the state, of the snapshot", rows, r.code, err)
	}
	if r := boxctl(t, t.Context(), tr, "rm", "--target", "daytona", "last"); r.code != 0 || !strings.Contains(r.stdout, "removed "+shortID(up.ID)) {
		t.Fatalf("rm: exit %d, %v, %q", r.code, r.err, r.stdout)
	}
	polltest.Until(t, 30*time.Second, "the box to be gone", func() bool { return boxGone(t, v, up.ID) })
	r = boxctl(t, t.Context(), tr, "gc", "--target", "daytona", "-o", "json")
	var res boxstate.Collected
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil || len(res.Removed) != 0 {
		t.Errorf("gc --target daytona = %+v (exit %d, %v), want nothing to remove", res, r.code, err)
	}
	tr.noSecrets(t, map[string]string{"bearer": bearer, "router key": routerKey, "API key": key})
}
