package main

import (
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/release"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/pins/pinstest"
)

// wantError fails unless err maps to code and its text holds every want.
func wantError(t *testing.T, args []string, err error, code int, want ...string) {
	t.Helper()
	if got := exitCode(err); got != code {
		t.Fatalf("boxctl %v: exit code %d (err %v), want %d", args, got, err, code)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("boxctl %v: error %q, want it to contain %q", args, err, w)
		}
	}
}

func TestBuildCmd_BadHarness(t *testing.T) {
	dir := copyPins(t)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no harness proven, none named", []string{"build", "--buildkit-addr", "unix:///nonexistent.sock"},
			[]string{"no harness is proven yet", "pass --harness NAME", "known: claude-code, codex, pi, opencode, gemini",
				"run the conformance suite to prove one"}},
		{"print with none named", []string{"build", "--dockerfile"}, []string{"no harness is proven yet"}},
		{"unknown harness", []string{"build", "--harness", "pi,nope", "--buildkit-addr", "unix:///nonexistent.sock"},
			[]string{`--harness nope: unknown harness "nope" (known: claude-code, codex, pi, opencode, gemini)`}},
		{"bump of an unknown harness", []string{"pins", "bump", "nope", "--dir", dir},
			[]string{`bump: unknown harness "nope" (known: claude-code, codex, pi, opencode, gemini)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := run(t, tt.args...)
			wantError(t, tt.args, err, 2, tt.want...)
			if out != "" {
				t.Errorf("boxctl %v printed %q, want nothing on stdout", tt.args, out)
			}
		})
	}
}

func TestPinsVerifyCmd_IntegrityMismatch(t *testing.T) {
	reg := pinstest.NewRegistry(t)
	dir := copyPins(t)
	p, err := pins.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Node and npm as the registry serves them; pi republished with other bytes.
	for i, pkg := range p.Node.Packages {
		p.Node.Packages[i].Integrity = reg.Publish(pinstest.Version{Name: pkg.Name, Version: pkg.Version})
	}
	p.Node.NPM.Integrity = reg.Publish(pinstest.Version{Name: p.Node.NPM.Name, Version: p.Node.NPM.Version})
	pi, _ := p.Harness("pi")
	served := reg.Publish(pinstest.Version{Name: pi.Package, Version: pi.Version})
	p.Harnesses = []pins.Harness{*pi}
	if err := pins.Save(dir, p); err != nil {
		t.Fatal(err)
	}

	args := []string{"pins", "verify", "--dir", dir, "--registry", reg.URL}
	out, _, err := run(t, args...)
	wantError(t, args, err, 1, "1 of 4 pins disagree with the npm registry",
		"pi: "+pi.Package+"@"+pi.Version+": integrity differs from the registry's",
		"pinned "+pi.Integrity+", registry serves "+served,
		"run `boxctl pins bump pi "+pi.Version+"`")
	if !strings.Contains(out, "FAIL: integrity differs") {
		t.Errorf("pins verify printed %q, want the failing row", out)
	}
}

// TestBuildCmd_BridgePlatform checks that a build for another architecture
// refuses a bridge built for this one, and one missing beside boxctl, as
// usage errors before any BuildKit is dialled.
func TestBuildCmd_BridgePlatform(t *testing.T) {
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	bridge := boxbridgetest.Build(t)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"--bridge for this machine", []string{"--bridge", bridge},
			[]string{"box-bridge " + bridge + " is for " + runtime.GOARCH + ", not " + other, "linux/" + other}},
		{"none beside boxctl", nil,
			[]string{"no box-bridge for linux/" + other + " beside boxctl", "box-bridge-linux-" + other, "--bridge PATH"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"build", "--harness", "pi", "--platform", "linux/" + other,
				"--buildkit-addr", "unix:///nonexistent.sock"}, tt.args...)
			_, _, err := run(t, args...)
			wantError(t, args, err, 2, tt.want...)
		})
	}
}

// TestBuildCmd_ReleaseBridgeNames checks that the bridges a release
// archive holds beside boxctl carry the names build looks for.
func TestBuildCmd_ReleaseBridgeNames(t *testing.T) {
	for _, arch := range release.BridgeArchs {
		if got, want := release.BridgeName(arch), boximage.BridgeName(arch); got != want {
			t.Errorf("release.BridgeName(%q) = %q, want boximage's %q", arch, got, want)
		}
	}
}

// TestBuildCmd_UnreachableBuildkit checks where --buildkit-addr points
// (the flag, else $BUILDKIT_HOST, else BuildKit's default socket) through
// the error of a buildkitd that does not answer there.
func TestBuildCmd_UnreachableBuildkit(t *testing.T) {
	bridge := boxbridgetest.Build(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "tcp://" + l.Addr().String()
	l.Close()
	tests := []struct {
		name      string
		flag, env string // --buildkit-addr, $BUILDKIT_HOST
		want      string // the address dialled
	}{
		{"flag: missing socket", "unix:///nonexistent.sock", "", "unix:///nonexistent.sock"},
		{"flag: closed port", closed, "", closed},
		{"BUILDKIT_HOST", "", "unix:///nonexistent-env.sock", "unix:///nonexistent-env.sock"},
		{"flag over BUILDKIT_HOST", "unix:///nonexistent.sock", closed, "unix:///nonexistent.sock"},
		{"BuildKit's default", "", "", boximage.DefaultBuildkitAddr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("BUILDKIT_HOST", tt.env)
			if tt.want == boximage.DefaultBuildkitAddr {
				if _, err := os.Stat(strings.TrimPrefix(tt.want, "unix://")); err == nil {
					t.Fatalf("something listens at %s: this case needs no buildkitd there", tt.want)
				}
			}
			args := []string{"build", "--harness", "pi", "--bridge", bridge, "--progress", "quiet"}
			if tt.flag != "" {
				args = append(args, "--buildkit-addr", tt.flag)
			}
			start := time.Now()
			_, _, err := run(t, args...)
			wantError(t, args, err, 1, "buildkitd at "+tt.want+" is unreachable", "--buildkit-addr", "BUILDKIT_HOST")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("boxctl %v took %v to fail, want seconds", args, d)
			}
		})
	}
}

func TestBuildCmd_BuildkitAddrHelp(t *testing.T) {
	out, stderr, err := run(t, "build", "--help")
	if err != nil {
		t.Fatalf("boxctl build --help: %v\n%s", err, stderr)
	}
	want := "(default: $BUILDKIT_HOST, else unix:///run/buildkit/buildkitd.sock)"
	if !strings.Contains(out+stderr, "--buildkit-addr") || !strings.Contains(out+stderr, want) {
		t.Errorf("boxctl build --help = %q, want --buildkit-addr documented with %q", out+stderr, want)
	}
}

func TestBuildCmd_PushRefused(t *testing.T) {
	env := testbed.Require(t)
	reg := registry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", `Basic realm="boxctl-test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost || r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"errors":[{"code":"DENIED","message":"robot cannot push here (sent ` + r.Header.Get("Authorization") + `)"}]}`))
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	// A Docker config with a login for the registry, which must not leak.
	const password = "hunter2-docker-pass"
	cfg := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("robot:" + password))
	if err := os.WriteFile(filepath.Join(cfg, "config.json"),
		[]byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", cfg)

	ref := host + "/boxctl-test/refused:" + randomTag()
	args := []string{"build", "--target", "registry", "--push", ref, "--file", scratchContext(t),
		"--buildkit-addr", env.BuildkitHost, "--progress", "plain"}
	_, stderr, err := run(t, args...)
	wantError(t, args, err, 1, "push "+ref+": the registry refused it (HTTP 403 Forbidden)",
		"DENIED: robot cannot push here (sent Basic [redacted])", "docker login "+host)
	for _, secret := range []string{password, auth} {
		if strings.Contains(err.Error(), secret) || strings.Contains(stderr, secret) {
			t.Errorf("boxctl %v echoes the registry login: %q\n%s", args, err, stderr)
		}
	}
	if strings.Contains(stderr, "DONE") {
		t.Errorf("build ran although the registry refuses the push:\n%s", stderr)
	}
}
