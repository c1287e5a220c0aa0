package boximage_test

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tangle-network/boxctl/boximage"
)

func TestPrepare_File(t *testing.T) {
	dir := t.TempDir()
	df := filepath.Join(dir, "Dockerfile")
	if err := os.WriteFile(df, []byte("FROM scratch\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := boximage.Prepare(boximage.Source{File: df})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if string(p.Dockerfile) != "FROM scratch\n" || p.ContextDir != dir || p.Pins != nil {
		t.Fatalf("Prepare = %+v, want the file and its directory", p)
	}
}

func TestPrepare_Refusals(t *testing.T) {
	tests := []struct {
		name string
		src  boximage.Source
	}{
		{"unknown harness", boximage.Source{Harnesses: []string{"nope"}}},
		{"malformed base", boximage.Source{Harnesses: []string{"claude-code"}, Base: "::"}},
		{"no bridge binary", boximage.Source{Harnesses: []string{"claude-code"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := boximage.Prepare(tt.src)
			var se *boximage.SourceError
			if !errors.As(err, &se) {
				if p != nil {
					p.Close()
				}
				t.Fatalf("Prepare(%+v) = %v, want a *SourceError", tt.src, err)
			}
		})
	}
	bridge := filepath.Join(t.TempDir(), "box-bridge")
	boximage.WriteELF(t, bridge, elf.EM_AARCH64, "")
	p, err := boximage.Prepare(boximage.Source{Harnesses: []string{"claude-code"}, Bridge: bridge, Platform: "linux/arm64"})
	if err != nil {
		t.Fatal(err)
	}
	dir := p.ContextDir
	if _, err := os.Stat(filepath.Join(dir, boximage.BridgeFile)); err != nil || len(p.Harnesses) != 1 || p.Pins == nil {
		t.Fatalf("rendered context: %v, harnesses %v", err, p.Harnesses)
	}
	p.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Close left %s: %v", dir, err)
	}
}
