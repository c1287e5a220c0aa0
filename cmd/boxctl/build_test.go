package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/boximage/ecrfake"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
)

func TestBuildCmd_Flags(t *testing.T) {
	df := filepath.Join(t.TempDir(), "Dockerfile")
	if err := os.WriteFile(df, []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2B_API_KEY", "")
	t.Setenv("DAYTONA_API_KEY", "")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown target", []string{"--target", "k8s"}, `--target "k8s"`},
		{"bad progress", []string{"--progress", "fancy"}, `--progress "fancy"`},
		{"docker with push", []string{"--push", "r/x"}, "--target docker loads locally"},
		{"registry without push", []string{"--target", "registry"}, "needs --push REF or --ecr-repository"},
		{"e2b without push", []string{"--target", "e2b"}, "needs --push REF or --ecr-repository"},
		{"push and ecr", []string{"--target", "registry", "--push", "r/x", "--ecr-repository", "x"}, "exclude each other"},
		{"context alone", []string{"--context", "."}, "--context goes with --file"},
		{"harness with dockerfile", []string{"--file", df, "--harness", "pi"}, "exclude --file"},
		{"bad build arg", []string{"--build-arg", "NOVALUE"}, "want KEY=VALUE"},
		{"latest tag", []string{"--tag", "latest"}, "other than latest"},
		{"name with tag", []string{"--name", "box:1"}, "without tag"},
		{"e2b without key", []string{"--target", "e2b", "--push", "r/x", "--file", df, "--buildkit-addr", "unix:///nope"}, "E2B_API_KEY"},
		{"daytona without key", []string{"--target", "daytona", "--file", df, "--buildkit-addr", "unix:///nope"}, "DAYTONA_API_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := run(t, append([]string{"build"}, tt.args...)...)
			if got := exitCode(err); got != 2 {
				t.Fatalf("build %v: exit code %d (err %v), want 2", tt.args, got, err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("build %v: error %q, want it to contain %q (stderr %s)", tt.args, err, tt.wantErr, stderr)
			}
		})
	}
}

func randomTag() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return "t" + hex.EncodeToString(b)
}

// scratchContext writes a Dockerfile that needs no base image: publishing
// is what these tests exercise, not the box image.
func scratchContext(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"Dockerfile": "FROM scratch\nARG NONCE\nLABEL nonce=${NONCE}\nCOPY hello.txt /hello.txt\n",
		"hello.txt":  "hello " + randomTag() + "\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "Dockerfile")
}

func decodeRecord(t *testing.T, out string) boximage.Record {
	t.Helper()
	rec, err := boximage.ReadRecord(strings.NewReader(out))
	if err != nil {
		t.Fatalf("build -o json printed %q: %v", out, err)
	}
	return rec
}

// checkPushed fails unless ref resolves in the registry to digest.
func checkPushed(t *testing.T, ref, digest string) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(r, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("pushed image %s: %v", ref, err)
	}
	if desc.Digest.String() != digest {
		t.Errorf("registry has %s at %s, record says %s", desc.Digest, ref, digest)
	}
}

func awsTestEnv(t *testing.T, endpoint string) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIABOXCTLTEST", "AWS_SECRET_ACCESS_KEY": "test-secret", "AWS_SESSION_TOKEN": "",
		"AWS_REGION": "us-east-1", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_ENDPOINT_URL_ECR": endpoint,
	} {
		t.Setenv(k, v)
	}
}

func TestBuildCmd_Publish(t *testing.T) {
	env := testbed.Require(t)
	t.Setenv("BUILDKIT_HOST", env.BuildkitHost)
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no stray logins

	ecr := ecrfake.New(ecrfake.Options{Registry: env.Registry, AccessKeyID: "AKIABOXCTLTEST"})
	ecrSrv := httptest.NewServer(ecr)
	t.Cleanup(ecrSrv.Close)
	awsTestEnv(t, ecrSrv.URL)

	e2b, err := e2bemu.New(e2bemu.Options{APIKey: "e2b_test", ECREndpoint: ecrSrv.URL, DockerHost: env.DockerHost, Network: "boxctl-test"})
	if err != nil {
		t.Fatal(err)
	}
	e2bSrv := httptest.NewServer(e2b)
	t.Cleanup(func() { e2bSrv.Close(); e2b.Close() })
	t.Setenv("E2B_API_KEY", "e2b_test")

	dt, err := daytonaemu.New(daytonaemu.Options{APIKey: "dtn_test", Registry: env.Registry, DockerHost: env.DockerHost, Network: "boxctl-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dt.Close() })
	t.Setenv("DAYTONA_API_KEY", "dtn_test")

	repo := "boxctl-test/pub-" + randomTag()
	tests := []struct {
		name       string
		args       []string
		wantTarget string
		// wantImage is the pushed reference's prefix (before @digest).
		wantImage string
		check     func(t *testing.T, rec boximage.Record)
	}{
		{"registry", []string{"--target", "registry", "--push", env.Registry + "/" + repo}, "registry",
			env.Registry + "/" + repo + ":", nil},
		{"ecr", []string{"--target", "registry", "--ecr-repository", repo + "-ecr"}, "ecr",
			env.Registry + "/" + repo + "-ecr:", func(t *testing.T, _ boximage.Record) {
				if ecr.Calls("CreateRepository") != 1 || ecr.Calls("GetAuthorizationToken") < 1 {
					t.Errorf("ECR calls: create %d, token %d", ecr.Calls("CreateRepository"), ecr.Calls("GetAuthorizationToken"))
				}
			}},
		{"e2b via ecr", []string{"--target", "e2b", "--ecr-repository", repo + "-ecr", "--e2b-api-url", e2bSrv.URL}, "e2b",
			env.Registry + "/" + repo + "-ecr:", nil},
		{"e2b via registry", []string{"--target", "e2b", "--push", env.Registry + "/" + repo, "--e2b-api-url", e2bSrv.URL}, "e2b",
			env.Registry + "/" + repo + ":", nil},
		{"daytona", []string{"--target", "daytona", "--daytona-api-url", dt.APIURL(), "--name", "boxctl-test"}, "daytona",
			env.Registry + "/daytona/boxctl-test:", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			df := scratchContext(t)
			args := append([]string{"build", "-o", "json", "--progress", "plain", "--file", df,
				"--build-arg", "NONCE=" + randomTag()}, tt.args...)
			out, stderr, err := run(t, args...)
			if err != nil {
				t.Fatalf("boxctl %v: %v\n%s", args, err, stderr)
			}
			rec := decodeRecord(t, out)
			if rec.Target != tt.wantTarget || !strings.HasPrefix(rec.Image, tt.wantImage) ||
				!strings.HasSuffix(rec.Image, "@"+rec.Digest) || rec.Size <= 0 {
				t.Fatalf("record = %+v, want target %s, image %s...@digest and a size", rec, tt.wantTarget, tt.wantImage)
			}
			checkPushed(t, rec.Image, rec.Digest)
			switch rec.Target {
			case "e2b":
				if !strings.Contains(stderr, "e2b: Pulled layer") {
					t.Errorf("stderr lacks the E2B build logs:\n%s", stderr)
				}
			case "daytona":
				if !strings.Contains(stderr, "is active") || !strings.HasPrefix(rec.Reference, "boxctl-test-") {
					t.Errorf("snapshot %q, stderr:\n%s", rec.Reference, stderr)
				}
			default:
				if rec.Reference != rec.Image {
					t.Errorf("reference = %s, want the image %s", rec.Reference, rec.Image)
				}
			}
			if tt.check != nil {
				tt.check(t, rec)
			}
		})
	}

	t.Run("wrong AWS key fails before building", func(t *testing.T) {
		t.Setenv("AWS_ACCESS_KEY_ID", "AKIAWRONG")
		_, stderr, err := run(t, "build", "--target", "e2b", "--ecr-repository", repo, "--file", scratchContext(t),
			"--e2b-api-url", e2bSrv.URL, "--progress", "plain")
		if exitCode(err) != 1 || !strings.Contains(err.Error(), "UnrecognizedClientException") {
			t.Fatalf("build with a wrong AWS key = %v, want UnrecognizedClientException", err)
		}
		if strings.Contains(stderr, "DONE") {
			t.Errorf("build ran although ECR refused the key:\n%s", stderr)
		}
	})
}

func TestBuildCmd_Docker(t *testing.T) {
	env := testbed.Require(t)
	docker, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docker.Close() })
	tag := randomTag()
	t.Cleanup(func() {
		_, _ = docker.ImageRemove(context.WithoutCancel(t.Context()), "boxctl-test/docker:"+tag, image.RemoveOptions{Force: true})
	})
	out, stderr, err := run(t, "build", "--file", scratchContext(t), "--buildkit-addr", env.BuildkitHost,
		"--docker-host", env.DockerHost, "--name", "boxctl-test/docker", "--tag", tag, "--progress", "plain")
	if err != nil {
		t.Fatalf("build: %v\n%s", err, stderr)
	}
	for _, want := range []string{"target   docker", "image    boxctl-test/docker:" + tag, "digest   sha256:", "size     "} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout = %q, want %q", out, want)
		}
	}
	if _, err := docker.ImageInspect(t.Context(), "boxctl-test/docker:"+tag); err != nil {
		t.Errorf("image not in the engine: %v", err)
	}
	var rec boximage.Record
	if json.Unmarshal([]byte(out), &rec) == nil {
		t.Errorf("text output parsed as JSON: %q", out)
	}
}

func TestBuildCmd_PrintDockerfile(t *testing.T) {
	pp, err := pins.Load()
	if err != nil {
		t.Fatal(err)
	}
	want, err := boximage.Render(pp, boximage.RenderOptions{Harnesses: []string{"pi"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "build", "--dockerfile", "--harness", "pi", "--buildkit-addr", "unix:///nope")
	if err != nil {
		t.Fatalf("build --dockerfile: %v", err)
	}
	if out != string(want.Dockerfile) {
		t.Errorf("build --dockerfile printed\n%s\nwant the rendered Dockerfile\n%s", out, want.Dockerfile)
	}
	if !strings.Contains(out, "@sha256:") {
		t.Errorf("build --dockerfile: base not pinned by digest:\n%s", out)
	}
	_, _, err = run(t, "build", "--dockerfile", "--file", "Dockerfile")
	if exitCode(err) != 2 {
		t.Errorf("build --dockerfile --file: exit %d (%v), want a usage error", exitCode(err), err)
	}
}
