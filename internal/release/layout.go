package release

import (
	"fmt"
	"path"
)

// Platform is a GOOS and GOARCH pair.
type Platform struct {
	OS, Arch string
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Build is one binary: a main package built for a platform.
type Build struct {
	// Package is the main package's path relative to the module root
	// ("./cmd/boxctl").
	Package  string
	Platform Platform
}

func (b Build) String() string { return path.Base(b.Package) + " " + b.Platform.String() }

// Entry is one file in an archive: a built binary, or a file of the module.
type Entry struct {
	// Name is the file's name inside the archive's top directory.
	Name string
	// Build is the binary the entry holds, unless File is set.
	Build Build
	// File is a file of the module (relative to its root) the entry holds.
	File string
}

// Archive is one tar.gz file: Name.tar.gz holding the directory Name/
// with Entries.
type Archive struct {
	Name    string
	Entries []Entry
}

// Platforms are boxctl's released platforms.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// BridgeArchs are box-bridge's released Linux architectures.
var BridgeArchs = []string{"amd64", "arm64"}

// BridgeName is the name of the box-bridge for a Linux architecture in
// boxctl's archives: the name `boxctl build` looks for beside boxctl
// (boximage.BridgeName; cmd/boxctl's tests hold the two the same).
func BridgeName(arch string) string { return "box-bridge-linux-" + arch }

// Layout is the release of version: per platform of Platforms, an archive
// boxctl_VERSION_OS_ARCH of boxctl, README.md and a box-bridge per arch of
// BridgeArchs named BridgeName(arch); per arch of BridgeArchs, an archive
// box-bridge_VERSION_linux_ARCH of box-bridge alone.
func Layout(version string) []Archive {
	var out []Archive
	for _, p := range Platforms {
		a := Archive{Name: fmt.Sprintf("boxctl_%s_%s_%s", version, p.OS, p.Arch), Entries: []Entry{
			{Name: "boxctl", Build: Build{"./cmd/boxctl", p}},
			{Name: "README.md", File: "README.md"},
		}}
		for _, arch := range BridgeArchs {
			a.Entries = append(a.Entries, Entry{Name: BridgeName(arch), Build: Build{"./cmd/box-bridge", Platform{"linux", arch}}})
		}
		out = append(out, a)
	}
	for _, arch := range BridgeArchs {
		out = append(out, Archive{Name: fmt.Sprintf("box-bridge_%s_linux_%s", version, arch), Entries: []Entry{
			{Name: "box-bridge", Build: Build{"./cmd/box-bridge", Platform{"linux", arch}}},
		}})
	}
	return out
}
