package jssdk

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/flock"

	"github.com/tangle-network/boxctl/internal/testbed"
)

// InstallTimeout bounds one npm ci of a set.
const InstallTimeout = 10 * time.Minute

// completeMarker is written into an installation directory last.
const completeMarker = ".boxctl-complete"

// Options says where to install and with which Node.
type Options struct {
	// Dir holds the installations, one directory per content address.
	Dir string
	// NodeDir is a Node toolchain: NodeDir/bin/node and NodeDir/bin/npm.
	NodeDir string
	// NPMCache is npm's cache directory.
	NPMCache string
}

// Installation is an installed set.
type Installation struct {
	// Set is the set installed.
	Set Set
	// Dir is the installation directory; its node_modules holds the set.
	Dir string
	// Node is the node executable scripts run with.
	Node string
}

// Ensure installs the set into o.Dir unless an installation of the same
// content is there already, and returns it. Concurrent callers wait for
// one another; an interrupted install is redone.
func Ensure(ctx context.Context, o Options, s Set) (Installation, error) {
	node := filepath.Join(o.NodeDir, "bin", "node")
	version, err := nodeVersion(ctx, node)
	if err != nil {
		return Installation{}, err
	}
	key, err := s.Key(version)
	if err != nil {
		return Installation{}, err
	}
	in := Installation{Set: s, Dir: filepath.Join(o.Dir, key), Node: node}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return in, fmt.Errorf("jssdk install %s: %w", s.Name, err)
	}
	unlock, err := lockFile(ctx, in.Dir+".lock")
	if err != nil {
		return in, fmt.Errorf("jssdk install %s: %w", s.Name, err)
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(in.Dir, completeMarker)); err == nil {
		return in, nil
	}
	if err := os.RemoveAll(in.Dir); err != nil {
		return in, fmt.Errorf("jssdk install %s: %w", s.Name, err)
	}
	if err := npmCI(ctx, o, s, in.Dir); err != nil {
		return in, fmt.Errorf("jssdk install %s: %w", s.Name, err)
	}
	if err := os.WriteFile(filepath.Join(in.Dir, completeMarker), []byte(key+"\n"), 0o644); err != nil {
		return in, fmt.Errorf("jssdk install %s: %w", s.Name, err)
	}
	return in, nil
}

func npmCI(ctx context.Context, o Options, s Set, dir string) error {
	pj, pl, err := s.Files()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"package.json": pj, "package-lock.json": pl} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, InstallTimeout)
	defer cancel()
	bin := filepath.Join(o.NodeDir, "bin")
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "npm"), "ci", "--ignore-scripts", "--no-audit", "--no-fund",
		"--no-update-notifier", "--loglevel=warn", "--cache", o.NPMCache, "--prefer-offline")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci: %w\n%s", err, tail(out.String(), 4000))
	}
	return nil
}

func nodeVersion(ctx context.Context, node string) (string, error) {
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("jssdk: node %s: %w", node, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// lockFile takes an exclusive flock on path (flock.Lock).
func lockFile(ctx context.Context, path string) (func(), error) { return flock.Lock(ctx, path, 0o644) }

// TestbedOptions installs under the test bed's directory (Dir/jssdk) with
// its Node and npm cache.
func TestbedOptions(env testbed.Env) Options {
	return Options{Dir: filepath.Join(env.Dir, "jssdk"), NodeDir: env.NodeDir, NPMCache: env.NPMCache}
}

// Require loads the named set and installs it with the test bed's Node,
// failing the test (never skipping it) if the test bed, Node or the
// registry is missing.
func Require(t testing.TB, name string) Installation {
	t.Helper()
	env := testbed.Require(t)
	s, err := Load(name)
	if err != nil {
		t.Fatalf("jssdk: %v", err)
	}
	start := time.Now()
	in, err := Ensure(t.Context(), TestbedOptions(env), s)
	if err != nil {
		t.Fatalf("jssdk: %v", err)
	}
	t.Logf("jssdk set %s ready in %s (%s)", name, time.Since(start).Round(time.Millisecond), in.Dir)
	return in
}
