package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
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
	// KubeStorageClass is the cluster's StorageClass that provisions
	// volumes on its node (clones too), for suspendable boxes. Optional in
	// the state file: RequireKubeStorage fails without it.
	KubeStorageClass string
	// KubeRelayNet is a range of this machine's addresses that the
	// cluster's pods reach, for egress relays: one address a gate
	// (kubetest.EgressGate). Empty in a state file from before it.
	KubeRelayNet string
	// OTLPEndpoint is the OTLP/HTTP receiver of the test bed's Jaeger
	// (http://127.0.0.1:PORT), as OTEL_EXPORTER_OTLP_ENDPOINT takes it.
	// Optional in the state file: RequireTracing fails without it.
	OTLPEndpoint string
	// JaegerURL is that Jaeger's query API (GET /api/traces/ID).
	JaegerURL string
	// Chromium is Debian's Chromium, the browser the inspector's tests
	// drive. Optional in the state file: RequireChromium fails without it.
	Chromium string
	// GVisorRuntime is the engine's name of gVisor's runsc runtime (the
	// Docker vendor's WithRuntime takes it). Optional in the state file:
	// RequireGVisor fails without it.
	GVisorRuntime string
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

// stateKeys are the state file's keys, in the order WriteState writes
// them, with the Env field each fills; all but BOXCTL_TEST_NODE_VERSION,
// the tracing keys and the browser's are required (RequireTracing and
// RequireChromium require those).
var stateKeys = []struct {
	key      string
	field    func(*Env) *string
	optional bool
}{
	{key: "DOCKER_HOST", field: func(e *Env) *string { return &e.DockerHost }},
	{key: "BUILDKIT_HOST", field: func(e *Env) *string { return &e.BuildkitHost }},
	{key: "BOXCTL_TEST_REGISTRY", field: func(e *Env) *string { return &e.Registry }},
	{key: "BOXCTL_TEST_BASE_IMAGE", field: func(e *Env) *string { return &e.BaseImage }},
	{key: "BOXCTL_TEST_NODE_DIR", field: func(e *Env) *string { return &e.NodeDir }},
	{key: "BOXCTL_TEST_NODE_VERSION", field: func(e *Env) *string { return &e.NodeVersion }, optional: true},
	{key: "BOXCTL_NPM_CACHE", field: func(e *Env) *string { return &e.NPMCache }},
	{key: "BOXCTL_TEST_KUBECONFIG", field: func(e *Env) *string { return &e.Kubeconfig }},
	{key: "BOXCTL_TEST_KUBE_AUDIT_LOG", field: func(e *Env) *string { return &e.KubeAuditLog }},
	{key: "BOXCTL_TEST_KUBECTL", field: func(e *Env) *string { return &e.Kubectl }},
	{key: "BOXCTL_TEST_KUBE_STORAGE_CLASS", field: func(e *Env) *string { return &e.KubeStorageClass }, optional: true},
	{key: "BOXCTL_TEST_KUBE_RELAY_NET", field: func(e *Env) *string { return &e.KubeRelayNet }, optional: true},
	{key: "BOXCTL_TEST_OTLP_ENDPOINT", field: func(e *Env) *string { return &e.OTLPEndpoint }, optional: true},
	{key: "BOXCTL_TEST_JAEGER_URL", field: func(e *Env) *string { return &e.JaegerURL }, optional: true},
	{key: "BOXCTL_TEST_CHROMIUM", field: func(e *Env) *string { return &e.Chromium }, optional: true},
	{key: "BOXCTL_TEST_GVISOR_RUNTIME", field: func(e *Env) *string { return &e.GVisorRuntime }, optional: true},
}

// parseState reads KEY=VALUE lines: blank lines and # comments are
// skipped, and values may be quoted.
func parseState(r io.Reader) (map[string]string, error) {
	vals := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		vals[k] = strings.Trim(v, `"'`)
	}
	return vals, sc.Err()
}

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
	vals, err := parseState(f)
	if err != nil {
		return Env{}, fmt.Errorf("load test bed state: %w", err)
	}
	env := Env{Dir: dir}
	var missing []string
	for _, k := range stateKeys {
		*k.field(&env) = vals[k.key]
		if vals[k.key] == "" && !k.optional {
			missing = append(missing, k.key)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return Env{}, fmt.Errorf("%w: state file lacks %s", ErrNotUp, strings.Join(missing, ", "))
	}
	return env, nil
}

// ErrUnknownKey is the error of WriteState for a key the state file does
// not have.
var ErrUnknownKey = errors.New("not a key of the test bed's state file")

// WriteState writes the state file at path: the values of the previous
// file there, updated by vals (KEY -> value; "" drops the key), so that an
// `up` of part of the test bed keeps the coordinates of the other parts.
// Keys come in a fixed order under a header comment; the file is replaced
// atomically.
func WriteState(path string, vals map[string]string, header string) error {
	known := map[string]bool{}
	for _, k := range stateKeys {
		known[k.key] = true
	}
	for k, v := range vals {
		if !known[k] {
			return fmt.Errorf("write test bed state: %q: %w", k, ErrUnknownKey)
		}
		if strings.ContainsAny(v, "\n\r") {
			return fmt.Errorf("write test bed state: %s: a value of one line, got %q", k, v)
		}
	}
	merged := map[string]string{}
	if f, err := os.Open(path); err == nil {
		prev, err := parseState(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("write test bed state: previous %s: %w", path, err)
		}
		for k, v := range prev {
			if known[k] {
				merged[k] = v
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("write test bed state: %w", err)
	}
	maps.Copy(merged, vals)
	var b strings.Builder
	if header != "" {
		fmt.Fprintf(&b, "# %s\n", header)
	}
	for _, k := range stateKeys {
		if v := merged[k.key]; v != "" {
			fmt.Fprintf(&b, "%s=%s\n", k.key, v)
		}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write test bed state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write test bed state: %w", err)
	}
	return nil
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

// RequireTracing returns the test bed with its OTLP receiver and query API
// (a Jaeger), or fails the test loudly when the state lacks them.
func RequireTracing(t testing.TB) Env {
	t.Helper()
	env := Require(t)
	if env.OTLPEndpoint == "" || env.JaegerURL == "" {
		t.Fatalf("testbed: %v: state file lacks BOXCTL_TEST_OTLP_ENDPOINT or BOXCTL_TEST_JAEGER_URL (run scripts/testbed up)", ErrNotUp)
	}
	return env
}

// RequireChromium returns the test bed with its Chromium, or fails the
// test loudly when the state lacks it or the binary is not there.
func RequireChromium(t testing.TB) Env {
	t.Helper()
	env := Require(t)
	if env.Chromium == "" {
		t.Fatalf("testbed: %v: state file lacks BOXCTL_TEST_CHROMIUM (run scripts/testbed up)", ErrNotUp)
	}
	if _, err := os.Stat(env.Chromium); err != nil {
		t.Fatalf("testbed: chromium: %v (run scripts/testbed up)", err)
	}
	return env
}

// RequireGVisor returns the test bed with gVisor's runtime registered
// with its engine, or fails the test loudly when the state lacks it.
func RequireGVisor(t testing.TB) Env {
	t.Helper()
	env := Require(t)
	if env.GVisorRuntime == "" {
		t.Fatalf("testbed: %v: state file lacks BOXCTL_TEST_GVISOR_RUNTIME (run scripts/testbed up)", ErrNotUp)
	}
	return env
}

// RequireKubeStorage returns the test bed with its Kubernetes StorageClass,
// or fails the test loudly when the state lacks it.
func RequireKubeStorage(t testing.TB) Env {
	t.Helper()
	env := Require(t)
	if env.KubeStorageClass == "" {
		t.Fatalf("testbed: %v: state file lacks BOXCTL_TEST_KUBE_STORAGE_CLASS (run scripts/testbed up)", ErrNotUp)
	}
	return env
}
