package testbed_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-cmp/cmp"
	bkclient "github.com/moby/buildkit/client"
	"github.com/tonistiigi/fsutil"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// requireNodeVersion returns the pinned Node version of the test bed.
func requireNodeVersion(t *testing.T, env testbed.Env) string {
	t.Helper()
	if !strings.HasPrefix(env.NodeVersion, "v22.") {
		t.Fatalf("test bed state: BOXCTL_TEST_NODE_VERSION = %q, want v22.x: run `make testbed`", env.NodeVersion)
	}
	return env.NodeVersion
}

// TestBaseImageRunsNode runs the base image on the test bed's Docker engine
// and checks it carries the pinned Node and npm on PATH, under tini.
func TestBaseImageRunsNode(t *testing.T) {
	env := testbed.Require(t)
	want := requireNodeVersion(t, env)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	cli, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatalf("docker client for %s: %v", env.DockerHost, err)
	}
	t.Cleanup(func() { cli.Close() })

	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image:  env.BaseImage,
		Cmd:    []string{"sh", "-c", "node --version && npm --version && readlink /proc/1/exe"},
		Labels: map[string]string{"dev.boxctl.test": t.Name()},
	}, nil, nil, nil, "")
	if err != nil {
		t.Fatalf("create container from %s: %v (is the image pulled? run `make testbed`)", env.BaseImage, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := cli.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Errorf("remove container %s: %v", created.ID, err)
		}
	})
	waitCh, errCh := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	var exit int64
	select {
	case res := <-waitCh:
		exit = res.StatusCode
	case err := <-errCh:
		t.Fatalf("wait for container: %v", err)
	}
	logs, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("container logs: %v", err)
	}
	defer logs.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, logs); err != nil {
		t.Fatalf("read container logs: %v", err)
	}
	if exit != 0 {
		t.Fatalf("container exited %d; stdout:\n%s\nstderr:\n%s", exit, &stdout, &stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("container printed %q, want node version, npm version and PID 1", stdout.String())
	}
	if lines[0] != want {
		t.Errorf("node --version = %q, want %q", lines[0], want)
	}
	if !strings.HasPrefix(lines[1], "10.") && !strings.HasPrefix(lines[1], "11.") {
		t.Errorf("npm --version = %q, want an npm that supports Node 22", lines[1])
	}
	if lines[2] != "/usr/bin/tini" {
		t.Errorf("PID 1 runs %q, want /usr/bin/tini", lines[2])
	}
}

// TestBuildkitSolveFromBase builds a Dockerfile FROM the local base image
// through buildkitd, with a RUN step that writes a file using node, and
// checks the exported file.
func TestBuildkitSolveFromBase(t *testing.T) {
	env := testbed.Require(t)
	want := requireNodeVersion(t, env)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	c, err := bkclient.New(ctx, env.BuildkitHost)
	if err != nil {
		t.Fatalf("buildkit client for %s: %v", env.BuildkitHost, err)
	}
	t.Cleanup(func() { c.Close() })

	src := t.TempDir()
	dockerfile := fmt.Sprintf(`FROM %s AS build
ARG TOKEN
RUN mkdir /out && node -e 'require("fs").writeFileSync("/out/result", process.version + " " + process.env.TOKEN)'
FROM scratch
COPY --from=build /out/result /result
`, env.BaseImage)
	if err := os.WriteFile(filepath.Join(src, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	srcFS, err := fsutil.NewFS(src)
	if err != nil {
		t.Fatalf("context dir: %v", err)
	}
	token := randomToken(t)
	out := t.TempDir()

	var progress logBuffer
	status := make(chan *bkclient.SolveStatus)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		// Solve closes status when it returns.
		_, err := c.Solve(gctx, nil, bkclient.SolveOpt{
			Frontend: "dockerfile.v0",
			FrontendAttrs: map[string]string{
				"filename":        "Dockerfile",
				"build-arg:TOKEN": token,
			},
			LocalMounts: map[string]fsutil.FS{"context": srcFS, "dockerfile": srcFS},
			Exports:     []bkclient.ExportEntry{{Type: bkclient.ExporterLocal, OutputDir: out}},
		}, status)
		return err
	})
	g.Go(func() error {
		for s := range status {
			progress.add(s)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		t.Fatalf("solve: %v\nprogress:\n%s", err, progress.String())
	}
	got, err := os.ReadFile(filepath.Join(out, "result"))
	if err != nil {
		t.Fatalf("read exported result: %v\nprogress:\n%s", err, progress.String())
	}
	if diff := cmp.Diff(want+" "+token, string(got)); diff != "" {
		t.Errorf("exported result mismatch (-want +got):\n%s", diff)
	}
}

func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// logBuffer collects a solve's vertex names, errors and logs for failure
// messages.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) add(s *bkclient.SolveStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range s.Vertexes {
		if v.Completed != nil || v.Error != "" {
			fmt.Fprintf(&l.buf, "%s %s\n", v.Name, v.Error)
		}
	}
	for _, lg := range s.Logs {
		l.buf.Write(lg.Data)
	}
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestHostNode checks the host toolchain: node at the pinned version, and
// npm and npx that run with that node whatever PATH holds.
func TestHostNode(t *testing.T) {
	env := testbed.Require(t)
	want := requireNodeVersion(t, env)
	tests := []struct {
		tool string
		args []string
		// check validates the trimmed output.
		check func(out string) bool
		what  string
	}{
		{"node", []string{"--version"}, func(out string) bool { return out == want }, want},
		{"npm", []string{"--version"}, func(out string) bool { return out != "" }, "a version"},
		{"npm", []string{"exec", "--yes", "--offline", "--", "node", "--version"}, func(out string) bool { return out == want }, want},
		{"npx", []string{"--version"}, func(out string) bool { return out != "" }, "a version"},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+strings.Join(tt.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(env.NodeDir, "bin", tt.tool), tt.args...)
			// A PATH without the toolchain: npm must still run under its own node.
			cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin", "npm_config_cache="+env.NPMCache)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s %v: %v", tt.tool, tt.args, err)
			}
			if got := strings.TrimSpace(string(out)); !tt.check(got) {
				t.Errorf("%s %v = %q, want %s", tt.tool, tt.args, got, tt.what)
			}
		})
	}
}

// TestKubernetes checks the test bed's cluster through client-go: the node
// localhost is Ready, the agent-sandbox APIs are served at v1beta1 (and
// v1alpha1 no longer), and the built
// kubectl speaks to the apiserver at the same version.
func TestKubernetes(t *testing.T) {
	env := testbed.Require(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig %s: %v", env.Kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}

	// The node may be settling right after `make testbed`: poll, no sleep.
	polltest.UntilNil(t, 2*time.Minute, "node localhost to be Ready", func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, "localhost", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var ready corev1.ConditionStatus
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c.Status
			}
		}
		if ready != corev1.ConditionTrue {
			return fmt.Errorf("Ready = %q, want True", ready)
		}
		return nil
	})

	// agent-sandbox at go.mod's v1.0.x: v1beta1 only, the v1alpha1 CRDs of
	// an older test bed replaced.
	for gv, want := range map[string]string{
		"agents.x-k8s.io/v1beta1":            "sandboxes/Sandbox",
		"extensions.agents.x-k8s.io/v1beta1": "sandboxwarmpools/SandboxWarmPool",
	} {
		res, err := cs.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("discovery of %s: %v", gv, err)
		}
		var kinds []string
		for _, r := range res.APIResources {
			kinds = append(kinds, r.Name+"/"+r.Kind)
		}
		if !slices.Contains(kinds, want) {
			t.Errorf("%s serves %v, want %s", gv, kinds, want)
		}
	}
	if _, err := cs.Discovery().ServerResourcesForGroupVersion("agents.x-k8s.io/v1alpha1"); !apierrors.IsNotFound(err) {
		t.Errorf("discovery of agents.x-k8s.io/v1alpha1 = %v, want not found", err)
	}

	server, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	out, err := exec.CommandContext(ctx, env.Kubectl, "--kubeconfig", env.Kubeconfig, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("kubectl version: %v", err)
	}
	var v struct {
		ClientVersion struct{ GitVersion string } `json:"clientVersion"`
		ServerVersion struct{ GitVersion string } `json:"serverVersion"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("kubectl version printed %q: %v", out, err)
	}
	if v.ServerVersion.GitVersion != server.GitVersion || v.ClientVersion.GitVersion != server.GitVersion {
		t.Errorf("kubectl version: client %q, server %q; want both %q", v.ClientVersion.GitVersion, v.ServerVersion.GitVersion, server.GitVersion)
	}
	if !strings.HasPrefix(server.GitVersion, "v1.35.") {
		t.Errorf("server version = %q, want v1.35.x", server.GitVersion)
	}
}
