package pins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Locker resolves the complete dependency tree of npm packages at exact
// versions.
type Locker interface {
	// Lock returns the tree npm would install for deps (package name to
	// exact version) alone. It must stop and return ctx's error when ctx
	// ends.
	Lock(ctx context.Context, deps map[string]string) (*Lock, error)
}

// NPMLocker is a Locker that runs `npm install --package-lock-only` in a
// scratch directory: npm resolves the tree against the registry and writes
// a package-lock.json without downloading tarballs or running scripts.
type NPMLocker struct {
	// NPM is the npm executable. Default: "npm" from PATH.
	NPM string
	// Registry is passed to npm as --registry. Default: npm's own setting.
	Registry string
	// Stderr receives npm's output. Default: discarded, but quoted in errors.
	Stderr io.Writer
}

var _ Locker = NPMLocker{}

// Lock implements Locker.
func (l NPMLocker) Lock(ctx context.Context, deps map[string]string) (*Lock, error) {
	specs := make([]string, 0, len(deps))
	for _, name := range slices.Sorted(maps.Keys(deps)) {
		specs = append(specs, name+"@"+deps[name])
	}
	what := strings.Join(specs, " ")
	npm := l.NPM
	if npm == "" {
		npm = "npm"
	}
	dir, err := os.MkdirTemp("", "boxctl-lock-*")
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	defer os.RemoveAll(dir)
	manifest, err := json.Marshal(map[string]any{
		"name": "boxctl-lock", "version": "0.0.0", "private": true,
		"dependencies": deps,
	})
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), manifest, 0o644); err != nil {
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	args := []string{"install", "--package-lock-only", "--ignore-scripts", "--lockfile-version=3",
		// A user's .npmrc may drop resolved URLs; a pinned tree keeps them.
		"--omit-lockfile-registry-resolved=false",
		"--no-audit", "--no-fund", "--no-update-notifier", "--loglevel=warn"}
	if l.Registry != "" {
		args = append(args, "--registry="+l.Registry)
	}
	cmd := exec.CommandContext(ctx, npm, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if l.Stderr != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, l.Stderr), io.MultiWriter(&out, l.Stderr)
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lock %s: %w", what, ctx.Err())
		}
		return nil, fmt.Errorf("lock %s: npm: %w: %s", what, err, tail(out.String(), 800))
	}
	data, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	lock, err := LockFromPackageLock(data)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	return lock, nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// Bump returns a copy of p in which the named harness (name or backend key)
// is at version (a version or dist-tag; empty means "latest"): version and
// integrity from the registry, the same platform packages at the versions
// the new release depends on, a freshly resolved lock, a version pattern
// naming the new version, the packages released with it (With) at its
// version, and proven set to false. p is left unchanged.
func Bump(ctx context.Context, p *Pins, name, version string, reg *Registry, locker Locker) (*Pins, error) {
	out := p.Clone()
	h, ok := out.Harness(name)
	if !ok {
		return nil, fmt.Errorf("bump: %w", &UnknownHarnessError{Name: name, Known: p.HarnessNames()})
	}
	if version == "" {
		version = "latest"
	}
	m, err := reg.Manifest(ctx, h.Package, version)
	if err != nil {
		return nil, fmt.Errorf("bump %s: %w", h.Name, err)
	}
	if !exactVerRE.MatchString(m.Version) {
		return nil, fmt.Errorf("bump %s: registry version %q is not exact", h.Name, m.Version)
	}
	if err := validateIntegrity(m.Dist.Integrity); err != nil {
		return nil, fmt.Errorf("bump %s: %s@%s: %w", h.Name, h.Package, m.Version, err)
	}
	platforms := make([]Package, 0, len(h.Platforms))
	for _, old := range h.Platforms {
		pkg, err := bumpPlatform(ctx, reg, m, old)
		if err != nil {
			return nil, fmt.Errorf("bump %s: %w", h.Name, err)
		}
		platforms = append(platforms, pkg)
	}
	deps := map[string]string{h.Package: m.Version}
	with := make([]Package, 0, len(h.With))
	for _, old := range h.With {
		// A package released with the CLI moves to the CLI's new version.
		wm, err := reg.Manifest(ctx, old.Name, m.Version)
		if err != nil {
			return nil, fmt.Errorf("bump %s: with %s: %w", h.Name, old.Name, err)
		}
		with = append(with, Package{Name: old.Name, Version: wm.Version, Integrity: wm.Dist.Integrity})
		deps[old.Name] = wm.Version
	}
	lock, err := locker.Lock(ctx, deps)
	if err != nil {
		return nil, fmt.Errorf("bump %s: %w", h.Name, err)
	}
	h.VersionPattern = strings.ReplaceAll(h.VersionPattern, regexp.QuoteMeta(h.Version), regexp.QuoteMeta(m.Version))
	h.Version, h.Integrity, h.Platforms, h.Lock, h.Proven = m.Version, m.Dist.Integrity, platforms, lock, false
	if len(with) > 0 {
		h.With = with
	}
	h.ProvenBy = nil // the proofs were of the old version
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("bump %s: %w", h.Name, err)
	}
	return out, nil
}

// bumpPlatform finds what the new release m depends on under the old
// platform package's dependency name, and fetches its integrity.
func bumpPlatform(ctx context.Context, reg *Registry, m *Manifest, old Package) (Package, error) {
	dep := old.DependencyName()
	spec, ok := m.OptionalDependencies[dep]
	if !ok {
		spec, ok = m.Dependencies[dep]
	}
	if !ok {
		return Package{}, fmt.Errorf("%s@%s no longer depends on platform package %s", m.Name, m.Version, dep)
	}
	pkg := Package{Platform: old.Platform, Dependency: old.Dependency, Name: dep, Version: spec}
	if alias, ok := strings.CutPrefix(spec, "npm:"); ok {
		at := strings.LastIndex(alias, "@")
		if at <= 0 {
			return Package{}, fmt.Errorf("%s: alias %q has no version", dep, spec)
		}
		pkg.Name, pkg.Version = alias[:at], alias[at+1:]
	}
	if !exactVerRE.MatchString(pkg.Version) {
		return Package{}, fmt.Errorf("%s@%s depends on %s at %q, not an exact version", m.Name, m.Version, dep, spec)
	}
	pm, err := reg.Manifest(ctx, pkg.Name, pkg.Version)
	if err != nil {
		return Package{}, err
	}
	pkg.Integrity = pm.Dist.Integrity
	if err := pkg.validate(); err != nil {
		return Package{}, err
	}
	return pkg, nil
}
