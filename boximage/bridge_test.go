package boximage

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeELF writes a minimal 64-bit little-endian ELF executable header for
// machine at path: with a PT_INTERP program header naming interp when
// interp is not "" (a dynamically linked binary), else with none.
func writeELF(t *testing.T, path string, machine elf.Machine, interp string) {
	t.Helper()
	const ehsize, phentsize = 64, 56
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Ehsize: ehsize, Phentsize: phentsize,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var progs []elf.Prog64
	if interp != "" {
		h.Phoff, h.Phnum = ehsize, 1
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R),
			Off: ehsize + phentsize, Filesz: uint64(len(interp) + 1), Memsz: uint64(len(interp) + 1), Align: 1})
	}
	var b bytes.Buffer
	if err := binary.Write(&b, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		if err := binary.Write(&b, binary.LittleEndian, p); err != nil {
			t.Fatal(err)
		}
	}
	if interp != "" {
		b.WriteString(interp + "\x00")
	}
	if err := os.WriteFile(path, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestBridgeBinary(t *testing.T) {
	host := "linux/" + runtime.GOARCH
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	type file struct {
		name    string
		machine elf.Machine
		interp  string // "" static
		script  bool   // a shell script, not ELF
	}
	hostBridge := file{name: BridgeFile, machine: elfMachines[runtime.GOARCH]}
	tests := []struct {
		name     string
		files    []file // in the executable's directory
		flag     string // --bridge, a name among files
		platform string
		want     string // the file picked
		wantErr  *BridgeError
	}{
		{name: "no platform: box-bridge for this machine", files: []file{hostBridge}, want: BridgeFile},
		{name: "platform's own name first", platform: "linux/arm64",
			files: []file{hostBridge, {name: "box-bridge-linux-arm64", machine: elf.EM_AARCH64},
				{name: "box-bridge-linux-amd64", machine: elf.EM_X86_64}},
			want: "box-bridge-linux-arm64"},
		{name: "aarch64 is arm64", platform: "linux/aarch64",
			files: []file{{name: "box-bridge-linux-arm64", machine: elf.EM_AARCH64}}, want: "box-bridge-linux-arm64"},
		{name: "platform with variant", platform: "linux/arm64/v8",
			files: []file{{name: "box-bridge", machine: elf.EM_AARCH64}}, want: "box-bridge"},
		{name: "--bridge over the directory", platform: "linux/amd64",
			files: []file{{name: "box-bridge-linux-amd64", machine: elf.EM_X86_64}, {name: "mine", machine: elf.EM_X86_64}},
			flag:  "mine", want: "mine"},
		{name: "box-bridge of another architecture", platform: "linux/" + other, files: []file{hostBridge},
			wantErr: &BridgeError{Platform: "linux/" + other, Path: BridgeFile,
				Problem: "is for " + runtime.GOARCH + ", not " + other}},
		{name: "--bridge of another architecture", platform: "linux/arm64",
			files: []file{{name: "box-bridge-linux-arm64", machine: elf.EM_AARCH64}, {name: "x", machine: elf.EM_X86_64}},
			flag:  "x", wantErr: &BridgeError{Platform: "linux/arm64", Path: "x", Problem: "is for amd64, not arm64"}},
		{name: "dynamically linked", files: []file{{name: BridgeFile, machine: elfMachines[runtime.GOARCH],
			interp: "/lib64/ld-linux-x86-64.so.2"}},
			wantErr: &BridgeError{Platform: host, Path: BridgeFile, Problem: "is dynamically linked: build it with CGO_ENABLED=0"}},
		{name: "not ELF", files: []file{{name: BridgeFile, script: true}},
			wantErr: &BridgeError{Platform: host, Path: BridgeFile, Problem: "is not a Linux executable (no ELF header)"}},
		{name: "none", platform: "linux/arm64", wantErr: &BridgeError{Platform: "linux/arm64",
			Searched: []string{"box-bridge-linux-arm64", "box-bridge"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				p := filepath.Join(dir, f.name)
				if f.script {
					if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				writeELF(t, p, f.machine, f.interp)
			}
			flag := ""
			if tt.flag != "" {
				flag = filepath.Join(dir, tt.flag)
			}
			got, err := bridgeBinary(flag, tt.platform, []string{dir})
			if tt.wantErr == nil {
				if err != nil || got != filepath.Join(dir, tt.want) {
					t.Fatalf("bridgeBinary(%q, %q) = %q, %v, want %s", flag, tt.platform, got, err, tt.want)
				}
				return
			}
			var se *SourceError
			var be *BridgeError
			if !errors.As(err, &se) || !errors.As(err, &be) {
				t.Fatalf("bridgeBinary(%q, %q) = %q, %v, want a *BridgeError in a *SourceError", flag, tt.platform, got, err)
			}
			rel := func(p string) string { return strings.TrimPrefix(p, dir+string(filepath.Separator)) }
			gotErr := &BridgeError{Platform: be.Platform, Path: rel(be.Path), Problem: be.Problem}
			for _, s := range be.Searched {
				gotErr.Searched = append(gotErr.Searched, rel(s))
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("bridgeBinary(%q, %q) error (-want +got):\n%s", flag, tt.platform, diff)
			}
			if !strings.Contains(err.Error(), "--bridge PATH") {
				t.Errorf("error %q does not say how to pass a bridge", err)
			}
		})
	}
}

func TestBridgeBinary_Platform(t *testing.T) {
	for _, platform := range []string{"linux/amd64,linux/arm64", "windows/amd64", "linux/mips", "linux//"} {
		t.Run(platform, func(t *testing.T) {
			_, err := bridgeBinary("", platform, []string{t.TempDir()})
			var se *SourceError
			var be *BridgeError
			if !errors.As(err, &se) || errors.As(err, &be) || !strings.Contains(err.Error(), "--platform") {
				t.Fatalf("bridgeBinary(%q) = %v, want a *SourceError about --platform", platform, err)
			}
		})
	}
}
