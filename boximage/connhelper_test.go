package boximage_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/moby/buildkit/client"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// buildkitdDockerfile is an image like moby/buildkit's (Docker Hub is
// out of reach here): the test bed's buildkitd, buildctl (which
// docker-container:// runs as `buildctl dial-stdio`) and the host's runc
// on the test bed's base.
const buildkitdDockerfile = `ARG BASE
FROM ${BASE}
COPY buildkitd buildctl runc /usr/local/bin/
COPY buildkitd.toml /etc/buildkit/buildkitd.toml
VOLUME /var/lib/buildkit
ENTRYPOINT ["/usr/local/bin/buildkitd"]
`

// buildkitdImage builds that image with the engine's own BuildKit and
// returns its tag.
func buildkitdImage(t *testing.T, env testbed.Env) string {
	t.Helper()
	dir := t.TempDir()
	copyExe := func(src, name string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatalf("%s: %v (bring the test bed up: ./scripts/testbed up)", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyExe(filepath.Join(testbed.Dir(), "bin", "buildkitd"), "buildkitd")
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatalf("runc: %v", err)
	}
	copyExe(runc, "runc")
	// buildctl from the BuildKit module go.mod requires, as the test bed
	// builds buildkitd (cgo on: both link the host's glibc, the base's).
	_, file, _, _ := runtime.Caller(0)
	build := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(dir, "buildctl"), "github.com/moby/buildkit/cmd/buildctl")
	build.Dir = filepath.Dir(file)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build buildctl: %v\n%s", err, out)
	}
	conf := fmt.Sprintf("[worker.oci]\n  enabled = true\n  binary = \"runc\"\n[worker.containerd]\n  enabled = false\n"+
		"[registry.%q]\n  http = true\n  insecure = true\n", env.Registry)
	if err := os.WriteFile(filepath.Join(dir, "buildkitd.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	docker, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer docker.Close()
	tag := "boxctl-test/buildkitd:" + nonce()
	t.Cleanup(func() {
		_, _ = docker.ImageRemove(context.WithoutCancel(t.Context()), tag, image.RemoveOptions{})
	})
	exp, err := boximage.NewDockerExporter(docker, tag)
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	t.Setenv("BUILDKIT_HOST", "")
	if _, err := boximage.Build(t.Context(), boximage.BuildOptions{Dockerfile: []byte(buildkitdDockerfile), ContextDir: dir,
		BuildArgs: map[string]string{"BASE": env.BaseImage}, Progress: &progress, ProgressMode: boximage.ProgressPlain}, exp); err != nil {
		t.Fatalf("build %s: %v\n%s", tag, err, progress.String())
	}
	return tag
}

// TestBuild_dockerContainer builds through BuildKit's docker-container://
// connection helper: a buildkitd in a container of the test bed's engine,
// reached through `docker exec NAME buildctl dial-stdio`, on the host's
// network (it pulls the base from the test bed's loopback registry).
//
// This engine cannot start a privileged container, as moby/buildkit's
// image expects (its host withholds CAP_SYS_RESOURCE, which --privileged
// asks for), so the buildkitd gets what it needs one by one: CAP_SYS_ADMIN
// and no seccomp profile for its snapshots, and the host's cgroup tree
// mounted writable for runc's RUN steps.
func TestBuild_dockerContainer(t *testing.T) {
	env := testbed.Require(t)
	t.Setenv("DOCKER_HOST", env.DockerHost)
	docker, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docker.Close() })
	img := buildkitdImage(t, env)

	name := "boxctl-test-buildkitd-" + nonce()
	created, err := docker.ContainerCreate(t.Context(), &container.Config{Image: img},
		&container.HostConfig{CapAdd: []string{"SYS_ADMIN"}, SecurityOpt: []string{"seccomp=unconfined", "apparmor=unconfined"},
			NetworkMode: "host",
			Mounts: []mount.Mount{{Type: mount.TypeVolume, Target: "/var/lib/buildkit"},
				{Type: mount.TypeBind, Source: "/sys/fs/cgroup", Target: "/sys/fs/cgroup"}}}, nil, nil, name)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = docker.ContainerRemove(context.WithoutCancel(t.Context()), created.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	})
	if err := docker.ContainerStart(t.Context(), created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	addr := "docker-container://" + name
	polltest.Until(t, 60*time.Second, "buildkitd in "+name+" to answer", func() bool {
		c, err := client.New(t.Context(), addr)
		if err != nil {
			return false
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err = c.ListWorkers(ctx)
		return err == nil
	})

	buildDocker(t, env, docker, addr)
}
