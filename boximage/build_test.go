package boximage_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// smallDockerfile builds on the test bed's base image with one RUN step
// and one COPY from the context; NONCE makes a build distinct.
const smallDockerfile = `# syntax check: plain Dockerfile, no frontend image needed
ARG BASE
FROM ${BASE}
ARG NONCE=none
LABEL org.opencontainers.image.title=boxctl-test
COPY hello.txt /opt/hello.txt
RUN echo "built $NONCE" > /opt/built.txt && cat /opt/hello.txt >> /opt/built.txt
`

func nonce() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func contextDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the context\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func smallOptions(t *testing.T, env testbed.Env, n string, progress *bytes.Buffer) boximage.BuildOptions {
	return boximage.BuildOptions{
		BuildkitAddr: env.BuildkitHost,
		Dockerfile:   []byte(smallDockerfile),
		ContextDir:   contextDir(t),
		BuildArgs:    map[string]string{"BASE": env.BaseImage, "NONCE": n},
		Progress:     progress,
		ProgressMode: boximage.ProgressPlain,
	}
}

// builders are the BuildKits a build runs on: the test bed's buildkitd,
// and the Docker engine's own (no address, no BUILDKIT_HOST).
func builders(env testbed.Env) []struct{ name, addr string } {
	return []struct{ name, addr string }{{"buildkitd", env.BuildkitHost}, {"engine", ""}}
}

// TestBuild_Docker builds into the engine and again with nothing changed,
// on each builder: from a buildkitd the image goes to the engine as a
// tarball (not again on the rebuild), the engine's own BuildKit writes it
// into the engine's store (never a tarball).
func TestBuild_Docker(t *testing.T) {
	env := testbed.Require(t)
	docker, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docker.Close() })
	t.Setenv("BUILDKIT_HOST", "")
	for _, bk := range builders(env) {
		t.Run(bk.name, func(t *testing.T) { buildDocker(t, env, docker, bk.addr) })
	}
}

// buildDocker builds into the engine from the builder at addr (none: the
// engine's own), then again with nothing changed.
func buildDocker(t *testing.T, env testbed.Env, docker *client.Client, addr string) {
	n := nonce()
	tag := "boxctl-test/small:" + n
	t.Cleanup(func() {
		_, _ = docker.ImageRemove(context.WithoutCancel(t.Context()), tag, image.RemoveOptions{Force: true})
	})

	var digests []string
	for i, wantCached := range []bool{false, true} {
		var progress bytes.Buffer
		exp, err := boximage.NewDockerExporter(docker, tag)
		if err != nil {
			t.Fatal(err)
		}
		opts := smallOptions(t, env, n, &progress)
		opts.BuildkitAddr = addr
		res, err := boximage.Build(t.Context(), opts, exp)
		if err != nil {
			t.Fatalf("Build() #%d = %v\n%s", i, err, progress.String())
		}
		t.Logf("build #%d took %v: %+v", i, res.Duration, res)
		if res.Reference != tag || !strings.HasPrefix(res.Digest, "sha256:") ||
			!strings.HasPrefix(res.ImageID, "sha256:") || res.Size <= 0 {
			t.Errorf("Build() #%d = %+v, want tag, digest, image id and size", i, res)
		}
		// The RUN step shows as CACHED on the rebuild.
		if wantCached && !cachedStep(progress.String(), "RUN echo") {
			t.Errorf("rebuild progress shows no cached RUN step:\n%s", progress.String())
		}
		if (wantCached || addr == "") && strings.Contains(progress.String(), "sending tarball") {
			t.Errorf("build #%d sent the image to the engine as a tarball:\n%s", i, progress.String())
		}
		if !wantCached && addr != "" && !strings.Contains(progress.String(), "sending tarball") {
			t.Errorf("build #%d from %s sent the engine no tarball:\n%s", i, addr, progress.String())
		}
		if digests = append(digests, res.Digest); digests[0] != res.Digest {
			t.Errorf("rebuild digest %s, first build %s", res.Digest, digests[0])
		}
		insp, err := docker.ImageInspect(t.Context(), tag)
		if err != nil {
			t.Fatalf("ImageInspect(%s) = %v", tag, err)
		}
		if insp.ID != res.ImageID || insp.Config.Labels["org.opencontainers.image.title"] != "boxctl-test" {
			t.Errorf("loaded image = %s %v, want id %s and the label", insp.ID, insp.Config.Labels, res.ImageID)
		}
	}
}

// cachedStep reports whether BuildKit's plain progress shows the step whose
// line contains step as CACHED.
func cachedStep(progress, step string) bool {
	for _, line := range strings.Split(progress, "\n") {
		if id, rest, ok := strings.Cut(line, " "); ok && strings.HasPrefix(id, "#") && strings.Contains(rest, step) {
			return strings.Contains(progress, id+" CACHED")
		}
	}
	return false
}

// TestBuild_Registry pushes to the test bed's registry from each builder:
// from the engine's own BuildKit (the classic image store here), the
// engine pushes after the build.
func TestBuild_Registry(t *testing.T) {
	env := testbed.Require(t)
	t.Setenv("BUILDKIT_HOST", "")
	for _, bk := range builders(env) {
		t.Run(bk.name, func(t *testing.T) { buildRegistry(t, env, bk.addr) })
	}
}

func buildRegistry(t *testing.T, env testbed.Env, addr string) {
	n := nonce()
	ref := env.Registry + "/boxctl-test/small:" + n
	exp, err := boximage.NewRegistryExporter(ref)
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	opts := smallOptions(t, env, n, &progress)
	opts.BuildkitAddr = addr
	res, err := boximage.Build(t.Context(), opts, exp)
	if err != nil {
		t.Fatalf("Build() = %v\n%s", err, progress.String())
	}
	if res.Reference != ref+"@"+res.Digest {
		t.Errorf("Build() reference = %s, want %s@digest", res.Reference, ref)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(r, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("pushed image %s: %v", ref, err)
	}
	if desc.Digest.String() != res.Digest {
		t.Errorf("registry digest = %s, Build() digest = %s", desc.Digest, res.Digest)
	}
	img, err := desc.Image()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	want := desc.Size + m.Config.Size
	for _, l := range m.Layers {
		want += l.Size
	}
	if res.Size != want {
		t.Errorf("Build() size = %d, want %d (manifest + config + layers)", res.Size, want)
	}
}

func TestBuild_Fails(t *testing.T) {
	env := testbed.Require(t)
	docker, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docker.Close() })
	tests := []struct {
		name       string
		dockerfile string
		timeout    time.Duration
		wantErr    string
	}{
		{"failing RUN", "ARG BASE\nFROM ${BASE}\nRUN echo boom && exit 3\n", time.Minute, "exit code: 3"},
		{"cancelled", "ARG BASE\nFROM ${BASE}\nRUN sleep 120\n", 3 * time.Second, "context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp, err := boximage.NewDockerExporter(docker, "boxctl-test/fail:"+nonce())
			if err != nil {
				t.Fatal(err)
			}
			opts := smallOptions(t, env, nonce(), &bytes.Buffer{})
			opts.Dockerfile = []byte(tt.dockerfile + "# " + nonce() + "\n")
			opts.BuildArgs["NONCE"] = nonce()
			ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
			defer cancel()
			start := time.Now()
			_, err = boximage.Build(ctx, opts, exp)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Build() = %v, want error containing %q", err, tt.wantErr)
			}
			if tt.name == "cancelled" && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Build() = %v, want it to wrap context.DeadlineExceeded", err)
			}
			if d := time.Since(start); d > tt.timeout+30*time.Second {
				t.Errorf("Build() returned after %v, want soon after %v", d, tt.timeout)
			}
		})
	}
	t.Run("empty Dockerfile", func(t *testing.T) {
		_, err := boximage.Build(t.Context(), boximage.BuildOptions{BuildkitAddr: env.BuildkitHost}, &boximage.RegistryExporter{})
		if err == nil {
			t.Fatal("Build() with no Dockerfile = nil, want error")
		}
	})
}
