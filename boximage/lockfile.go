package boximage

import (
	"fmt"

	"github.com/tangle-network/boxctl/internal/npmlock"
	"github.com/tangle-network/boxctl/pins"
)

// RenderLockfile renders the package.json and package-lock.json that install
// one harness with `npm ci` under its own prefix (HarnessRoot/<name>). The
// package.json depends on the exact pinned version, and on the packages
// released with it (Harness.With) at theirs; the lock is
// lockfileVersion 3 with the harness's pinned tree (every entry with its
// resolved URL and integrity) under a root entry that matches package.json,
// so npm ci installs exactly that tree or fails. Keys are sorted and the
// output ends with a newline: the same harness pin gives the same bytes.
func RenderLockfile(h pins.Harness) (packageJSON, packageLock []byte, err error) {
	if h.Lock == nil {
		return nil, nil, fmt.Errorf("lockfile %s: no lock", h.Name)
	}
	name := "boxctl-harness-" + h.Name
	deps := map[string]string{h.Package: h.Version}
	for _, pkg := range h.With {
		deps[pkg.Name] = pkg.Version
	}
	type manifest struct {
		Name         string            `json:"name"`
		Version      string            `json:"version"`
		Private      bool              `json:"private"`
		Dependencies map[string]string `json:"dependencies"`
	}
	root := manifest{Name: name, Version: "0.0.0", Private: true, Dependencies: deps}
	if packageJSON, err = npmlock.Marshal(root); err != nil {
		return nil, nil, fmt.Errorf("lockfile %s: %w", h.Name, err)
	}
	if packageLock, err = npmlock.Lock(name, deps, h.Lock.Packages); err != nil {
		return nil, nil, fmt.Errorf("lockfile %s: %w", h.Name, err)
	}
	return packageJSON, packageLock, nil
}
