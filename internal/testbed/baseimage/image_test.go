package baseimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// writeRootfs writes a small root filesystem tarball, gzipped if asked.
func writeRootfs(t *testing.T, gz bool) string {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	files := []struct {
		name, body string
		mode       int64
	}{
		{"./usr/local/bin/node", "#!/bin/sh\necho v22.0.0\n", 0o755},
		{"./etc/os-release", "ID=debian\n", 0o644},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := raw.Bytes()
	path := filepath.Join(t.TempDir(), "rootfs.tar")
	if gz {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		if _, err := zw.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		data, path = z.Bytes(), path+".gz"
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var testConfig = Config{
	Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
	Entrypoint: []string{"/usr/bin/tini", "--"},
	Cmd:        []string{"/bin/bash"},
	Labels:     map[string]string{"dev.boxctl.testbed.node": "v22.0.0"},
	CreatedBy:  "test",
}

func TestFromLayer(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(map[bool]string{false: "tar", true: "tar.gz"}[gz], func(t *testing.T) {
			path := writeRootfs(t, gz)
			a, err := FromLayer(path, testConfig)
			if err != nil {
				t.Fatalf("FromLayer(%s) error = %v", path, err)
			}
			b, err := FromLayer(path, testConfig)
			if err != nil {
				t.Fatalf("FromLayer(%s) again: error = %v", path, err)
			}
			da, err := a.Digest()
			if err != nil {
				t.Fatal(err)
			}
			db, err := b.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if da != db {
				t.Errorf("FromLayer twice: digests %s and %s, want equal", da, db)
			}
			cf, err := a.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			got := struct {
				OS, Arch             string
				Created              time.Time
				Env, Entrypoint, Cmd []string
				Labels               map[string]string
				Layers, History      int
			}{cf.OS, cf.Architecture, cf.Created.Time, cf.Config.Env, cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.Labels, len(cf.RootFS.DiffIDs), len(cf.History)}
			want := got
			want.OS, want.Arch, want.Created = "linux", "amd64", time.Unix(0, 0).UTC()
			want.Env, want.Entrypoint, want.Cmd, want.Labels = testConfig.Env, testConfig.Entrypoint, testConfig.Cmd, testConfig.Labels
			want.Layers, want.History = 1, 1
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("FromLayer config mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromLayer_SameDiffIDCompressedOrNot(t *testing.T) {
	diffID := func(gz bool) v1.Hash {
		img, err := FromLayer(writeRootfs(t, gz), testConfig)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		return cf.RootFS.DiffIDs[0]
	}
	if plain, gz := diffID(false), diffID(true); plain != gz {
		t.Errorf("diff IDs: tar %s, tar.gz %s, want equal", plain, gz)
	}
}

func TestFromLayer_MissingFile(t *testing.T) {
	if _, err := FromLayer(filepath.Join(t.TempDir(), "nope.tar"), testConfig); err == nil {
		t.Fatal("FromLayer(missing file) error = nil, want an error")
	}
}

func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	repo, err := name.NewRepository(host+"/boxctl/base", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := FromLayer(writeRootfs(t, true), testConfig)
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Push(t.Context(), img, []name.Tag{repo.Tag("abc123"), repo.Tag("bookworm-node22")})
	if err != nil {
		t.Fatalf("Push() error = %v", err)
	}
	if got != want {
		t.Errorf("Push() = %s, want %s", got, want)
	}
	for _, tag := range []string{"abc123", "bookworm-node22"} {
		desc, err := remote.Head(repo.Tag(tag), remote.WithContext(t.Context()))
		if err != nil {
			t.Fatalf("HEAD %s: %v", tag, err)
		}
		if desc.Digest != want {
			t.Errorf("registry %s:%s = %s, want %s", repo, tag, desc.Digest, want)
		}
	}

	if _, err := Push(t.Context(), img, nil); !errors.Is(err, ErrNoTag) {
		t.Errorf("Push(no tags) error = %v, want ErrNoTag", err)
	}
}
