package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestRun_Usage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"no subcommand", nil},
		{"unknown subcommand", []string{"frobnicate"}},
		{"push-base without flags", []string{"push-base"}},
		{"push-base without tag", []string{"push-base", "-layer", "x.tar", "-repo", "127.0.0.1:5000/a"}},
		{"push-base bad label", []string{"push-base", "-layer", "x.tar", "-repo", "127.0.0.1:5000/a", "-tag", "t", "-label", "novalue"}},
		{"wait-buildkit without addr", []string{"wait-buildkit"}},
		{"save-image without flags", []string{"save-image"}},
		{"save-image without out", []string{"save-image", "-layer", "x.tar", "-ref", "localhost/boxctl/pause:t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(t.Context(), tt.args, strings.NewReader(""), &out)
			if !errors.Is(err, flag.ErrHelp) {
				t.Errorf("run(%q) error = %v, want a usage error", tt.args, err)
			}
		})
	}
}

func TestRun_WaitBuildkitTimesOut(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nobody.sock")
	err := run(t.Context(), []string{"wait-buildkit", "-addr", "unix://" + sock, "-timeout", "500ms"}, strings.NewReader(""), &bytes.Buffer{})
	if err == nil || errors.Is(err, flag.ErrHelp) || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("wait-buildkit on a dead socket: error = %v, want a timeout", err)
	}
}

// writeLayer writes a one-file tar archive and returns its path.
func writeLayer(t *testing.T, name, body string, mode int64) string {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer := filepath.Join(t.TempDir(), "layer.tar")
	if err := os.WriteFile(layer, raw.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return layer
}

func TestRun_SaveImage(t *testing.T) {
	layer := writeLayer(t, "pause", "#!pause", 0o755)
	out := filepath.Join(t.TempDir(), "pause.tar")
	const ref = "localhost/boxctl/pause:0123abcd"
	args := []string{"save-image", "-layer", layer, "-ref", ref, "-entrypoint", "/pause", "-out", out}
	if err := run(t.Context(), args, strings.NewReader(""), &bytes.Buffer{}); err != nil {
		t.Fatalf("run(%q) error = %v", args, err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("read %s as %s: %v", out, ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/pause" {
		t.Errorf("entrypoint = %q, want /pause", got)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform = %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d (%v), want 1", len(layers), err)
	}
}

func TestRun_PushBase(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	layer := writeLayer(t, "./etc/os-release", "ID=debian\n", 0o644)

	var out bytes.Buffer
	args := []string{"push-base", "-layer", layer, "-repo", host + "/boxctl/base", "-tag", "abc", "-tag", "bookworm-node22", "-label", "k=v"}
	if err := run(t.Context(), args, strings.NewReader(""), &out); err != nil {
		t.Fatalf("run(%q) error = %v", args, err)
	}
	ref, err := name.NewDigest(strings.TrimSpace(out.String()), name.Insecure)
	if err != nil {
		t.Fatalf("push-base printed %q, want REPO@sha256:DIGEST: %v", out.String(), err)
	}
	img, err := remote.Image(ref, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Labels["k"]; got != "v" {
		t.Errorf("label k = %q, want v", got)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/usr/bin/tini --" {
		t.Errorf("entrypoint = %q, want /usr/bin/tini --", got)
	}
	desc, err := remote.Head(ref.Context().Tag("bookworm-node22"), remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("HEAD bookworm-node22: %v", err)
	}
	if desc.Digest.String() != ref.DigestStr() {
		t.Errorf("bookworm-node22 = %s, want %s", desc.Digest, ref.DigestStr())
	}
}
