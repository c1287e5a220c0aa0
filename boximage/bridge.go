package boximage

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/containerd/platforms"
)

// BridgeName is the file name of the box-bridge binary for a Linux
// architecture ("box-bridge-linux-arm64"): the name release archives give
// each bridge beside boxctl.
func BridgeName(arch string) string { return BridgeFile + "-linux-" + arch }

// elfMachines maps Go architectures to the ELF machine of their binaries.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"386":     elf.EM_386,
	"arm":     elf.EM_ARM,
	"riscv64": elf.EM_RISCV,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"loong64": elf.EM_LOONGARCH,
}

// BridgeError is a box-bridge binary a build cannot use: none for the
// build's platform beside boxctl, or one that is not a static Linux
// executable for the platform's architecture. Prepare returns it inside a
// SourceError.
type BridgeError struct {
	// Platform is the platform the bridge is for ("linux/arm64").
	Platform string
	// Path is the binary looked at; "" when none was found.
	Path string
	// Searched lists the paths looked at when none was found.
	Searched []string
	// Problem says what is wrong with the binary at Path.
	Problem string
}

func (e *BridgeError) Error() string {
	if e.Path == "" {
		arch := platformArch(e.Platform)
		return fmt.Sprintf("no box-bridge for %s beside boxctl (looked for %s): pass --bridge PATH, or put %s "+
			"beside boxctl (release archives hold it; from source: CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o %s ./cmd/box-bridge)",
			e.Platform, strings.Join(e.Searched, ", "), BridgeName(arch), arch, BridgeName(arch))
	}
	return fmt.Sprintf("box-bridge %s %s: the build for %s needs a static Linux %s binary "+
		"(pass --bridge PATH or --platform)", e.Path, e.Problem, e.Platform, platformArch(e.Platform))
}

// platformArch is the architecture of an "os/arch" platform.
func platformArch(platform string) string {
	_, arch, _ := strings.Cut(platform, "/")
	arch, _, _ = strings.Cut(arch, "/")
	return arch
}

// bridgePlatform is the Linux platform a build's bridge must run on:
// platform parsed and normalized ("linux/aarch64" is "linux/arm64"), or
// the machine's own architecture when platform is "" (BuildKit's default
// on a local engine).
func bridgePlatform(platform string) (string, error) {
	if platform == "" {
		return "linux/" + runtime.GOARCH, nil
	}
	if strings.Contains(platform, ",") {
		return "", fmt.Errorf("--platform %q: a box image holds one bridge binary: build one platform at a time", platform)
	}
	p, err := platforms.Parse(platform)
	if err != nil {
		return "", fmt.Errorf("--platform: %w", err)
	}
	if p.OS != "linux" {
		return "", fmt.Errorf("--platform %q: boxes run Linux", platform)
	}
	if _, ok := elfMachines[p.Architecture]; !ok {
		return "", fmt.Errorf("--platform %q: no box-bridge for architecture %s", platform, p.Architecture)
	}
	return "linux/" + p.Architecture, nil
}

// bridgeBinary is the box-bridge binary a build for platform copies into
// the image: path, else the first of BridgeName(arch) and BridgeFile in
// dirs (the running executable's, see exeDirs). The binary must be a
// static Linux executable for the platform's architecture.
func bridgeBinary(path, platform string, dirs []string) (string, error) {
	plat, err := bridgePlatform(platform)
	if err != nil {
		return "", &SourceError{err}
	}
	arch := platformArch(plat)
	if path == "" {
		var searched []string
		for _, name := range []string{BridgeName(arch), BridgeFile} {
			for _, dir := range dirs {
				cand := filepath.Join(dir, name)
				searched = append(searched, cand)
				if _, err := os.Stat(cand); err == nil && path == "" {
					path = cand
				}
			}
		}
		if path == "" {
			return "", &SourceError{&BridgeError{Platform: plat, Searched: searched}}
		}
	}
	if problem := checkBridge(path, arch); problem != "" {
		return "", &SourceError{&BridgeError{Platform: plat, Path: path, Problem: problem}}
	}
	return path, nil
}

// exeDirs are the directories of the running executable: where it is
// called from and, when that is a symbolic link, where it lies.
func exeDirs() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	dirs := []string{filepath.Dir(exe)}
	if real, err := filepath.EvalSymlinks(exe); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	return dirs
}

// checkBridge says what keeps the file at path from being a static Linux
// executable for arch, or "" when nothing does.
func checkBridge(path, arch string) string {
	f, err := elf.Open(path)
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			return fmt.Sprintf("cannot be read: %v", pe.Err)
		}
		return "is not a Linux executable (no ELF header)"
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Sprintf("is not an executable (ELF type %s)", f.Type)
	}
	if f.Machine != elfMachines[arch] {
		return fmt.Sprintf("is for %s, not %s", machineArch(f.Machine), arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "is dynamically linked: build it with CGO_ENABLED=0"
		}
	}
	return ""
}

// machineArch names an ELF machine by its Go architecture when it has one.
func machineArch(m elf.Machine) string {
	for arch, em := range elfMachines {
		if em == m {
			return arch
		}
	}
	return m.String()
}
