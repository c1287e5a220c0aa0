// Package buildinfo holds the version and commit stamped into boxctl's
// binaries at build time.
//
// The Makefile sets both with -ldflags "-X ...". A binary built without them
// (go run, go test, go install) falls back to the module version and the VCS
// revision that the Go toolchain records, so a version is never empty.
package buildinfo

import (
	"runtime/debug"
	"sync"
)

// These are set by the linker; see the Makefile.
var (
	version string
	commit  string
)

// Info is what a binary knows of its own build.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Modified reports a build from a work tree with uncommitted changes,
	// when the toolchain recorded it.
	Modified bool `json:"modified,omitempty"`
}

var (
	once sync.Once
	info Info
)

// Get returns the binary's build information.
func Get() Info {
	once.Do(func() { info = resolve(version, commit, readBuildInfo) })
	return info
}

func readBuildInfo() (*debug.BuildInfo, bool) { return debug.ReadBuildInfo() }

func resolve(v, c string, read func() (*debug.BuildInfo, bool)) Info {
	out := Info{Version: v, Commit: c}
	if bi, ok := read(); ok {
		if out.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			out.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if out.Commit == "" {
					out.Commit = s.Value
				}
			case "vcs.modified":
				out.Modified = s.Value == "true"
			}
		}
	}
	if out.Version == "" {
		out.Version = "dev"
	}
	if out.Commit == "" {
		out.Commit = "unknown"
	}
	return out
}

// String renders the information as "VERSION (COMMIT)".
func (i Info) String() string {
	c := i.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if i.Modified {
		c += "-dirty"
	}
	return i.Version + " (" + c + ")"
}
