package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Env holds the coordinates of the running test bed.
type Env struct {
	// Dir is the test bed's state directory.
	Dir string
	// DockerHost is the Docker engine address (unix:///path or tcp://...).
	DockerHost string
	// BuildkitHost is the buildkitd address (unix:///path).
	BuildkitHost string
	// Registry is the local OCI registry as host:port, plain HTTP.
	Registry string
	// BaseImage is the local base image by digest: REGISTRY/REPO@sha256:...
	BaseImage string
	// NodeDir holds a Node 22 toolchain: NodeDir/bin/node and NodeDir/bin/npm.
	NodeDir string
	// NodeVersion is the version of that Node, as `node --version` prints
	// it (e.g. v22.23.5); the base image carries the same one. Optional in
	// the state file.
	NodeVersion string
	// NPMCache is a persistent, content-addressed npm cache directory.
	NPMCache string
	// Kubeconfig is the admin kubeconfig of the single-node Kubernetes
	// cluster (node "localhost", agent-sandbox CRDs and controller): client
	// certificate auth against https://127.0.0.1:PORT.
	Kubeconfig string
	// KubeAuditLog is the apiserver's audit log, one JSON event per line:
	// request and response bodies for pods (and their exec, attach and
	// port-forward) and every agent-sandbox resource, metadata otherwise.
	KubeAuditLog string
	// Kubectl is a kubectl of the cluster's version.
	Kubectl string
}

// StateFileName is the name of the state file in the state directory.
const StateFileName = "testbed.env"

// Dir returns the test bed's state directory: $BOXCTL_TESTBED_DIR, or
// $XDG_CACHE_HOME/boxctl/testbed, or ~/.cache/boxctl/testbed.
func Dir() string {
	if d := os.Getenv("BOXCTL_TESTBED_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "boxctl", "testbed")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "boxctl", "testbed")
}

// ErrNotUp means the state file is missing: the test bed was never brought up.
var ErrNotUp = errors.New("test bed is not up: run `make testbed`")

// Load reads the state file written by `scripts/testbed up`.
func Load() (Env, error) {
	dir := Dir()
	f, err := os.Open(filepath.Join(dir, StateFileName))
	if errors.Is(err, os.ErrNotExist) {
		return Env{}, fmt.Errorf("%w (no %s in %s)", ErrNotUp, StateFileName, dir)
	}
	if err != nil {
		return Env{}, fmt.Errorf("load test bed state: %w", err)
	}
	defer f.Close()
	vals := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return Env{}, fmt.Errorf("load test bed state: malformed line %q", line)
		}
		vals[k] = strings.Trim(v, `"'`)
	}
	if err := sc.Err(); err != nil {
		return Env{}, fmt.Errorf("load test bed state: %w", err)
	}
	env := Env{
		Dir:          dir,
		DockerHost:   vals["DOCKER_HOST"],
		BuildkitHost: vals["BUILDKIT_HOST"],
		Registry:     vals["BOXCTL_TEST_REGISTRY"],
		BaseImage:    vals["BOXCTL_TEST_BASE_IMAGE"],
		NodeDir:      vals["BOXCTL_TEST_NODE_DIR"],
		NodeVersion:  vals["BOXCTL_TEST_NODE_VERSION"],
		NPMCache:     vals["BOXCTL_NPM_CACHE"],
		Kubeconfig:   vals["BOXCTL_TEST_KUBECONFIG"],
		KubeAuditLog: vals["BOXCTL_TEST_KUBE_AUDIT_LOG"],
		Kubectl:      vals["BOXCTL_TEST_KUBECTL"],
	}
	var missing []string
	for k, v := range map[string]string{
		"DOCKER_HOST": env.DockerHost, "BUILDKIT_HOST": env.BuildkitHost,
		"BOXCTL_TEST_REGISTRY": env.Registry, "BOXCTL_TEST_BASE_IMAGE": env.BaseImage,
		"BOXCTL_TEST_NODE_DIR": env.NodeDir, "BOXCTL_NPM_CACHE": env.NPMCache,
		"BOXCTL_TEST_KUBECONFIG": env.Kubeconfig, "BOXCTL_TEST_KUBE_AUDIT_LOG": env.KubeAuditLog,
		"BOXCTL_TEST_KUBECTL": env.Kubectl,
	} {
		if v == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return Env{}, fmt.Errorf("%w: state file lacks %s", ErrNotUp, strings.Join(missing, ", "))
	}
	return env, nil
}

// Require returns the test bed or fails the test loudly. Tests never skip
// for a missing service: CI brings the test bed up before running them.
func Require(t testing.TB) Env {
	t.Helper()
	env, err := Load()
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	return env
}
