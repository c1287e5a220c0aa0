package jssdk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/internal/npmlock"
	"github.com/tangle-network/boxctl/pins"
)

//go:embed pins.json locks
var pinFiles embed.FS

// Pin is one npm package at an exact version.
type Pin struct {
	// Version is the exact version.
	Version string `json:"version"`
	// Integrity is the registry's dist.integrity (sha512 SRI).
	Integrity string `json:"integrity"`
}

// Set is a named set of npm packages installed together.
type Set struct {
	// Name names the set in pins.json (and its lock, locks/<Name>.json).
	Name string
	// Dependencies are the top-level packages by name.
	Dependencies map[string]Pin
	// Lock is the complete resolved tree; nil until a lock is written.
	Lock *pins.Lock
}

type pinsFile struct {
	Sets map[string]struct {
		Dependencies map[string]Pin `json:"dependencies"`
	} `json:"sets"`
}

// Names lists the sets pins.json defines.
func Names() ([]string, error) {
	pf, err := readPins()
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(pf.Sets)), nil
}

func readPins() (pinsFile, error) {
	var pf pinsFile
	data, err := pinFiles.ReadFile("pins.json")
	if err != nil {
		return pf, fmt.Errorf("jssdk pins: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pf); err != nil {
		return pf, fmt.Errorf("jssdk pins: %w", err)
	}
	return pf, nil
}

// Load returns the named set with its lock, checked: every dependency
// exact and with a sha512 integrity, and installed at the top of the lock
// at that version and integrity.
func Load(name string) (Set, error) {
	s, err := loadPins(name)
	if err != nil {
		return s, err
	}
	data, err := pinFiles.ReadFile("locks/" + name + ".json")
	if err != nil {
		return s, fmt.Errorf("jssdk set %s: no lock (run `go test ./internal/jssdk -run TestLocks -update`): %w", name, err)
	}
	if s.Lock, err = pins.ParseLock(data); err != nil {
		return s, fmt.Errorf("jssdk set %s: %w", name, err)
	}
	return s, s.checkLock()
}

func loadPins(name string) (Set, error) {
	pf, err := readPins()
	if err != nil {
		return Set{}, err
	}
	entry, ok := pf.Sets[name]
	if !ok {
		return Set{}, fmt.Errorf("jssdk: no set %q in pins.json", name)
	}
	s := Set{Name: name, Dependencies: entry.Dependencies}
	if len(s.Dependencies) == 0 {
		return s, fmt.Errorf("jssdk set %s: no dependencies", name)
	}
	for pkg, p := range s.Dependencies {
		if !strings.HasPrefix(p.Integrity, "sha512-") {
			return s, fmt.Errorf("jssdk set %s: %s integrity %q is not sha512", name, pkg, p.Integrity)
		}
		if strings.ContainsAny(p.Version, "^~<>=*x |") || p.Version == "" || p.Version == "latest" {
			return s, fmt.Errorf("jssdk set %s: %s version %q is not exact", name, pkg, p.Version)
		}
	}
	return s, nil
}

func (s Set) checkLock() error {
	var errs []error
	for _, pkg := range slices.Sorted(maps.Keys(s.Dependencies)) {
		want := s.Dependencies[pkg]
		e, err := s.Lock.Entry("node_modules/" + pkg)
		switch {
		case err != nil:
			errs = append(errs, err)
		case e.Version != want.Version:
			errs = append(errs, fmt.Errorf("lock has %s@%s, pinned %s", pkg, e.Version, want.Version))
		case e.Integrity != want.Integrity:
			errs = append(errs, fmt.Errorf("lock has %s integrity %s, pinned %s", pkg, e.Integrity, want.Integrity))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("jssdk set %s: %w", s.Name, err)
	}
	return nil
}

// Files renders the package.json and package-lock.json that install the
// set with `npm ci`: exact dependencies, and the lock's tree under a root
// entry that matches package.json. The same set gives the same bytes.
func (s Set) Files() (packageJSON, packageLock []byte, err error) {
	if s.Lock == nil {
		return nil, nil, fmt.Errorf("jssdk set %s: no lock", s.Name)
	}
	name := "boxctl-jssdk-" + s.Name
	deps := map[string]string{}
	for pkg, p := range s.Dependencies {
		deps[pkg] = p.Version
	}
	type manifest struct {
		Name         string            `json:"name"`
		Version      string            `json:"version"`
		Private      bool              `json:"private,omitempty"`
		Type         string            `json:"type,omitempty"`
		Dependencies map[string]string `json:"dependencies"`
	}
	if packageJSON, err = marshal(manifest{Name: name, Version: "0.0.0", Private: true, Type: "module", Dependencies: deps}); err != nil {
		return nil, nil, err
	}
	if packageLock, err = npmlock.Lock(name, deps, s.Lock.Packages); err != nil {
		return nil, nil, fmt.Errorf("jssdk: %w", err)
	}
	return packageJSON, packageLock, nil
}

// Key is the content address of an installation of the set with a Node
// of nodeVersion: a hash of the rendered files and the version.
func (s Set) Key(nodeVersion string) (string, error) {
	pj, pl, err := s.Files()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, b := range [][]byte{pj, pl, []byte(nodeVersion)} {
		fmt.Fprintf(h, "%d\n", len(b))
		h.Write(b)
	}
	return s.Name + "-" + hex.EncodeToString(h.Sum(nil))[:24], nil
}

// Relock resolves the set's dependencies against the registry with npm
// (`npm install --package-lock-only`, no tarballs fetched, no scripts run)
// and returns the resolved tree. npm is the npm executable; cache its cache
// directory.
func Relock(ctx context.Context, npm, cache string, s Set) (*pins.Lock, error) {
	dir, err := os.MkdirTemp("", "boxctl-jssdk-lock-*")
	if err != nil {
		return nil, fmt.Errorf("relock %s: %w", s.Name, err)
	}
	defer os.RemoveAll(dir)
	deps := map[string]string{}
	for pkg, p := range s.Dependencies {
		deps[pkg] = p.Version
	}
	pj, err := marshal(map[string]any{"name": "boxctl-jssdk-" + s.Name, "version": "0.0.0", "private": true, "dependencies": deps})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), pj, 0o644); err != nil {
		return nil, fmt.Errorf("relock %s: %w", s.Name, err)
	}
	cmd := exec.CommandContext(ctx, npm, "install", "--package-lock-only", "--ignore-scripts", "--lockfile-version=3",
		"--omit-lockfile-registry-resolved=false",
		"--no-audit", "--no-fund", "--no-update-notifier", "--loglevel=warn", "--cache", cache)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(npm)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("relock %s: npm: %w\n%s", s.Name, err, tail(out.String(), 4000))
	}
	data, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return nil, fmt.Errorf("relock %s: %w", s.Name, err)
	}
	l, err := pins.LockFromPackageLock(data)
	if err != nil {
		return nil, fmt.Errorf("relock %s: %w", s.Name, err)
	}
	return l, nil
}

func marshal(v any) ([]byte, error) {
	b, err := npmlock.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("jssdk: %w", err)
	}
	return b, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
