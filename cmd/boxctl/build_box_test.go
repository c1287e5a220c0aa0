package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/pins"
)

// runInImage runs cmd in a fresh container of img (through the image's
// entrypoint) and returns its exit code, stdout and stderr.
func runInImage(ctx context.Context, t *testing.T, docker *client.Client, img string, env, cmd []string) (int64, string, string) {
	t.Helper()
	created, err := docker.ContainerCreate(ctx, &container.Config{Image: img, Cmd: cmd, Env: env}, nil, nil, nil, "")
	if err != nil {
		t.Fatalf("create container of %s: %v", img, err)
	}
	t.Cleanup(func() {
		_ = docker.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
	})
	if err := docker.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start %v: %v", cmd, err)
	}
	waitC, errC := docker.ContainerWait(ctx, created.ID, container.WaitConditionNotRunning)
	var code int64
	select {
	case res := <-waitC:
		code = res.StatusCode
	case err := <-errC:
		t.Fatalf("wait for %v: %v", cmd, err)
	}
	logs, err := docker.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("logs of %v: %v", cmd, err)
	}
	defer logs.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, logs); err != nil {
		t.Fatalf("logs of %v: %v", cmd, err)
	}
	return code, stdout.String(), stderr.String()
}

// TestBuildCmd_BoxImage builds the real box image (Claude Code and Pi, the
// bridge, on the test bed's base), loads it, checks each harness's version
// against its pin, starts the bridge and checks it reports both ready, then
// rebuilds and expects the cache to serve it.
func TestBuildCmd_BoxImage(t *testing.T) {
	env := testbed.Require(t)
	bridge := boxbridgetest.Build(t)

	docker, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docker.Close() })
	p, err := pins.Load()
	if err != nil {
		t.Fatal(err)
	}
	hs, err := p.Select([]string{"claude", "pi"})
	if err != nil {
		t.Fatal(err)
	}

	args := []string{"build", "-o", "json", "--progress", "plain", "--harness", "claude,pi",
		"--base", env.BaseImage, "--bridge", bridge, "--buildkit-addr", env.BuildkitHost,
		"--docker-host", env.DockerHost, "--name", "boxctl-test/box"}
	var recs []boximage.Record
	var took []time.Duration
	for i := range 2 {
		start := time.Now()
		out, stderr, err := run(t, args...)
		if err != nil {
			t.Fatalf("boxctl %s (#%d): %v\n%s", strings.Join(args, " "), i, err, stderr)
		}
		took = append(took, time.Since(start))
		recs = append(recs, decodeRecord(t, out))
		if i == 1 && strings.Contains(stderr, "npm ci") && !strings.Contains(stderr, "CACHED") {
			t.Errorf("rebuild ran steps again:\n%s", stderr)
		}
	}
	t.Logf("box image %s: %d bytes; cold build %v, no-change rebuild %v", recs[0].Image, recs[0].Size, took[0], took[1])
	t.Cleanup(func() {
		_, _ = docker.ImageRemove(context.WithoutCancel(t.Context()), recs[0].Image, image.RemoveOptions{})
	})
	if recs[0].Digest != recs[1].Digest || recs[0].ImageID != recs[1].ImageID {
		t.Errorf("rebuild changed the image: %s -> %s", recs[0].ImageID, recs[1].ImageID)
	}
	if took[1] > 30*time.Second {
		t.Errorf("no-change rebuild took %v, want seconds", took[1])
	}
	if got := strings.Join(recs[0].Harnesses, ","); got != "claude-code,pi" || recs[0].Pins == nil {
		t.Errorf("record harnesses = %s (pins %v), want claude-code,pi with pins", got, recs[0].Pins != nil)
	}

	for _, h := range hs {
		t.Run(h.Name+" version", func(t *testing.T) {
			code, stdout, stderr := runInImage(t.Context(), t, docker, recs[0].Image, nil, h.VersionCommand)
			if code != 0 {
				t.Fatalf("%v exited %d: %s", h.VersionCommand, code, stderr)
			}
			if got := strings.TrimSpace(stdout); !regexp.MustCompile(h.VersionPattern).MatchString(got) {
				t.Errorf("%v = %q, want it to match the pin %q", h.VersionCommand, got, h.VersionPattern)
			}
		})
	}

	t.Run("bridge ready", func(t *testing.T) {
		const probe = `for i in $(seq 100); do
  node -e 'fetch("http://127.0.0.1:3344/health").then(r => r.text()).then(b => { console.log(b); process.exit(0) }, () => process.exit(1))' && exit 0
  sleep 0.2
done; cat /tmp/bridge.log >&2; exit 1`
		code, stdout, stderr := runInImage(t.Context(), t, docker, recs[0].Image,
			[]string{"BRIDGE_BACKENDS=claude,pi", "BRIDGE_DATA_DIR=/tmp/bridge"},
			[]string{"sh", "-c", "box-bridge >/tmp/bridge.log 2>&1 & " + probe})
		if code != 0 {
			t.Fatalf("bridge health probe exited %d: %s %s", code, stdout, stderr)
		}
		var health struct {
			Status   string `json:"status"`
			Backends []struct {
				Name, State, Version string
			} `json:"backends"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &health); err != nil {
			t.Fatalf("GET /health = %q: %v", stdout, err)
		}
		want := map[string]*pins.Harness{}
		for i := range hs {
			want[hs[i].Name] = &hs[i]
		}
		ready := 0
		for _, b := range health.Backends {
			h, ok := want[b.Name]
			if !ok {
				continue
			}
			if b.State != "ready" || !regexp.MustCompile(h.VersionPattern).MatchString(b.Version) {
				t.Errorf("backend %s = %s %q, want ready at the pinned version", b.Name, b.State, b.Version)
			}
			ready++
		}
		if health.Status != "ok" || ready != len(hs) {
			t.Errorf("GET /health = %s with %d of %d pinned backends: %s", health.Status, ready, len(hs), stdout)
		}
	})
}
