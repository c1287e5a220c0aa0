package boximage_test

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/pins"
)

// npmCI runs the image's `npm ci` in dir with the test bed's Node and npm
// (the versions the image pins) against the real npm registry.
func npmCI(ctx context.Context, tb testbed.Env, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(tb.NodeDir, "bin", "npm"), "ci", "--omit=dev", "--no-audit",
		"--no-fund", "--no-update-notifier", "--loglevel=warn", "--cache", tb.NPMCache)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(tb.NodeDir, "bin")+":"+os.Getenv("PATH"))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestRenderLockfile_npmCI installs pi from its rendered lockfile with the
// real npm and registry, runs its version command, and checks that a lock
// entry whose integrity does not match the registry's tarball stops npm ci.
func TestRenderLockfile_npmCI(t *testing.T) {
	tb := testbed.Require(t)
	p := loadPins(t)
	h, _ := p.Harness("pi")
	pj, pl, err := boximage.RenderLockfile(*h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	dir := t.TempDir()
	writeFiles(t, dir, pj, pl)
	start := time.Now()
	if out, err := npmCI(ctx, tb, dir); err != nil {
		t.Fatalf("npm ci of the rendered pi lockfile: %v\n%s", err, out)
	}
	t.Logf("npm ci installed pi %s in %v", h.Version, time.Since(start).Round(time.Millisecond))
	for path := range h.Lock.Packages {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(path), "package.json")); err != nil {
			t.Errorf("locked %s not installed: %v", path, err)
		}
	}
	bin := filepath.Join(dir, "node_modules", ".bin", h.Binary)
	cmd := exec.CommandContext(ctx, bin, h.VersionCommand[1:]...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(tb.NodeDir, "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || !regexp.MustCompile(h.VersionPattern).MatchString(got) {
		t.Errorf("%s = %q, %v; want a match of %s", strings.Join(h.VersionCommand, " "), got, err, h.VersionPattern)
	}

	// A tampered integrity on a transitive dependency must stop the install.
	// (A hash of content in no cache: npm would serve cached content that
	// matches a hash, whatever package it came from.)
	sum := sha512.Sum512([]byte("not the yaml tarball"))
	forged := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
	tampered := bytes.Replace(pl, []byte(entryIntegrity(t, h.Lock, "node_modules/yaml")), []byte(forged), 1)
	if bytes.Equal(tampered, pl) {
		t.Fatal("could not tamper with the yaml entry")
	}
	dir = t.TempDir()
	writeFiles(t, dir, pj, tampered)
	out2, err := npmCI(ctx, tb, dir)
	if err == nil || !strings.Contains(out2, "EINTEGRITY") {
		t.Errorf("npm ci with a tampered integrity = %v, want EINTEGRITY\n%s", err, out2)
	}
}

func entryIntegrity(t *testing.T, l *pins.Lock, path string) string {
	t.Helper()
	e, err := l.Entry(path)
	if err != nil {
		t.Fatal(err)
	}
	return e.Integrity
}

func writeFiles(t *testing.T, dir string, pj, pl []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "package.json"), pj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), pl, 0o644); err != nil {
		t.Fatal(err)
	}
}
