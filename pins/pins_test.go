package pins_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tangle-network/boxctl/internal/buildinfo"
	"github.com/tangle-network/boxctl/internal/goldentest"
	"github.com/tangle-network/boxctl/pins"
)

func TestLoad(t *testing.T) {
	p, err := pins.Load()
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	var names []string
	for _, h := range p.Harnesses {
		names = append(names, h.Name)
		if h.Proven {
			t.Errorf("harness %s is proven, but nothing has run in a box yet", h.Name)
		}
		if h.Lock == nil || len(h.Lock.Packages) == 0 {
			t.Errorf("harness %s has no lock", h.Name)
		}
	}
	if diff := cmp.Diff([]string{"claude-code", "codex", "pi", "opencode", "gemini"}, names); diff != "" {
		t.Errorf("Load() harnesses (-want +got):\n%s", diff)
	}
	bi := buildinfo.Get()
	if p.Bridge.Version != bi.Version || p.Bridge.Commit != bi.Commit {
		t.Errorf("Load() bridge = %s %s, want the build's %s %s", p.Bridge.Version, p.Bridge.Commit, bi.Version, bi.Commit)
	}
	// The init and the bridge's jail, at the versions Debian bookworm (the
	// base) serves.
	wantDebs := []pins.DebianPackage{{Name: "tini", Version: "0.19.0-1+b3"}, {Name: "bubblewrap", Version: "0.8.0-2+deb12u1"}}
	if diff := cmp.Diff(wantDebs, p.Base.Packages); diff != "" {
		t.Errorf("Load() base packages (-want +got):\n%s", diff)
	}
	if h, ok := p.Harness("claude"); !ok || h.Name != "claude-code" {
		t.Errorf("Harness(claude) = %v, %v; want claude-code by its backend key", h, ok)
	}
}

// TestSave_roundTrip checks that the data files in the repository are in
// the canonical form Save writes, so bump diffs stay minimal.
func TestSave_roundTrip(t *testing.T) {
	p, err := pins.LoadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := pins.Save(dir, p); err != nil {
		t.Fatalf("Save() = %v", err)
	}
	files := []string{pins.DataFile}
	for _, h := range p.Harnesses {
		files = append(files, filepath.Join(pins.LockDir, h.Name+".json"))
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Save() wrote %s unlike the repository's copy:\n%s", f, cmp.Diff(string(want), string(got)))
		}
	}
	back, err := pins.LoadDir(dir)
	if err != nil {
		t.Fatalf("LoadDir(saved) = %v", err)
	}
	if diff := cmp.Diff(p, back, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("LoadDir(Save(p)) (-want +got):\n%s", diff)
	}
}

func TestSchema_published(t *testing.T) {
	got, err := pins.JSONSchema()
	if err != nil {
		t.Fatalf("JSONSchema() = %v", err)
	}
	goldentest.Check(t, pins.SchemaFile, got)
	var doc struct {
		Ref         string         `json:"$ref"`
		Definitions map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	for _, def := range []string{"Pins", "Base", "Node", "Bridge", "Harness", "Package", "DebianPackage"} {
		if doc.Definitions[def] == nil {
			t.Errorf("schema lacks definition %s", def)
		}
	}
}

func TestPins_Validate(t *testing.T) {
	_, base := fakeWorld(t)
	tests := []struct {
		name    string
		mutate  func(p *pins.Pins)
		wantErr string // empty: valid
	}{
		{"valid", func(*pins.Pins) {}, ""},
		{"harness without integrity", func(p *pins.Pins) { p.Harnesses[0].Integrity = "" }, "want sha512-<base64>"},
		{"sha1 integrity", func(p *pins.Pins) { p.Harnesses[0].Integrity = "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=" }, "want sha512-<base64>"},
		{"integrity disagrees with lock", func(p *pins.Pins) {
			p.Harnesses[0].Integrity = p.Node.Packages[0].Integrity
		}, "differs from the pinned"},
		{"version range", func(p *pins.Pins) { p.Harnesses[0].Version = "^1.0.0" }, "is not exact"},
		{"version not in lock", func(p *pins.Pins) {
			p.Harnesses[0].Version = "1.0.1"
			p.Harnesses[0].VersionPattern = `^1\.0\.1$`
		}, "is version 1.0.0, pinned 1.0.1"},
		{"no lock", func(p *pins.Pins) { p.Harnesses[0].Lock = nil }, "no lock"},
		{"lock entry without resolved", func(p *pins.Pins) {
			l := *p.Harnesses[0].Lock
			l.Packages = map[string]json.RawMessage{}
			for k, v := range p.Harnesses[0].Lock.Packages {
				l.Packages[k] = v
			}
			l.Packages["node_modules/left-pad"] = json.RawMessage(`{"version":"1.3.0","integrity":"sha512-AAAA"}`)
			p.Harnesses[0].Lock = &l
		}, "is not a registry URL"},
		{"platform missing from lock", func(p *pins.Pins) {
			p.Harnesses[0].Platforms = append(p.Harnesses[0].Platforms, pins.Package{Platform: "linux/arm64",
				Name: "@acme/fake-cli-linux-arm64", Version: "1.0.0", Integrity: p.Harnesses[0].Integrity})
		}, "no entry for platform package @acme/fake-cli-linux-arm64"},
		{"with at another version", func(p *pins.Pins) { p.Harnesses[0].With[0].Version = "1.0.1" }, "want the CLI's version 1.0.0"},
		{"with missing from lock", func(p *pins.Pins) {
			l := *p.Harnesses[0].Lock
			l.Packages = maps.Clone(l.Packages)
			delete(l.Packages, "node_modules/@acme/fake-sdk")
			p.Harnesses[0].Lock = &l
		}, `no entry "node_modules/@acme/fake-sdk"`},
		{"with a platform", func(p *pins.Pins) { p.Harnesses[0].With[0].Platform = "linux/amd64" }, "has no platform or alias"},
		{"unknown platform", func(p *pins.Pins) { p.Harnesses[0].Platforms[0].Platform = "darwin/arm64" }, `platform "darwin/arm64"`},
		{"pattern without version", func(p *pins.Pins) { p.Harnesses[0].VersionPattern = `^[0-9.]+$` }, "does not name version"},
		{"pattern matching nothing printed", func(p *pins.Pins) { p.Harnesses[0].VersionPattern = `(1\.0\.0)?` }, "matches empty output"},
		{"pattern with a quote", func(p *pins.Pins) { p.Harnesses[0].VersionPattern = `^'1\.0\.0$` }, "quotes"},
		{"bad pattern", func(p *pins.Pins) { p.Harnesses[0].VersionPattern = `^1\.0\.0(` }, "version pattern"},
		{"version command of another binary", func(p *pins.Pins) { p.Harnesses[0].VersionCommand = []string{"sh", "-c"} }, "must start with the binary"},
		{"duplicate name", func(p *pins.Pins) {
			h := p.Harnesses[0]
			h.Backend = "other"
			p.Harnesses = append(p.Harnesses, h)
		}, `"fake" already names harness fake`},
		{"backend shadows a name", func(p *pins.Pins) {
			h := p.Harnesses[0]
			h.Name, h.Backend = "other", "fake"
			p.Harnesses = append(p.Harnesses, h)
		}, `"fake" already names harness fake`},
		{"no harnesses", func(p *pins.Pins) { p.Harnesses = nil }, "no harnesses"},
		{"base without digest", func(p *pins.Pins) { p.Base.Digest = "" }, "base: digest"},
		{"base reference with digest", func(p *pins.Pins) { p.Base.Reference += "@sha256:" + hex64('b') }, "must not carry a digest"},
		{"Debian package range", func(p *pins.Pins) { p.Base.Packages[0].Version = ">= 0.19" }, "name=exact-version"},
		{"node version with v", func(p *pins.Pins) { p.Node.Version = "v22.23.5" }, "MAJOR.MINOR.PATCH"},
		{"node package of another version", func(p *pins.Pins) { p.Node.Packages[1].Version = "22.23.4" }, "want 22.23.5"},
		{"npm not npm", func(p *pins.Pins) { p.Node.NPM.Name = "yarn" }, "want npm"},
		{"bridge binary path", func(p *pins.Pins) { p.Bridge.Binary = "bin/box-bridge" }, "not a file name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base.Clone()
			tt.mutate(p)
			err := p.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error containing %q", tt.wantErr)
			case tt.wantErr != "" && (!errors.Is(err, pins.ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want ErrInvalid containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParse(t *testing.T) {
	data, err := os.ReadFile(pins.DataFile)
	if err != nil {
		t.Fatal(err)
	}
	locks := map[string][]byte{}
	for _, n := range []string{"claude-code", "codex", "pi", "opencode", "gemini"} {
		if locks[n], err = os.ReadFile(filepath.Join(pins.LockDir, n+".json")); err != nil {
			t.Fatal(err)
		}
	}
	replace := func(old, new string) []byte {
		if !bytes.Contains(data, []byte(old)) {
			t.Fatalf("fixture lacks %q", old)
		}
		return bytes.Replace(data, []byte(old), []byte(new), 1)
	}
	tests := []struct {
		name    string
		data    []byte
		locks   map[string][]byte
		wantErr string
	}{
		{"repository data", data, locks, ""},
		{"unknown field", replace(`"proven": false`, `"proven": false, "trusted": true`), locks, `unknown field "trusted"`},
		{"bridge version stored", replace(`"binary": "box-bridge",`, `"binary": "box-bridge", "version": "v1",`), locks, "must not be stored"},
		{"trailing data", append(append([]byte{}, data...), "{}"...), locks, "trailing data"},
		{"missing lock", data, map[string][]byte{"pi": locks["pi"]}, "harness claude-code: no lock"},
		{"lock with unknown field", data, map[string][]byte{"pi": []byte(`{"packages":{},"extra":1}`)}, `unknown field "extra"`},
		{"harness without integrity", replace(`"integrity": "sha512-zX1BVEsshx7A2MRuQ6jfr3RJGWw4Wn+vLq5ZfmlvS1RskhRmByaSZVXH/zcwRrWHO7qPgs98pNCbPOEti/t0fQ=="`,
			`"integrity": ""`), locks, "harness pi: package @earendil-works/pi-coding-agent@1.6.0: integrity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pins.Parse(tt.data, tt.locks)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestPins_Select(t *testing.T) {
	p, err := pins.LoadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	proven := p.Clone()
	proven.Harnesses[2].Proven = true // pi
	names := func(hs []pins.Harness) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return out
	}
	tests := []struct {
		name    string
		p       *pins.Pins
		in      []string
		want    []string
		wantErr error
	}{
		{"backend key and name, pins order", p, []string{"pi", "claude"}, []string{"claude-code", "pi"}, nil},
		{"repeated", p, []string{"codex", "codex"}, []string{"codex"}, nil},
		{"unknown", p, []string{"cursor"}, nil, pins.ErrUnknownHarness},
		{"default is the proven ones", proven, nil, []string{"pi"}, nil},
		{"none proven", p, nil, nil, pins.ErrNoHarness},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.p.Select(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Select(%q) error = %v, want %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, names(got)); diff != "" {
				t.Errorf("Select(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseBase(t *testing.T) {
	digest := "sha256:" + hex64('c')
	got, err := pins.ParseBase("localhost:5000/boxctl/base@" + digest)
	if err != nil || got.Reference != "localhost:5000/boxctl/base" || got.Digest != digest {
		t.Errorf("ParseBase() = %+v, %v", got, err)
	}
	for _, bad := range []string{"localhost:5000/boxctl/base:latest", "x@sha256:abc", "@" + digest} {
		if _, err := pins.ParseBase(bad); err == nil {
			t.Errorf("ParseBase(%q) = nil error, want one", bad)
		}
	}
}
