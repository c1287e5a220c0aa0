package testbed

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDir(t *testing.T) {
	tests := []struct {
		name       string
		testbedDir string
		xdg        string
		home       string
		want       string
	}{
		{name: "explicit dir wins", testbedDir: "/srv/tb", xdg: "/x", home: "/h", want: "/srv/tb"},
		{name: "XDG cache", xdg: "/x", home: "/h", want: "/x/boxctl/testbed"},
		{name: "home cache", home: "/h", want: "/h/.cache/boxctl/testbed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("BOXCTL_TESTBED_DIR", tt.testbedDir)
			t.Setenv("XDG_CACHE_HOME", tt.xdg)
			t.Setenv("HOME", tt.home)
			if got := Dir(); got != tt.want {
				t.Errorf("Dir() = %q, want %q", got, tt.want)
			}
		})
	}
}

const fullState = `# written by scripts/testbed up
DOCKER_HOST=unix:///var/run/docker.sock
BUILDKIT_HOST=unix:///tb/run/buildkitd.sock

BOXCTL_TEST_REGISTRY=127.0.0.1:5000
BOXCTL_TEST_BASE_IMAGE="127.0.0.1:5000/boxctl/base@sha256:0123"
BOXCTL_TEST_NODE_DIR='/tb/node/v22.23.5'
BOXCTL_TEST_NODE_VERSION=v22.23.5
BOXCTL_NPM_CACHE=/tb/npm-cache
BOXCTL_TEST_KUBECONFIG=/tb/kube/admin.kubeconfig
BOXCTL_TEST_KUBE_AUDIT_LOG=/tb/kube/audit.log
BOXCTL_TEST_KUBECTL=/tb/bin/kubectl
`

func TestLoad(t *testing.T) {
	tests := []struct {
		name string
		// state is the state file's content; nil means no file.
		state *string
		want  Env // Dir is filled in with the test's directory
		// wantErr is a substring of the error; "" means success.
		wantErr   string
		wantNotUp bool
	}{
		{
			name:  "ok",
			state: ptr(fullState),
			want: Env{
				DockerHost:   "unix:///var/run/docker.sock",
				BuildkitHost: "unix:///tb/run/buildkitd.sock",
				Registry:     "127.0.0.1:5000",
				BaseImage:    "127.0.0.1:5000/boxctl/base@sha256:0123",
				NodeDir:      "/tb/node/v22.23.5",
				NodeVersion:  "v22.23.5",
				NPMCache:     "/tb/npm-cache",
				Kubeconfig:   "/tb/kube/admin.kubeconfig",
				KubeAuditLog: "/tb/kube/audit.log",
				Kubectl:      "/tb/bin/kubectl",
			},
		},
		{
			name:  "node version is optional",
			state: ptr(strings.Replace(fullState, "BOXCTL_TEST_NODE_VERSION=v22.23.5\n", "", 1)),
			want: Env{
				DockerHost:   "unix:///var/run/docker.sock",
				BuildkitHost: "unix:///tb/run/buildkitd.sock",
				Registry:     "127.0.0.1:5000",
				BaseImage:    "127.0.0.1:5000/boxctl/base@sha256:0123",
				NodeDir:      "/tb/node/v22.23.5",
				NPMCache:     "/tb/npm-cache",
				Kubeconfig:   "/tb/kube/admin.kubeconfig",
				KubeAuditLog: "/tb/kube/audit.log",
				Kubectl:      "/tb/bin/kubectl",
			},
		},
		{
			name:      "no state file",
			wantErr:   "no testbed.env in",
			wantNotUp: true,
		},
		{
			name:      "empty state file",
			state:     ptr(""),
			wantErr:   "state file lacks BOXCTL_NPM_CACHE, BOXCTL_TEST_BASE_IMAGE, BOXCTL_TEST_KUBECONFIG, BOXCTL_TEST_KUBECTL, BOXCTL_TEST_KUBE_AUDIT_LOG, BOXCTL_TEST_NODE_DIR, BOXCTL_TEST_REGISTRY, BUILDKIT_HOST, DOCKER_HOST",
			wantNotUp: true,
		},
		{
			name:      "missing keys",
			state:     ptr(strings.NewReplacer("BUILDKIT_HOST=unix:///tb/run/buildkitd.sock\n", "", "BOXCTL_NPM_CACHE=/tb/npm-cache\n", "").Replace(fullState)),
			wantErr:   "state file lacks BOXCTL_NPM_CACHE, BUILDKIT_HOST",
			wantNotUp: true,
		},
		{
			name:      "a state file from before the cluster",
			state:     ptr(strings.NewReplacer("BOXCTL_TEST_KUBECONFIG=/tb/kube/admin.kubeconfig\n", "", "BOXCTL_TEST_KUBE_AUDIT_LOG=/tb/kube/audit.log\n", "", "BOXCTL_TEST_KUBECTL=/tb/bin/kubectl\n", "").Replace(fullState)),
			wantErr:   "state file lacks BOXCTL_TEST_KUBECONFIG, BOXCTL_TEST_KUBECTL, BOXCTL_TEST_KUBE_AUDIT_LOG",
			wantNotUp: true,
		},
		{
			name:      "empty kubeconfig counts as missing",
			state:     ptr(strings.Replace(fullState, "BOXCTL_TEST_KUBECONFIG=/tb/kube/admin.kubeconfig", "BOXCTL_TEST_KUBECONFIG=''", 1)),
			wantErr:   "state file lacks BOXCTL_TEST_KUBECONFIG",
			wantNotUp: true,
		},
		{
			name:      "empty value counts as missing",
			state:     ptr(strings.Replace(fullState, "BOXCTL_TEST_REGISTRY=127.0.0.1:5000", "BOXCTL_TEST_REGISTRY=", 1)),
			wantErr:   "state file lacks BOXCTL_TEST_REGISTRY",
			wantNotUp: true,
		},
		{
			name:    "malformed line",
			state:   ptr(fullState + "this line has no equals sign\n"),
			wantErr: `malformed line "this line has no equals sign"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("BOXCTL_TESTBED_DIR", dir)
			if tt.state != nil {
				if err := os.WriteFile(filepath.Join(dir, StateFileName), []byte(*tt.state), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Load()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load() error = %v, want one containing %q", err, tt.wantErr)
				}
				if errors.Is(err, ErrNotUp) != tt.wantNotUp {
					t.Errorf("errors.Is(Load() error, ErrNotUp) = %v, want %v", !tt.wantNotUp, tt.wantNotUp)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			tt.want.Dir = dir
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr(s string) *string { return &s }
