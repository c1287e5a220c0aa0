// Package boxtest is a test helper: it builds the real box image on the
// test bed (the test bed's base, the pinned harnesses, a box-bridge built
// from this tree) with BuildKit and loads it into the test bed's Docker
// engine, once per test process and set of options. BuildKit's cache and
// the engine's image store make a second build of the same inputs take
// seconds.
package boxtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/pins"
)

// Options change the image built.
type Options struct {
	// Harnesses to install; default claude-code.
	Harnesses []string
	// Bridge replaces the box-bridge binary with these bytes (a broken
	// bridge, for fault tests).
	Bridge []byte
}

var (
	mu     sync.Mutex
	images = map[string]string{}
)

// Image returns the reference of a box image built with opts, failing t if
// the build fails.
func Image(t testing.TB, opts Options) string {
	t.Helper()
	env := testbed.Require(t)
	if len(opts.Harnesses) == 0 {
		opts.Harnesses = []string{"claude-code"}
	}
	key := strings.Join(opts.Harnesses, ",") + "\x00" + string(opts.Bridge)
	mu.Lock()
	defer mu.Unlock()
	if ref, ok := images[key]; ok {
		return ref
	}
	p, err := pins.Load()
	if err != nil {
		t.Fatal(err)
	}
	base, err := pins.ParseBase(env.BaseImage)
	if err != nil {
		t.Fatal(err)
	}
	r, err := boximage.Render(p, boximage.RenderOptions{Harnesses: opts.Harnesses, Base: &base})
	if err != nil {
		t.Fatalf("render box image: %v", err)
	}
	dir, err := os.MkdirTemp("", "boxtest-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := r.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	bridge := opts.Bridge
	if bridge == nil {
		if bridge, err = os.ReadFile(boxbridgetest.Build(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, boximage.BridgeFile), bridge, 0o755); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	h.Write(r.Dockerfile)
	h.Write(bridge)
	tag := "boxctl-test/box:" + hex.EncodeToString(h.Sum(nil))[:16]

	docker, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer docker.Close()
	exp, err := boximage.NewDockerExporter(docker, tag)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	start := time.Now()
	res, err := boximage.Build(ctx, boximage.BuildOptions{BuildkitAddr: env.BuildkitHost, Dockerfile: r.Dockerfile,
		ContextDir: dir, Progress: &progress, ProgressMode: boximage.ProgressPlain, Insecure: []string{env.Registry}}, exp)
	if err != nil {
		t.Fatalf("build box image (%s): %v\n%s", strings.Join(opts.Harnesses, ","), err, tail(progress.String(), 4000))
	}
	t.Logf("box image %s (%s) ready in %v", res.Reference, strings.Join(opts.Harnesses, ","), time.Since(start).Round(time.Millisecond))
	images[key] = res.Reference
	return res.Reference
}

// Pins returns the embedded pins, for tests that change them.
func Pins(t testing.TB) *pins.Pins {
	t.Helper()
	p, err := pins.Load()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	lines := strings.Split(s[len(s)-n:], "\n")
	return strings.Join(slices.Clip(lines[1:]), "\n")
}

// Inspect returns the engine's raw inspect data of a container and of
// every exec the engine still lists for it, failing t if it lists none.
func Inspect(t testing.TB, id string) string {
	t.Helper()
	env := testbed.Require(t)
	cli, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	raw, execs, err := dockerclient.Inspect(context.Background(), cli, id)
	if err != nil {
		t.Fatal(err)
	}
	if execs == 0 {
		t.Fatalf("the engine lists no exec of %s, so an exec check would check nothing", id)
	}
	return string(raw)
}

var (
	pushMu sync.Mutex
	pushed = map[string]string{}
)

// Pushed returns the box image built with opts (Image), pushed to the test
// bed's registry (REGISTRY/boxctl-test/box:TAG), once per test process:
// for vendors whose boxes pull their image (the emulators' templates, a
// Kubernetes cluster).
func Pushed(t testing.TB, opts Options) string {
	t.Helper()
	env := testbed.Require(t)
	local := Image(t, opts)
	pushMu.Lock()
	defer pushMu.Unlock()
	if ref, ok := pushed[local]; ok {
		return ref
	}
	cli, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	_, tag, _ := strings.Cut(local, ":")
	ref := env.Registry + "/boxctl-test/box:" + tag
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := cli.ImageTag(ctx, local, ref); err != nil {
		t.Fatalf("tag %s as %s: %v", local, ref, err)
	}
	rc, err := cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: base64.URLEncoding.EncodeToString([]byte("{}"))})
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	defer rc.Close()
	if err := jsonmessage.DisplayJSONMessagesStream(rc, io.Discard, 0, false, nil); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	pushed[local] = ref
	return ref
}
