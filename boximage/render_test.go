package boximage_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/goldentest"
	"github.com/tangle-network/boxctl/pins"
)

const (
	testVersion = "v0.0.0-test"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
)

func loadPins(t *testing.T) *pins.Pins {
	t.Helper()
	p, err := pins.Load()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func render(t *testing.T, p *pins.Pins, opts boximage.RenderOptions) *boximage.Rendered {
	t.Helper()
	if opts.BridgeVersion == "" && opts.BridgeCommit == "" {
		opts.BridgeVersion, opts.BridgeCommit = testVersion, testCommit
	}
	r, err := boximage.Render(p, opts)
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	return r
}

func TestRender_golden(t *testing.T) {
	p := loadPins(t)
	all := render(t, p, boximage.RenderOptions{Harnesses: []string{"claude", "codex", "pi", "opencode", "gemini"}})
	goldentest.Check(t, filepath.Join("testdata", "all.Dockerfile"), all.Dockerfile)
	goldentest.Check(t, filepath.Join("testdata", "box-init"), all.Files[boximage.InitFile])
	for _, name := range []string{"codex", "pi", "opencode"} {
		goldentest.Check(t, filepath.Join("testdata", name+".package.json"), all.Files["harness/"+name+"/package.json"])
		goldentest.Check(t, filepath.Join("testdata", name+".package-lock.json"), all.Files["harness/"+name+"/package-lock.json"])
	}

	testbedBase := pins.Base{Reference: "127.0.0.1:5000/boxctl/testbed-base", Digest: "sha256:" + strings.Repeat("ab", 32)}
	pi := render(t, p, boximage.RenderOptions{Harnesses: []string{"pi"}, Base: &testbedBase,
		User: "agent", UID: 2000, Lifetime: 15 * time.Minute, Workspace: "/work"})
	goldentest.Check(t, filepath.Join("testdata", "pi-testbed.Dockerfile"), pi.Dockerfile)

	again := render(t, p, boximage.RenderOptions{Harnesses: []string{"gemini", "opencode", "pi", "codex", "claude-code"}})
	if diff := cmp.Diff(all, again); diff != "" {
		t.Errorf("Render() is not deterministic (-first +second):\n%s", diff)
	}
}

func TestRender_files(t *testing.T) {
	r := render(t, loadPins(t), boximage.RenderOptions{Harnesses: []string{"pi", "claude"}})
	var names []string
	for n := range r.Files {
		names = append(names, n)
	}
	want := []string{"Dockerfile", "box-init", "harness/claude-code/package-lock.json", "harness/claude-code/package.json",
		"harness/pi/package-lock.json", "harness/pi/package.json"}
	if diff := cmp.Diff(want, names, cmpSorted); diff != "" {
		t.Errorf("Render() files (-want +got):\n%s", diff)
	}
	df := string(r.Dockerfile)
	for _, line := range []string{
		"FROM docker.io/library/debian:bookworm-slim@sha256:4b50eb66f977b4062683ff434ef18ac191da862dbe966961bc11990cf5791a8d",
		"COPY --chmod=0755 box-bridge /usr/local/bin/box-bridge",
		"USER 10001:10001",
		"WORKDIR /workspace",
		`ENTRYPOINT ["/usr/bin/tini", "-g", "--", "/usr/local/bin/box-init"]`,
		`    io.github.tangle-network.boxctl.harness.claude-code.proven="false" \`,
		`    org.opencontainers.image.revision="` + testCommit + `" \`,
	} {
		if !strings.Contains(df, line+"\n") {
			t.Errorf("Dockerfile lacks line %q", line)
		}
	}
	if strings.Contains(df, "harness/codex") {
		t.Error("Dockerfile installs codex, which was not selected")
	}

	dir := t.TempDir()
	if err := r.WriteDir(dir); err != nil {
		t.Fatalf("WriteDir() = %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, boximage.InitFile))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("WriteDir() box-init = %v, %v; want mode 0755", fi, err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "harness", "pi", "package-lock.json"))
	if err != nil || string(got) != string(r.Files["harness/pi/package-lock.json"]) {
		t.Errorf("WriteDir() pi lock differs from Files: %v", err)
	}
}

var cmpSorted = cmp.Transformer("sort", func(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func TestRender_errors(t *testing.T) {
	p := loadPins(t)
	pi := []string{"pi"}
	tests := []struct {
		name    string
		opts    boximage.RenderOptions
		wantErr string
		is      error
	}{
		{"default selection with nothing proven", boximage.RenderOptions{}, "no harness is proven", pins.ErrNoHarness},
		{"unknown harness", boximage.RenderOptions{Harnesses: []string{"cursor"}}, `"cursor"`, pins.ErrUnknownHarness},
		{"base without digest", boximage.RenderOptions{Harnesses: pi,
			Base: &pins.Base{Reference: "localhost:5000/base:latest"}}, "base: digest", pins.ErrInvalid},
		{"root user", boximage.RenderOptions{Harnesses: pi, User: "root", UID: 1}, "non-root", nil},
		{"root uid", boximage.RenderOptions{Harnesses: pi, User: "agent", UID: -1}, "non-root", nil},
		{"user without uid", boximage.RenderOptions{Harnesses: pi, User: "agent"}, "non-root", nil},
		{"sub-second lifetime", boximage.RenderOptions{Harnesses: pi, Lifetime: 1500 * time.Millisecond}, "whole seconds", nil},
		{"relative workspace", boximage.RenderOptions{Harnesses: pi, Workspace: "work"}, "clean absolute path", nil},
		{"bridge version without commit", boximage.RenderOptions{Harnesses: pi, BridgeVersion: "v1"}, "bridge version", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := boximage.Render(p, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Render() = %v, want an error containing %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Render() = %v, want errors.Is %v", err, tt.is)
			}
		})
	}
	bad := p.Clone()
	bad.Harnesses[2].Integrity = ""
	if _, err := boximage.Render(bad, boximage.RenderOptions{Harnesses: pi}); !errors.Is(err, pins.ErrInvalid) {
		t.Errorf("Render(pins without integrity) = %v, want ErrInvalid", err)
	}
}

// TestRenderLockfile_npmShape checks the rendered lock against what npm
// requires of a lock that `npm ci` accepts.
func TestRenderLockfile_npmShape(t *testing.T) {
	p := loadPins(t)
	for _, h := range p.Harnesses {
		t.Run(h.Name, func(t *testing.T) {
			pj, pl, err := boximage.RenderLockfile(h)
			if err != nil {
				t.Fatal(err)
			}
			var manifest struct {
				Dependencies map[string]string `json:"dependencies"`
			}
			var lock struct {
				Name            string `json:"name"`
				LockfileVersion int    `json:"lockfileVersion"`
				Packages        map[string]struct {
					Name         string            `json:"name"`
					Version      string            `json:"version"`
					Resolved     string            `json:"resolved"`
					Integrity    string            `json:"integrity"`
					Dependencies map[string]string `json:"dependencies"`
				} `json:"packages"`
			}
			if err := json.Unmarshal(pj, &manifest); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(pl, &lock); err != nil {
				t.Fatal(err)
			}
			if lock.LockfileVersion != 3 || lock.Name != "boxctl-harness-"+h.Name {
				t.Errorf("lock header = %d %q", lock.LockfileVersion, lock.Name)
			}
			want := map[string]string{h.Package: h.Version}
			for _, pkg := range h.With {
				want[pkg.Name] = pkg.Version
			}
			if diff := cmp.Diff(want, manifest.Dependencies); diff != "" {
				t.Errorf("package.json dependencies (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, lock.Packages[""].Dependencies); diff != "" {
				t.Errorf("lock root dependencies (-want +got):\n%s", diff)
			}
			for k, e := range lock.Packages {
				if k != "" && (e.Resolved == "" || e.Integrity == "" || e.Version == "") {
					t.Errorf("lock entry %s lacks version, resolved or integrity: %+v", k, e)
				}
			}
			for _, pkg := range append([]pins.Package{{Name: h.Package, Version: h.Version, Integrity: h.Integrity}}, h.With...) {
				if got := lock.Packages["node_modules/"+pkg.Name]; got.Version != pkg.Version || got.Integrity != pkg.Integrity {
					t.Errorf("lock top entry %s = %s %s, want the pin %s %s", pkg.Name, got.Version, got.Integrity, pkg.Version, pkg.Integrity)
				}
			}
		})
	}
}
