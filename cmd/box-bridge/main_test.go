package main

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
)

// TestMain gives the built binary a scratch directory removed at the end.
func TestMain(m *testing.M) { boxbridgetest.Main(m) }

// TestBinary_StaticAndVersion checks that box-bridge is a static binary
// that runs anywhere, as the Makefile builds it (CGO off) and as a plain
// `go install` builds it on a machine with a C compiler (cgo on: net and
// os/user then link the C library, and static_cgo.go links it statically).
func TestBinary_StaticAndVersion(t *testing.T) {
	tests := []struct {
		name  string
		build func(t *testing.T) string
	}{
		{"CGO off", func(t *testing.T) string { return boxbridgetest.Build(t) }},
		{"go install with cgo", goInstallCgo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := tt.build(t)
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Error("box-bridge has an ELF interpreter: it is not static")
				}
			}
			if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
				t.Errorf("box-bridge needs shared libraries %v (%v): it is not static", libs, err)
			}
			fi, _ := os.Stat(bin)
			if fi.Size() > 40<<20 {
				t.Errorf("box-bridge is %d bytes, want under 40 MiB", fi.Size())
			}
			out, err := exec.Command(bin, "-version").Output()
			if err != nil || !strings.HasPrefix(string(out), "box-bridge ") {
				t.Errorf("box-bridge -version = %q, %v", out, err)
			}
		})
	}
}

// goInstallCgo installs box-bridge with `go install` and cgo on into a
// temporary GOBIN, after checking that cgo is really linked in.
func goInstallCgo(t *testing.T) string {
	env := append(os.Environ(), "CGO_ENABLED=1")
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Env = env
	deps, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	if !slices.Contains(strings.Fields(string(deps)), "runtime/cgo") {
		t.Fatal("box-bridge does not link runtime/cgo with CGO_ENABLED=1: this case tests nothing")
	}
	gobin := t.TempDir()
	cmd = exec.Command("go", "install", ".")
	cmd.Env = append(env, "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	return filepath.Join(gobin, "box-bridge")
}

func TestRun_Config(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{"non-loopback without bearer", []string{"-host", "0.0.0.0"}, nil, "non-loopback"},
		{"env host without bearer", nil, map[string]string{"BRIDGE_HOST": "10.1.2.3"}, "non-loopback"},
		{"unknown backend", nil, map[string]string{"BRIDGE_BACKENDS": "claude,nope"}, "unknown"},
		{"bad port env", nil, map[string]string{"BRIDGE_PORT": "x"}, "usage"},
		{"bad flag", []string{"-nope"}, nil, "usage"},
		{"bad log level", []string{"-log-level", "loud"}, nil, "usage"},
		{"bad crash bound", []string{"-supervise"}, map[string]string{"BRIDGE_MAX_CRASHES": "x"}, "BRIDGE_MAX_CRASHES"},
		{"bad crash window", []string{"-supervise"}, map[string]string{"BRIDGE_CRASH_WINDOW_MS": "-1"}, "BRIDGE_CRASH_WINDOW_MS"},
		{"standby without a pool token", []string{"-standby"}, nil, "no pool token"},
		{"standby supervised", []string{"-standby", "-supervise"}, nil, "unsupervised"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			var out, errOut bytes.Buffer
			err := run(context.Background(), append(tt.args, "-data-dir", t.TempDir()), getenv, strings.NewReader(""), &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run(%v) = %v, want an error containing %q", tt.args, err, tt.wantErr)
			}
		})
	}
}
