package boximage

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tangle-network/boxctl/pins"
)

// RenderLockfile renders the package.json and package-lock.json that install
// one harness with `npm ci` under its own prefix (HarnessRoot/<name>). The
// package.json depends on the exact pinned version; the lock is
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
	type manifest struct {
		Name         string            `json:"name"`
		Version      string            `json:"version"`
		Private      bool              `json:"private"`
		Dependencies map[string]string `json:"dependencies"`
	}
	root := manifest{Name: name, Version: "0.0.0", Private: true, Dependencies: deps}
	if packageJSON, err = marshal(root); err != nil {
		return nil, nil, fmt.Errorf("lockfile %s: %w", h.Name, err)
	}

	type rootEntry struct {
		Name         string            `json:"name"`
		Version      string            `json:"version"`
		Dependencies map[string]string `json:"dependencies"`
	}
	rootRaw, err := json.Marshal(rootEntry{Name: name, Version: "0.0.0", Dependencies: deps})
	if err != nil {
		return nil, nil, fmt.Errorf("lockfile %s: %w", h.Name, err)
	}
	packages := make(map[string]json.RawMessage, len(h.Lock.Packages)+1)
	for k, v := range h.Lock.Packages {
		packages[k] = v
	}
	packages[""] = rootRaw
	lock := struct {
		Name            string                     `json:"name"`
		Version         string                     `json:"version"`
		LockfileVersion int                        `json:"lockfileVersion"`
		Requires        bool                       `json:"requires"`
		Packages        map[string]json.RawMessage `json:"packages"`
	}{name, "0.0.0", 3, true, packages}
	if packageLock, err = marshal(lock); err != nil {
		return nil, nil, fmt.Errorf("lockfile %s: %w", h.Name, err)
	}
	return packageJSON, packageLock, nil
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
