package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	controlapi "github.com/moby/buildkit/api/services/control"
	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/util/appdefaults"
	"github.com/tonistiigi/fsutil"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// nonceArg is a build argument no Dockerfile declares: it only marks a
// build in a buildkitd's history.
const nonceArg = "BOXCTL_TEST_NONCE"

// TestBuildCmd_EngineBuildKit builds the box image the way a user without
// a buildkitd does (no --buildkit-addr, no BUILDKIT_HOST): the Docker
// engine's own BuildKit builds it straight into the engine's store. Then a
// box from it runs a turn against the local model endpoint.
//
// The test bed's standalone buildkitd keeps running for other tests, so
// that it was not used is shown by what it and the engine recorded: the
// build carries a build argument with a fresh value, which the
// buildkitd's build history does not hold afterwards (while it holds the
// same argument of a control build made on it here); the engine's own
// build cache used the harness's install step during the build; no
// tarball went to the engine (BuildKit's progress); and no buildkitd
// answers where boxctl could have found one (BuildKit's default socket).
func TestBuildCmd_EngineBuildKit(t *testing.T) {
	env := testbed.Require(t)
	v := liveVendor(t)
	bridge := boxbridgetest.Build(t)
	t.Setenv("BUILDKIT_HOST", "")
	os.Unsetenv("BUILDKIT_HOST")
	useState(t)
	cleanupState(t, v)
	docker, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docker.Close() })

	control := "control-" + sandboxtest.RandText()
	standaloneBuild(t, env.BuildkitHost, control)
	if !inHistory(t, env.BuildkitHost, control) {
		t.Fatalf("the test bed's buildkitd history lacks the control build %s: the history check would prove nothing", control)
	}
	if _, err := os.Stat(strings.TrimPrefix(appdefaults.Address, "unix://")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("BuildKit's default socket %s exists (%v): this test needs no buildkitd there", appdefaults.Address, err)
	}

	nonce := "engine-" + sandboxtest.RandText()
	name := "boxctl-test/engine-box"
	start := time.Now()
	r := boxctl(t, t.Context(), nil, "build", "--target", "docker", "--harness", "claude-code", "--base", env.BaseImage,
		"--bridge", bridge, "--name", name, "--progress", "plain", "--build-arg", nonceArg+"="+nonce, "-o", "json")
	if r.code != 0 {
		t.Fatalf("build: exit %d: %v", r.code, r.err)
	}
	end := time.Now()
	rec := decodeRecord(t, r.stdout)
	t.Cleanup(func() {
		_, _ = docker.ImageRemove(context.WithoutCancel(t.Context()), rec.Image, image.RemoveOptions{})
	})
	t.Logf("built %s (%s, %d bytes) in %v", rec.Image, rec.ImageID, rec.Size, end.Sub(start))

	if !strings.Contains(r.stderr, "on the Docker engine's BuildKit") || !strings.Contains(r.stderr, "naming to docker.io/"+rec.Image) {
		t.Errorf("build stderr shows no build on the engine's BuildKit naming %s", rec.Image)
	}
	if strings.Contains(r.stderr, "sending tarball") {
		t.Errorf("build sent a tarball:\n%s", tail(r.stderr, 2000))
	}
	if inHistory(t, env.BuildkitHost, nonce) {
		t.Errorf("the test bed's buildkitd built %s=%s: the build did not run on the engine", nonceArg, nonce)
	}
	if used := engineCacheUsed(t, docker, start, end, "npm ci", "/opt/boxctl/harness/claude-code"); len(used) == 0 {
		t.Errorf("the engine's build cache used no record of the harness install during the build")
	} else {
		t.Logf("the engine's build cache used %q", used)
	}
	insp, err := docker.ImageInspect(t.Context(), rec.Image)
	if err != nil || insp.ID != rec.ImageID {
		t.Fatalf("ImageInspect(%s) = %s, %v; want the record's image %s", rec.Image, insp.ID, err, rec.ImageID)
	}

	up := boxctl(t, t.Context(), nil, "up", "--router", "local", "--image", rec.Image, "--lifetime", "10m", "-o", "json")
	if up.code != 0 {
		t.Fatalf("up: exit %d: %v", up.code, up.err)
	}
	turn := boxctl(t, t.Context(), nil, "turn", "last", "Say hello")
	if turn.code != 0 || !strings.Contains(turn.stdout, localReply) {
		t.Errorf("turn: exit %d (%v), stdout %q; want the local model's reply", turn.code, turn.err, turn.stdout)
	}
	if rm := boxctl(t, t.Context(), nil, "rm", "last"); rm.code != 0 {
		t.Errorf("rm last: exit %d: %v", rm.code, rm.err)
	}
}

// standaloneBuild solves a one-label Dockerfile on the buildkitd at addr
// with the build argument nonceArg=nonce, exporting nothing.
func standaloneBuild(t *testing.T, addr, nonce string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nLABEL boxctl.test=control\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs, err := fsutil.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bkclient.New(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Solve(t.Context(), nil, bkclient.SolveOpt{Frontend: "dockerfile.v0",
		FrontendAttrs: map[string]string{"filename": "Dockerfile", "build-arg:" + nonceArg: nonce},
		LocalMounts:   map[string]fsutil.FS{"context": fs, "dockerfile": fs}}, nil)
	if err != nil {
		t.Fatalf("control build on %s: %v", addr, err)
	}
}

// inHistory reports whether the build history of the buildkitd at addr
// holds a build with the build argument nonceArg=nonce.
func inHistory(t *testing.T, addr, nonce string) bool {
	t.Helper()
	c, err := bkclient.New(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stream, err := c.ControlClient().ListenBuildHistory(t.Context(), &controlapi.BuildHistoryRequest{EarlyExit: true})
	if err != nil {
		t.Fatalf("build history of %s: %v", addr, err)
	}
	found := false
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return found
		}
		if err != nil {
			t.Fatalf("build history of %s: %v", addr, err)
		}
		if ev.Record != nil && ev.Record.FrontendAttrs["build-arg:"+nonceArg] == nonce {
			found = true
		}
	}
}

// engineCacheUsed returns the engine's build cache records whose
// description holds every one of what and that were last used between
// since and until.
func engineCacheUsed(t *testing.T, docker *client.Client, since, until time.Time, what ...string) []string {
	t.Helper()
	du, err := docker.DiskUsage(t.Context(), types.DiskUsageOptions{Types: []types.DiskUsageObject{types.BuildCacheObject}})
	if err != nil {
		t.Fatalf("engine build cache: %v", err)
	}
	var out []string
	for _, r := range du.BuildCache {
		if r.LastUsedAt == nil || r.LastUsedAt.Before(since) || r.LastUsedAt.After(until) {
			continue
		}
		match := true
		for _, w := range what {
			match = match && strings.Contains(r.Description, w)
		}
		if match {
			out = append(out, r.ID+" "+r.Description)
		}
	}
	return out
}
