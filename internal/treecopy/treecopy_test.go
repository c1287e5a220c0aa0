package treecopy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestCopy(t *testing.T) {
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "sub", "deep"), 0o750))
	must(os.WriteFile(filepath.Join(src, "sub", "deep", "f.txt"), []byte("data"), 0o640))
	must(os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Symlink("sub/deep/f.txt", filepath.Join(src, "link")))
	must(os.MkdirAll(filepath.Join(src, "skipped"), 0o700))
	must(os.WriteFile(filepath.Join(src, "skipped", "x"), []byte("x"), 0o600))
	dst := filepath.Join(t.TempDir(), "copy")

	if err := Copy(context.Background(), src, dst, filepath.Join(src, "skipped")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		mode os.FileMode
		data string
	}{{"sub/deep/f.txt", 0o640, "data"}, {"run.sh", 0o755, "#!/bin/sh\n"}} {
		fi, err := os.Stat(filepath.Join(dst, tt.path))
		b, _ := os.ReadFile(filepath.Join(dst, tt.path))
		if err != nil || fi.Mode().Perm() != tt.mode || string(b) != tt.data {
			t.Errorf("%s in the copy: %v, %v, %q; want mode %v and %q", tt.path, err, fi, b, tt.mode, tt.data)
		}
	}
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != "sub/deep/f.txt" {
		t.Errorf("link in the copy = %q, %v; want the same relative link", target, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "skipped")); !os.IsNotExist(err) {
		t.Errorf("skipped directory in the copy: %v, want it left out", err)
	}
	if _, err := os.Stat(dst + ".partial"); !os.IsNotExist(err) {
		t.Errorf("partial copy left behind: %v", err)
	}
	if err := Copy(context.Background(), src, dst); err == nil {
		t.Error("a copy onto an existing directory succeeded, want an error")
	}
}

func TestCopy_Cancelled(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := Copy(ctx, src, dst); err == nil {
		t.Fatal("a cancelled copy succeeded")
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("a cancelled copy left %s: %v", dst, err)
	}
}
