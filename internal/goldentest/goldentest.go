package goldentest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files and the generated files the tests check from what the code makes now")

// Update reports whether the tests run with -update. A test that makes
// its checked-in file in a way of its own (resolving a lock again against
// a registry, say) does so when it is set.
func Update() bool { return *update }

// Check compares got with the file at path, relative to the test's
// package directory, and fails t with their diff if they differ. With
// -update it first writes got to path, creating its directory.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; write it with %s", err, command(t))
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs from what the code makes now; if that is intended, rewrite it with %s (-%s +got):\n%s", path, command(t), filepath.Base(path), diff)
	}
}

// command returns the command that runs t's top-level test with -update
// in the test's package: go test ./pkg -run '^TestX$' -update.
func command(t testing.TB) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return "go test " + pkgDir() + " -run '^" + name + "$' -update"
}

// pkgDir returns the current directory, the test's package, relative to
// the module's root (./pkg), or "." when it finds no root.
func pkgDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for root := wd; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			rel, err := filepath.Rel(root, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		up := filepath.Dir(root)
		if up == root {
			return "."
		}
		root = up
	}
}
