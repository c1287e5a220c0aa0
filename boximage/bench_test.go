package boximage_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/pins"
)

func TestMain(m *testing.M) { boxbridgetest.Main(m) }

// BenchmarkBuild measures `boxctl build --target docker` of the box image
// (claude-code on the test bed's base, with a fresh label each time, so
// the engine gets a new image) into the test bed's Docker engine: through
// the test bed's standalone buildkitd, which sends the engine a tarball to
// load (impl=baseline), and through the engine's own BuildKit, which
// writes into the engine's store (impl=boxctl). cache=warm has every step
// cached (one build of the same Dockerfile precedes the timed ones);
// cache=cold rebuilds every step (--no-cache; npm's cache mount stays),
// leaving about 1 GB of build cache per op in the builder until its
// garbage collection (or `docker builder prune`, for the engine's) takes
// it.
func BenchmarkBuild(b *testing.B) {
	env := testbed.Require(b)
	dir, df := boxContext(b, env)
	docker, err := dockerclient.New(env.DockerHost)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { docker.Close() })
	for _, cache := range []string{"warm", "cold"} {
		for _, impl := range []struct{ name, addr string }{{"baseline", env.BuildkitHost}, {"boxctl", ""}} {
			b.Run("cache="+cache+"/impl="+impl.name, func(b *testing.B) {
				b.Setenv("BUILDKIT_HOST", "")
				opts := boximage.BuildOptions{BuildkitAddr: impl.addr, Dockerfile: df, ContextDir: dir,
					Insecure: []string{env.Registry}, NoCache: cache == "cold"}
				if cache == "warm" {
					benchBuild(b, docker, opts)
				}
				for b.Loop() {
					benchBuild(b, docker, opts)
				}
			})
		}
	}
}

// benchBuild builds opts with a fresh label into the engine, then untags
// the image.
func benchBuild(b *testing.B, docker *client.Client, opts boximage.BuildOptions) {
	b.Helper()
	n := nonce()
	tag := "boxctl-bench/box:" + n
	exp, err := boximage.NewDockerExporter(docker, tag)
	if err != nil {
		b.Fatal(err)
	}
	var progress bytes.Buffer
	opts.BuildArgs = map[string]string{"BENCH_NONCE": n}
	opts.Progress, opts.ProgressMode = &progress, boximage.ProgressPlain
	if _, err := boximage.Build(b.Context(), opts, exp); err != nil {
		b.Fatalf("build: %v\n%s", err, progress.String())
	}
	b.StopTimer()
	_, _ = docker.ImageRemove(context.WithoutCancel(b.Context()), tag, image.RemoveOptions{})
	b.StartTimer()
}

// boxContext renders the claude-code box image on the test bed's base with
// a last label of the build argument BENCH_NONCE, and returns its build
// context and Dockerfile.
func boxContext(b *testing.B, env testbed.Env) (string, []byte) {
	b.Helper()
	p, err := pins.Load()
	if err != nil {
		b.Fatal(err)
	}
	base, err := pins.ParseBase(env.BaseImage)
	if err != nil {
		b.Fatal(err)
	}
	r, err := boximage.Render(p, boximage.RenderOptions{Harnesses: []string{"claude-code"}, Base: &base})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := r.WriteDir(dir); err != nil {
		b.Fatal(err)
	}
	bridge, err := os.ReadFile(boxbridgetest.Build(b))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, boximage.BridgeFile), bridge, 0o755); err != nil {
		b.Fatal(err)
	}
	df := append(bytes.Clone(r.Dockerfile), "ARG BENCH_NONCE\nLABEL io.github.tangle-network.boxctl.bench.nonce=${BENCH_NONCE}\n"...)
	return dir, df
}
