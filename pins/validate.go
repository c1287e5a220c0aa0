package pins

import (
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var (
	digestRE    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	nodeVerRE   = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	exactVerRE  = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	nameRE      = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	npmNameRE   = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)
	debNameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	debVerRE    = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$`)
	sriTokenRE  = regexp.MustCompile(`^(sha512|sha384|sha256|sha1)-[A-Za-z0-9+/]+={0,2}$`)
	binaryRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	shellSafeRE = regexp.MustCompile(`^[^'\n\r]*$`)
)

// ErrInvalid marks pins that fail validation; the joined errors say why.
var ErrInvalid = errors.New("invalid pins")

// Validate checks the whole data set: every field present and well formed,
// exact versions, sha512 integrity hashes, unique harness names and backend
// keys, a version pattern that names the version, and for each harness a
// lock whose top-level and platform entries agree with the row.
func (p *Pins) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(p.Base.validate())
	add(p.Node.validate())
	if p.Bridge.Binary == "" || !binaryRE.MatchString(p.Bridge.Binary) {
		add(fmt.Errorf("bridge: binary %q is not a file name", p.Bridge.Binary))
	}
	if p.Bridge.Main == "" {
		add(errors.New("bridge: no main package"))
	}
	if len(p.Harnesses) == 0 {
		add(errors.New("no harnesses"))
	}
	// Names and backend keys share one namespace: Select accepts either.
	owner := map[string]string{}
	for _, h := range p.Harnesses {
		for _, id := range slices.Compact([]string{h.Name, h.Backend}) {
			if prev, ok := owner[id]; ok {
				add(fmt.Errorf("harness %s: name or backend %q already names harness %s", h.Name, id, prev))
			}
			owner[id] = h.Name
		}
		if err := h.validate(); err != nil {
			add(fmt.Errorf("harness %s: %w", h.Name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}

func (b Base) validate() error {
	var errs []error
	switch {
	case b.Reference == "":
		errs = append(errs, errors.New("base: no reference"))
	case strings.ContainsAny(b.Reference, "@ \t\n"):
		errs = append(errs, fmt.Errorf("base: reference %q must not carry a digest or spaces", b.Reference))
	}
	if !digestRE.MatchString(b.Digest) {
		errs = append(errs, fmt.Errorf("base: digest %q: want sha256:<64 hex>", b.Digest))
	}
	seen := map[string]bool{}
	for _, d := range b.Packages {
		if !debNameRE.MatchString(d.Name) || !debVerRE.MatchString(d.Version) {
			errs = append(errs, fmt.Errorf("base: Debian package %q=%q is not name=exact-version", d.Name, d.Version))
		}
		if seen[d.Name] {
			errs = append(errs, fmt.Errorf("base: Debian package %s listed twice", d.Name))
		}
		seen[d.Name] = true
	}
	return errors.Join(errs...)
}

func (n Node) validate() error {
	var errs []error
	if !nodeVerRE.MatchString(n.Version) {
		errs = append(errs, fmt.Errorf("node: version %q: want MAJOR.MINOR.PATCH", n.Version))
	}
	if err := validatePlatforms(n.Packages); err != nil {
		errs = append(errs, fmt.Errorf("node: %w", err))
	}
	if len(n.Packages) == 0 {
		errs = append(errs, errors.New("node: no packages"))
	}
	if n.NPM.Name != "npm" || n.NPM.Platform != "" {
		errs = append(errs, fmt.Errorf("node: npm package is %q for %q, want npm for every platform", n.NPM.Name, n.NPM.Platform))
	}
	if err := n.NPM.validate(); err != nil {
		errs = append(errs, fmt.Errorf("node: %w", err))
	}
	for _, pkg := range n.Packages {
		if pkg.Version != n.Version {
			errs = append(errs, fmt.Errorf("node: package %s is version %s, want %s", pkg.Name, pkg.Version, n.Version))
		}
	}
	return errors.Join(errs...)
}

func validatePlatforms(pkgs []Package) error {
	var errs []error
	seen := map[string]bool{}
	for _, pkg := range pkgs {
		if !slices.Contains(Platforms, pkg.Platform) {
			errs = append(errs, fmt.Errorf("package %s: platform %q: want one of %s", pkg.Name, pkg.Platform, strings.Join(Platforms, ", ")))
		}
		if seen[pkg.Platform] {
			errs = append(errs, fmt.Errorf("platform %s listed twice", pkg.Platform))
		}
		seen[pkg.Platform] = true
		if err := pkg.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (pkg Package) validate() error {
	var errs []error
	if !npmNameRE.MatchString(pkg.Name) {
		errs = append(errs, fmt.Errorf("package %q: not an npm package name", pkg.Name))
	}
	if pkg.Dependency != "" && !npmNameRE.MatchString(pkg.Dependency) {
		errs = append(errs, fmt.Errorf("package %s: dependency %q is not an npm package name", pkg.Name, pkg.Dependency))
	}
	if !exactVerRE.MatchString(pkg.Version) {
		errs = append(errs, fmt.Errorf("package %s: version %q is not exact", pkg.Name, pkg.Version))
	}
	if err := validateIntegrity(pkg.Integrity); err != nil {
		errs = append(errs, fmt.Errorf("package %s@%s: %w", pkg.Name, pkg.Version, err))
	}
	return errors.Join(errs...)
}

func (h Harness) validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !nameRE.MatchString(h.Name) {
		add("name %q: want lowercase letters, digits and dashes", h.Name)
	}
	if !nameRE.MatchString(h.Backend) {
		add("backend %q: want lowercase letters, digits and dashes", h.Backend)
	}
	top := Package{Name: h.Package, Version: h.Version, Integrity: h.Integrity}
	if err := top.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := validatePlatforms(h.Platforms); err != nil {
		errs = append(errs, err)
	}
	for _, pkg := range h.With {
		if err := pkg.validate(); err != nil {
			errs = append(errs, err)
		}
		if pkg.Platform != "" || pkg.Dependency != "" {
			add("with %s: a package beside the CLI has no platform or alias", pkg.Name)
		}
		if pkg.Version != h.Version {
			add("with %s@%s: want the CLI's version %s", pkg.Name, pkg.Version, h.Version)
		}
	}
	if !binaryRE.MatchString(h.Binary) {
		add("binary %q is not a file name", h.Binary)
	}
	if len(h.VersionCommand) == 0 || h.VersionCommand[0] != h.Binary {
		add("version command %q must start with the binary %q", h.VersionCommand, h.Binary)
	}
	for _, arg := range h.VersionCommand {
		if !binaryRE.MatchString(strings.TrimLeft(arg, "-")) {
			add("version command argument %q: want plain words", arg)
		}
	}
	switch re, err := regexp.Compile(h.VersionPattern); {
	case h.VersionPattern == "":
		add("no version pattern")
	case err != nil:
		add("version pattern: %v", err)
	case !shellSafeRE.MatchString(h.VersionPattern):
		add("version pattern %q must not hold quotes or newlines", h.VersionPattern)
	case !strings.Contains(h.VersionPattern, regexp.QuoteMeta(h.Version)):
		add("version pattern %q does not name version %s", h.VersionPattern, h.Version)
	case re.MatchString(""):
		add("version pattern %q matches empty output", h.VersionPattern)
	}
	if err := h.validateProofs(); err != nil {
		errs = append(errs, err)
	}
	if h.Lock == nil {
		add("no lock (%s/%s.json)", LockDir, h.Name)
		return errors.Join(errs...)
	}
	if err := h.Lock.check(); err != nil {
		errs = append(errs, err)
	}
	if err := h.Lock.matches(top); err != nil {
		errs = append(errs, err)
	}
	for _, pkg := range h.Platforms {
		if err := h.lockHasPlatform(pkg); err != nil {
			errs = append(errs, err)
		}
	}
	for _, pkg := range h.With {
		if err := h.Lock.matches(pkg); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lockHasPlatform finds a platform package hoisted to the top or nested
// under the harness package.
func (h Harness) lockHasPlatform(pkg Package) error {
	if _, ok := h.Lock.Packages["node_modules/"+pkg.DependencyName()]; ok {
		return h.Lock.matches(pkg)
	}
	nested := Package{Name: pkg.Name, Version: pkg.Version, Integrity: pkg.Integrity,
		Dependency: h.Package + "/node_modules/" + pkg.DependencyName()}
	if _, ok := h.Lock.Packages["node_modules/"+nested.Dependency]; ok {
		return h.Lock.matches(nested)
	}
	return fmt.Errorf("lock: no entry for platform package %s (%s)", pkg.DependencyName(), pkg.Platform)
}

// validateIntegrity accepts exactly one sha512 SRI hash, as the registry
// publishes for every package since 2017.
func validateIntegrity(s string) error {
	alg, b64, ok := strings.Cut(s, "-")
	if !ok || alg != "sha512" {
		return fmt.Errorf("integrity %q: want sha512-<base64>", s)
	}
	sum, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(sum) != 64 {
		return fmt.Errorf("integrity %q: not a base64 sha512 digest", s)
	}
	return nil
}

// validLockIntegrity accepts the SRI strings npm writes into lock files: one
// or more space-separated hashes (old packages carry only sha1).
func validLockIntegrity(s string) bool {
	toks := strings.Fields(s)
	if len(toks) == 0 {
		return false
	}
	for _, t := range toks {
		if !sriTokenRE.MatchString(t) {
			return false
		}
	}
	return true
}
