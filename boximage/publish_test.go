package boximage_test

import (
	"bytes"
	"context"
	"errors"
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
)

// TestPublish publishes one small build to each target that needs no
// vendor: the local engine, a registry, and ECR; the record names what
// the target holds, and suits the vendors that start boxes from it.
func TestPublish(t *testing.T) {
	env := testbed.Require(t)
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no stray logins
	ecr := ecrfake.New(ecrfake.Options{Registry: env.Registry, AccessKeyID: "AKIABOXCTLPUB"})
	srv := httptest.NewServer(ecr)
	t.Cleanup(srv.Close)
	awsEnv(t, "AKIABOXCTLPUB")
	t.Setenv("AWS_ENDPOINT_URL_ECR", srv.URL)
	repo := "boxctl-test/publish-" + nonce()
	tests := []struct {
		name       string
		target     boximage.PublishTarget
		wantTarget string
		wantImage  string // prefix of the record's image
		suits      []string
	}{
		{"docker", boximage.PublishTarget{Target: boximage.TargetDocker, Name: repo, DockerHost: env.DockerHost},
			boximage.TargetDocker, repo + ":b", []string{"docker"}},
		{"registry", boximage.PublishTarget{Target: boximage.TargetRegistry, Name: "n", Push: env.Registry + "/" + repo},
			boximage.TargetRegistry, env.Registry + "/" + repo + ":b", []string{"docker", "kubernetes"}},
		{"ecr", boximage.PublishTarget{Target: boximage.TargetRegistry, Name: "n", ECRRepository: repo + "-ecr"},
			boximage.TargetECR, env.Registry + "/" + repo + "-ecr:b", []string{"docker", "kubernetes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var progress bytes.Buffer
			opts := smallOptions(t, env, nonce(), &progress)
			rec, err := boximage.Publish(t.Context(), tt.target, opts)
			if err != nil {
				t.Fatalf("Publish(%s) = %v\n%s", tt.name, err, progress.String())
			}
			tag := boximage.DefaultTag(opts)
			if rec.Target != tt.wantTarget || !strings.HasPrefix(rec.Image, tt.wantImage) || !strings.Contains(rec.Image, tag) ||
				rec.Digest == "" || rec.Size <= 0 || rec.Reference != rec.Image {
				t.Fatalf("Publish(%s) = %+v, want target %s, image %s... with tag %s", tt.name, rec, tt.wantTarget, tt.wantImage, tag)
			}
			if err := rec.Validate(); err != nil {
				t.Errorf("record: %v", err)
			}
			switch tt.wantTarget {
			case boximage.TargetDocker:
				cli, err := dockerclient.New(env.DockerHost)
				if err != nil {
					t.Fatal(err)
				}
				defer cli.Close()
				if _, err := cli.ImageInspect(t.Context(), rec.Image); err != nil {
					t.Errorf("image %s not in the engine: %v", rec.Image, err)
				}
				if d, err := boximage.LocalDigest(t.Context(), env.DockerHost, rec.Image); err != nil || !strings.HasPrefix(d, "sha256:") {
					t.Errorf("LocalDigest(%s) = %q, %v; want a digest", rec.Image, d, err)
				}
				if _, err := boximage.LocalDigest(t.Context(), env.DockerHost, "boxctl-test/no-such-image:x"); err == nil {
					t.Errorf("LocalDigest(unknown image) = nil error")
				}
				_, _ = cli.ImageRemove(context.WithoutCancel(t.Context()), rec.Image, image.RemoveOptions{Force: true})
			default:
				ref, err := name.ParseReference(rec.Image)
				if err != nil {
					t.Fatal(err)
				}
				desc, err := remote.Get(ref, remote.WithContext(t.Context()))
				if err != nil || desc.Digest.String() != rec.Digest {
					t.Errorf("registry has %v (%v) at %s, record says %s", desc, err, rec.Image, rec.Digest)
				}
			}
			for _, v := range tt.suits {
				if err := rec.CheckVendor(v); err != nil {
					t.Errorf("CheckVendor(%s) = %v, want nil", v, err)
				}
			}
			if err := rec.CheckVendor("e2b"); err == nil {
				t.Errorf("CheckVendor(e2b) of a %s record = nil, want a mismatch", rec.Target)
			}
		})
	}
	if ecr.Calls("CreateRepository") != 1 {
		t.Errorf("ECR CreateRepository calls = %d, want 1", ecr.Calls("CreateRepository"))
	}
}

// TestPublish_Config: a publish that cannot run is refused before any
// build, as a *PublishConfigError.
func TestPublish_Config(t *testing.T) {
	tests := []struct {
		name   string
		target boximage.PublishTarget
	}{
		{"vendor without importer", boximage.PublishTarget{Target: boximage.TargetE2B, Push: "127.0.0.1:5000/x"}},
		{"registry without push", boximage.PublishTarget{Target: boximage.TargetRegistry}},
		{"bad reference", boximage.PublishTarget{Target: boximage.TargetRegistry, Push: "127.0.0.1:5000/UPPER case"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := boximage.Publish(t.Context(), tt.target, boximage.BuildOptions{BuildkitAddr: "unix:///nonexistent"})
			var ce *boximage.PublishConfigError
			if !errors.As(err, &ce) {
				t.Errorf("Publish(%+v) = %v, want a *PublishConfigError", tt.target, err)
			}
		})
	}
}

func TestRecord_CheckVendor(t *testing.T) {
	tests := []struct {
		target, vendor string
		ok             bool
	}{
		{"docker", "docker", true},
		{"registry", "docker", true},
		{"ecr", "kubernetes", true},
		{"registry", "kubernetes", true},
		{"e2b", "e2b", true},
		{"daytona", "daytona", true},
		{"docker", "kubernetes", false},
		{"registry", "e2b", false},
		{"e2b", "daytona", false},
	}
	for _, tt := range tests {
		err := boximage.Record{Target: tt.target}.CheckVendor(tt.vendor)
		var me *boximage.VendorMismatchError
		if (err == nil) != tt.ok || (!tt.ok && (!errors.As(err, &me) || me.Target != tt.target || me.Vendor != tt.vendor)) {
			t.Errorf("Record{Target: %s}.CheckVendor(%s) = %v, want ok %v", tt.target, tt.vendor, err, tt.ok)
		}
	}
	for vendor, want := range map[string]string{"docker": "docker", "kubernetes": "registry", "e2b": "e2b"} {
		if got := boximage.TargetFor(vendor); got != want {
			t.Errorf("TargetFor(%s) = %s, want %s", vendor, got, want)
		}
	}
}

func TestDefaultTag(t *testing.T) {
	base := boximage.BuildOptions{Dockerfile: []byte("FROM x\n"), BuildArgs: map[string]string{"A": "1", "B": "2"}}
	same := boximage.BuildOptions{Dockerfile: []byte("FROM x\n"), BuildArgs: map[string]string{"B": "2", "A": "1"}}
	tag := boximage.DefaultTag(base)
	if len(tag) != 13 || tag[0] != 'b' || boximage.DefaultTag(same) != tag {
		t.Errorf("DefaultTag = %q, %q; want b + 12 hex digits, the same for the same build", tag, boximage.DefaultTag(same))
	}
	for _, o := range []boximage.BuildOptions{
		{Dockerfile: []byte("FROM y\n"), BuildArgs: base.BuildArgs},
		{Dockerfile: base.Dockerfile, BuildArgs: map[string]string{"A": "1"}},
		{Dockerfile: base.Dockerfile, BuildArgs: base.BuildArgs, Platform: "linux/arm64"},
	} {
		if boximage.DefaultTag(o) == tag {
			t.Errorf("DefaultTag(%+v) = the tag of another build", o)
		}
	}
}

func TestWithTag(t *testing.T) {
	tests := []struct{ ref, want string }{
		{"127.0.0.1:5000/box", "127.0.0.1:5000/box:t1"},
		{"127.0.0.1:5000/box:dev", "127.0.0.1:5000/box:dev"},
		{"reg/box@sha256:abc", "reg/box@sha256:abc"},
		{"box", "box:t1"},
	}
	for _, tt := range tests {
		if got := boximage.WithTag(tt.ref, "t1"); got != tt.want {
			t.Errorf("WithTag(%q, t1) = %q, want %q", tt.ref, got, tt.want)
		}
	}
}

func TestRendered_Context(t *testing.T) {
	r := render(t, loadPins(t), boximage.RenderOptions{Harnesses: []string{"pi"}})
	bridge := filepath.Join(t.TempDir(), "bridge")
	if err := os.WriteFile(bridge, []byte("#!/bin/true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, cleanup, err := r.Context(bridge)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, boximage.BridgeFile))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bridge in the context: %v, %v; want mode 0755", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dir, boximage.InitFile)); err != nil {
		t.Errorf("rendered file in the context: %v", err)
	}
	cleanup()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("context after cleanup: %v, want it removed", err)
	}
	if _, _, err := r.Context(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "bridge binary") {
		t.Errorf("Context(missing bridge) = %v, want a bridge binary error", err)
	}
}
