package npmtest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		spec, name, version string
		wantErr             bool
	}{
		{"@anthropic-ai/claude-code@2.1.332", "@anthropic-ai/claude-code", "2.1.332", false},
		{"left-pad@1.3.0", "left-pad", "1.3.0", false},
		{"@scope/pkg@1.0.0-rc.1", "@scope/pkg", "1.0.0-rc.1", false},
		{"@openai/codex@^0.171.0", "", "", true},
		{"@openai/codex@latest", "", "", true},
		{"@openai/codex", "", "", true},
		{"left-pad", "", "", true},
		{"left-pad@1.3", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			name, version, err := ParseSpec(tt.spec)
			if (err != nil) != tt.wantErr || name != tt.name || version != tt.version {
				t.Errorf("ParseSpec(%q) = %q, %q, %v; want %q, %q, error %v", tt.spec, name, version, err, tt.name, tt.version, tt.wantErr)
			}
		})
	}
}

func TestInstalledVersion(t *testing.T) {
	prefix := t.TempDir()
	dir := filepath.Join(prefix, "lib", "node_modules", "@scope", "pkg")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"@scope/pkg","version":"1.2.3"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := InstalledVersion(prefix, "@scope/pkg"); err != nil || got != "1.2.3" {
		t.Errorf("InstalledVersion() = %q, %v; want 1.2.3", got, err)
	}
	if _, err := InstalledVersion(prefix, "missing"); err == nil {
		t.Error("InstalledVersion(missing) = nil error, want one")
	}
}

func TestPackage_PATH(t *testing.T) {
	p := Package{Prefix: "/p", NodeBin: "/node/bin"}
	if got, want := p.PATH(), "/p/bin:/node/bin:/usr/local/bin:/usr/bin:/bin"; got != want {
		t.Errorf("PATH() = %q, want %q", got, want)
	}
	if got := p.Bin("claude"); got != "/p/bin/claude" {
		t.Errorf("Bin() = %q", got)
	}
}
