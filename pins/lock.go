package pins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/internal/npmlock"
)

// Lock is a harness's resolved npm dependency tree: the "packages" section
// of a lockfileVersion 3 package-lock.json without its root entry. Keys are
// install paths ("node_modules/a", "node_modules/a/node_modules/b"); values
// are npm's entries, kept verbatim so that nothing npm recorded is lost.
type Lock struct {
	// Packages maps install paths to npm lock entries.
	Packages map[string]json.RawMessage `json:"packages"`
}

// LockEntry is the part of an npm lock entry that pinning relies on.
type LockEntry struct {
	// Name is set when the entry is an alias of another package.
	Name string `json:"name,omitempty"`
	// Version is the exact version installed.
	Version string `json:"version"`
	// Resolved is the tarball URL.
	Resolved string `json:"resolved"`
	// Integrity is the tarball's SRI hash.
	Integrity string `json:"integrity"`
	// Link marks a symlink to a local folder, which a pinned tree refuses.
	Link bool `json:"link,omitempty"`
	// Optional marks a dependency npm may skip (another platform's binary).
	Optional bool `json:"optional,omitempty"`
}

// ParseLock decodes a lock file and checks every entry: an install path
// under node_modules/, an exact version, an http(s) resolved URL and an
// integrity hash. It does not compare the lock with a harness; Validate does.
func ParseLock(data []byte) (*Lock, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("decode lock: %w", err)
	}
	if err := l.check(); err != nil {
		return nil, err
	}
	return &l, nil
}

// LockFromPackageLock extracts a Lock from a whole package-lock.json as npm
// writes it (lockfileVersion 2 or 3), dropping the root entry.
func LockFromPackageLock(data []byte) (*Lock, error) {
	var pl struct {
		LockfileVersion int                        `json:"lockfileVersion"`
		Packages        map[string]json.RawMessage `json:"packages"`
	}
	if err := json.Unmarshal(data, &pl); err != nil {
		return nil, fmt.Errorf("decode package-lock.json: %w", err)
	}
	if pl.LockfileVersion < 2 {
		return nil, fmt.Errorf("package-lock.json: lockfileVersion %d has no packages section; want 3", pl.LockfileVersion)
	}
	delete(pl.Packages, "")
	l := &Lock{Packages: map[string]json.RawMessage{}}
	for k, v := range pl.Packages {
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, fmt.Errorf("package-lock.json: %s: %w", k, err)
		}
		l.Packages[k] = buf.Bytes()
	}
	if err := l.check(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Lock) check() error {
	if len(l.Packages) == 0 {
		return errors.New("lock has no packages")
	}
	var errs []error
	for _, k := range l.Paths() {
		if _, err := l.Entry(k); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Paths returns the install paths in sorted order.
func (l *Lock) Paths() []string {
	return slices.Sorted(maps.Keys(l.Packages))
}

// Entry decodes and checks the entry at an install path.
func (l *Lock) Entry(installPath string) (LockEntry, error) {
	raw, ok := l.Packages[installPath]
	if !ok {
		return LockEntry{}, fmt.Errorf("lock: no entry %q", installPath)
	}
	var e LockEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return LockEntry{}, fmt.Errorf("lock: %s: %w", installPath, err)
	}
	if !strings.HasPrefix(installPath, "node_modules/") || strings.HasSuffix(installPath, "/") {
		return e, fmt.Errorf("lock: %s: install path must be under node_modules/", installPath)
	}
	if e.Link {
		return e, fmt.Errorf("lock: %s: links to local folders are not pinnable", installPath)
	}
	if e.Version == "" {
		return e, fmt.Errorf("lock: %s: no version", installPath)
	}
	if u, err := url.Parse(e.Resolved); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return e, fmt.Errorf("lock: %s: resolved %q is not a registry URL", installPath, e.Resolved)
	}
	if !validLockIntegrity(e.Integrity) {
		return e, fmt.Errorf("lock: %s: integrity %q is not an SRI hash", installPath, e.Integrity)
	}
	return e, nil
}

// PackageName returns the npm package an entry installs: its alias target
// when it has one, else the last package of its install path.
func (e LockEntry) PackageName(installPath string) string {
	if e.Name != "" {
		return e.Name
	}
	_, name, _ := strings.Cut(installPath[strings.LastIndex(installPath, "node_modules/"):], "node_modules/")
	return name
}

// Marshal renders the lock file: sorted keys, two-space indent, final newline.
func (l *Lock) Marshal() ([]byte, error) {
	if l == nil {
		return nil, errors.New("no lock")
	}
	return npmlock.Marshal(l)
}

// matches checks that the lock installs pkg at the top level as described.
func (l *Lock) matches(top Package) error {
	p := "node_modules/" + top.DependencyName()
	e, err := l.Entry(p)
	if err != nil {
		return err
	}
	if name := e.PackageName(p); name != top.Name {
		return fmt.Errorf("lock: %s installs %s, pinned %s", p, name, top.Name)
	}
	if e.Version != top.Version {
		return fmt.Errorf("lock: %s is version %s, pinned %s", p, e.Version, top.Version)
	}
	if e.Integrity != top.Integrity {
		return fmt.Errorf("lock: %s integrity %s differs from the pinned %s", p, e.Integrity, top.Integrity)
	}
	return nil
}
