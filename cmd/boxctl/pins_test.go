package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/pins/pinstest"
)

// copyPins copies the repository's pins data into a temporary directory.
func copyPins(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "pins")
	files, err := filepath.Glob(filepath.Join(src, pins.LockDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, pins.LockDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, filepath.Join(src, pins.DataFile)) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(src, f)
		if err := os.WriteFile(filepath.Join(dir, rel), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPinsCmd(t *testing.T) {
	empty := pinstest.NewRegistry(t)
	tests := []struct {
		name     string
		args     []string
		wantOut  []string
		wantCode int
	}{
		{"table", []string{"pins"}, []string{"HARNESS", "claude-code  claude", "@earendil-works/pi-coding-agent", "node    22.23.5"}, 0},
		{"from a directory", []string{"pins", "--dir", filepath.Join("..", "..", "pins")}, []string{"opencode-ai"}, 0},
		{"verify against a registry without the packages", []string{"pins", "verify", "--registry", empty.URL},
			[]string{"FAIL: version not in the registry"}, 1},
		{"bad registry", []string{"pins", "verify", "--registry", "ftp://x"}, nil, 2},
		{"bump without harness", []string{"pins", "bump"}, nil, 2},
		{"bump of an unknown harness", []string{"pins", "bump", "cursor", "--dir", copyPins(t)}, nil, 2},
		{"extra argument", []string{"pins", "nope"}, nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := run(t, tt.args...)
			if got := exitCode(err); got != tt.wantCode {
				t.Fatalf("%v: exit code = %d (err %v), want %d", tt.args, got, err, tt.wantCode)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("%v: stdout = %q, want it to contain %q", tt.args, out, w)
				}
			}
		})
	}
}

func TestPinsCmd_json(t *testing.T) {
	out, _, err := run(t, "pins", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var p pins.Pins
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("pins -o json = %q: %v", out, err)
	}
	if len(p.Harnesses) != 5 || p.Bridge.Version == "" || p.Harnesses[0].Integrity == "" {
		t.Errorf("pins -o json = %+v, want 5 harnesses with integrity and the bridge build", p)
	}
}

func TestPinsVerifyCmd_npmConfigRegistry(t *testing.T) {
	reg := pinstest.NewRegistry(t)
	t.Setenv("NPM_CONFIG_REGISTRY", reg.URL)
	out, _, err := run(t, "pins", "verify", "-o", "json")
	if exitCode(err) != 1 {
		t.Fatalf("pins verify = %v, want exit 1", err)
	}
	var checks []pins.Check
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("pins verify -o json = %q: %v", out, err)
	}
	if len(checks) != 14 || !slices.Contains(reg.Requests(), "/@anthropic-ai/claude-code/2.1.332") {
		t.Errorf("pins verify made %d checks, registry saw %q; want 14 checks against $NPM_CONFIG_REGISTRY", len(checks), reg.Requests())
	}
}

func TestPinsBumpCmd(t *testing.T) {
	reg := pinstest.NewRegistry(t)
	const pkg = "@earendil-works/pi-coding-agent"
	integrity := reg.Publish(pinstest.Version{Name: pkg, Version: "1.6.1", Bin: map[string]string{"pi": "dist/cli.js"}})
	reg.Publish(pinstest.Version{Name: pkg, Version: "1.7.0-beta.1"})
	dir := copyPins(t)

	out, stderr, err := run(t, "pins", "bump", "pi", "1.6.1", "--dir", dir, "--registry", reg.URL, "-o", "json")
	if err != nil {
		t.Fatalf("pins bump = %v\nstderr: %s", err, stderr)
	}
	var res bumpResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("pins bump -o json = %q: %v", out, err)
	}
	want := bumpResult{Harness: "pi", From: "1.6.0", To: "1.6.1", Integrity: integrity, Locked: 1, Dir: dir}
	if res != want {
		t.Errorf("pins bump = %+v, want %+v", res, want)
	}
	p, err := pins.LoadDir(dir)
	if err != nil {
		t.Fatalf("pins after bump do not load: %v", err)
	}
	h, _ := p.Harness("pi")
	if h.Version != "1.6.1" || h.Integrity != integrity || h.Proven || h.VersionPattern != `^1\.6\.1$` {
		t.Errorf("bumped row = %+v", h)
	}
	if c, _ := p.Harness("codex"); c.Version != "0.171.0" {
		t.Errorf("bump touched codex: %s", c.Version)
	}

	// The bumped pi row verifies against the registry it came from.
	out, _, _ = run(t, "pins", "verify", "--dir", dir, "--registry", reg.URL)
	var piLine string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "pi ") {
			piLine = strings.Join(strings.Fields(line), " ")
		}
	}
	if want := "pi " + pkg + " 1.6.1 - ok"; piLine != want {
		t.Errorf("pins verify after bump: pi line %q, want %q\n%s", piLine, want, out)
	}
}
