package npmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/testbed"
)

// InstallTimeout bounds one npm install.
const InstallTimeout = 10 * time.Minute

// Package is an installed npm package.
type Package struct {
	// Name and Version are the package installed, e.g.
	// "@openai/codex" and "0.171.0".
	Name, Version string
	// Prefix is the npm prefix the package was installed into; its
	// executables are in Prefix/bin.
	Prefix string
	// NodeBin is the directory of the node and npm executables used.
	NodeBin string
}

// Bin returns the path of the package's executable name.
func (p Package) Bin(name string) string { return filepath.Join(p.Prefix, "bin", name) }

// PATH returns a PATH value that finds the package's executables first,
// then the test bed's Node, then the system directories, so scripts with
// `#!/usr/bin/env node` run on the test bed's Node.
func (p Package) PATH() string {
	return strings.Join([]string{filepath.Join(p.Prefix, "bin"), p.NodeBin, "/usr/local/bin", "/usr/bin", "/bin"}, string(os.PathListSeparator))
}

// exactVersion matches an exact semver version, with an optional
// pre-release; ranges, tags and "latest" do not match.
var exactVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// ParseSpec splits "name@version" (the name may be scoped, "@scope/name")
// and checks the version is exact.
func ParseSpec(spec string) (name, version string, err error) {
	at := strings.LastIndex(spec, "@")
	if at <= 0 {
		return "", "", fmt.Errorf("npm spec %q: want name@exact-version", spec)
	}
	name, version = spec[:at], spec[at+1:]
	if !exactVersion.MatchString(version) {
		return "", "", fmt.Errorf("npm spec %q: version %q is not exact", spec, version)
	}
	return name, version, nil
}

// Install installs spec ("name@x.y.z", exact) into a new temporary
// directory of t with the test bed's Node and npm cache, and returns it. It
// fails the test if npm fails or installs another version.
func Install(t testing.TB, env testbed.Env, spec string) Package {
	t.Helper()
	name, version, err := ParseSpec(spec)
	if err != nil {
		t.Fatalf("npmtest.Install: %v", err)
	}
	p := Package{Name: name, Version: version, Prefix: t.TempDir(), NodeBin: filepath.Join(env.NodeDir, "bin")}
	ctx, cancel := context.WithTimeout(t.Context(), InstallTimeout)
	defer cancel()
	start := time.Now()
	if err := install(ctx, p, env.NPMCache); err != nil {
		t.Fatalf("npmtest.Install(%s): %v", spec, err)
	}
	got, err := InstalledVersion(p.Prefix, name)
	if err != nil {
		t.Fatalf("npmtest.Install(%s): %v", spec, err)
	}
	if got != version {
		t.Fatalf("npmtest.Install(%s): installed version %s, want %s", spec, got, version)
	}
	t.Logf("npm installed %s in %s", spec, time.Since(start).Round(time.Millisecond))
	return p
}

func install(ctx context.Context, p Package, cache string) error {
	npm := filepath.Join(p.NodeBin, "npm")
	cmd := exec.CommandContext(ctx, npm, "install", "--global", "--prefix", p.Prefix,
		"--cache", cache, "--prefer-offline", "--no-audit", "--no-fund", "--no-update-notifier",
		"--loglevel", "warn", p.Name+"@"+p.Version)
	cmd.Env = append(os.Environ(), "PATH="+p.NodeBin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install: %w\n%s", err, tail(out.String(), 4000))
	}
	return nil
}

// InstalledVersion reads the version of package name installed globally
// under prefix.
func InstalledVersion(prefix, name string) (string, error) {
	data, err := os.ReadFile(filepath.Join(prefix, "lib", "node_modules", filepath.FromSlash(name), "package.json"))
	if err != nil {
		return "", fmt.Errorf("read installed version: %w", err)
	}
	var pj struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &pj); err != nil {
		return "", fmt.Errorf("read installed version of %s: %w", name, err)
	}
	return pj.Version, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
