package testbed

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriteState: what WriteState writes, Load reads back; a partial
// write keeps the previous file's other keys; "" drops a key; unknown
// keys and multi-line values are refused and leave the file alone.
func TestWriteState(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("BOXCTL_TESTBED_DIR", dir)
	path := filepath.Join(dir, StateFileName)
	full := map[string]string{
		"DOCKER_HOST": "unix:///var/run/docker.sock", "BUILDKIT_HOST": "unix:///tb/run/buildkitd.sock",
		"BOXCTL_TEST_REGISTRY": "127.0.0.1:5000", "BOXCTL_TEST_BASE_IMAGE": "127.0.0.1:5000/boxctl/base@sha256:0123",
		"BOXCTL_TEST_NODE_DIR": "/tb/node/v22.23.5", "BOXCTL_TEST_NODE_VERSION": "v22.23.5", "BOXCTL_NPM_CACHE": "/tb/npm-cache",
		"BOXCTL_TEST_KUBECONFIG": "/tb/kube/admin.kubeconfig", "BOXCTL_TEST_KUBE_AUDIT_LOG": "/tb/kube/audit.log",
		"BOXCTL_TEST_KUBECTL": "/tb/bin/kubectl",
	}
	if err := WriteState(path, full, "written by a test"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if lines[0] != "# written by a test" || len(lines) != 11 || !strings.HasPrefix(lines[1], "DOCKER_HOST=") || !strings.HasPrefix(lines[10], "BOXCTL_TEST_KUBECTL=") {
		t.Errorf("state file =\n%s\nwant the header, then the keys in their order", raw)
	}
	want := Env{Dir: dir, DockerHost: full["DOCKER_HOST"], BuildkitHost: full["BUILDKIT_HOST"], Registry: full["BOXCTL_TEST_REGISTRY"],
		BaseImage: full["BOXCTL_TEST_BASE_IMAGE"], NodeDir: full["BOXCTL_TEST_NODE_DIR"], NodeVersion: "v22.23.5",
		NPMCache: full["BOXCTL_NPM_CACHE"], Kubeconfig: full["BOXCTL_TEST_KUBECONFIG"], KubeAuditLog: full["BOXCTL_TEST_KUBE_AUDIT_LOG"],
		Kubectl: full["BOXCTL_TEST_KUBECTL"]}
	got, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load after WriteState (-want +got):\n%s", diff)
	}

	// An `up docker`: new Docker-side values, the Kubernetes ones kept.
	if err := WriteState(path, map[string]string{"BUILDKIT_HOST": "unix:///other.sock", "BOXCTL_TEST_NODE_VERSION": ""}, ""); err != nil {
		t.Fatal(err)
	}
	want.BuildkitHost, want.NodeVersion = "unix:///other.sock", ""
	if got, err = Load(); err != nil {
		t.Fatal(err)
	} else if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load after a partial WriteState (-want +got):\n%s", diff)
	}

	before, _ := os.ReadFile(path)
	for _, bad := range []map[string]string{{"DOCKER_HOTS": "x"}, {"DOCKER_HOST": "a\nBOXCTL_TEST_KUBECTL=/evil"}} {
		err := WriteState(path, bad, "")
		if err == nil {
			t.Errorf("WriteState(%q) succeeded, want an error", bad)
		}
		if _, ok := bad["DOCKER_HOTS"]; ok && !errors.Is(err, ErrUnknownKey) {
			t.Errorf("WriteState(%q) = %v, want ErrUnknownKey", bad, err)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused WriteState changed the file:\n%s", after)
	}
}

// TestWriteState_Partial: the first `up docker` on a machine writes a file
// without the Kubernetes keys, which Load reports as not up.
func TestWriteState_Partial(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("BOXCTL_TESTBED_DIR", dir)
	if err := WriteState(filepath.Join(dir, StateFileName), map[string]string{"DOCKER_HOST": "unix:///d.sock"}, "h"); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(); !errors.Is(err, ErrNotUp) || !strings.Contains(err.Error(), "BOXCTL_TEST_KUBECONFIG") {
		t.Errorf("Load = %v, want ErrNotUp naming the missing Kubernetes keys", err)
	}
}
