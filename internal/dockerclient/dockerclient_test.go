package dockerclient_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/client"

	"github.com/tangle-network/boxctl/internal/dockerclient"
)

// engine is an httptest stand-in for the engine's version handshake: it
// answers /_ping with API version 1.41 and records the paths asked for.
type engine struct {
	mu    sync.Mutex
	paths []string
}

func (e *engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.paths = append(e.paths, r.URL.Path)
	e.mu.Unlock()
	w.Header().Set("Api-Version", "1.41")
	w.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(r.URL.Path, "/_ping") {
		w.Write([]byte("OK"))
		return
	}
	w.Write([]byte(`{"Version":"20.10.24","ApiVersion":"1.41"}`))
}

func (e *engine) lastPath() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.paths) == 0 {
		return ""
	}
	return e.paths[len(e.paths)-1]
}

// unsetDockerEnv clears the variables client.FromEnv reads, for this test.
func unsetDockerEnv(t *testing.T) {
	for _, k := range []string{client.EnvOverrideHost, client.EnvOverrideAPIVersion, client.EnvOverrideCertPath, client.EnvTLSVerify} {
		t.Setenv(k, "")
	}
}

func TestNew_Host(t *testing.T) {
	tests := []struct {
		name       string
		host       string
		dockerHost string
		want       string
	}{
		{"environment", "", "tcp://127.0.0.1:2375", "tcp://127.0.0.1:2375"},
		{"argument over the environment", "unix:///run/other.sock", "tcp://127.0.0.1:2375", "unix:///run/other.sock"},
		{"default socket", "", "", client.DefaultDockerHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unsetDockerEnv(t)
			t.Setenv(client.EnvOverrideHost, tt.dockerHost)
			c, err := dockerclient.New(tt.host)
			if err != nil {
				t.Fatalf("New(%q) = %v", tt.host, err)
			}
			t.Cleanup(func() { c.Close() })
			if got := c.DaemonHost(); got != tt.want {
				t.Errorf("New(%q).DaemonHost() with DOCKER_HOST=%q = %q, want %q", tt.host, tt.dockerHost, got, tt.want)
			}
		})
	}
}

func TestNew_NegotiatesAPIVersion(t *testing.T) {
	tests := []struct {
		name       string
		apiVersion string // DOCKER_API_VERSION
		wantPrefix string
	}{
		{"negotiated down to the engine's", "", "/v1.41/"},
		{"pinned by DOCKER_API_VERSION", "1.44", "/v1.44/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unsetDockerEnv(t)
			t.Setenv(client.EnvOverrideAPIVersion, tt.apiVersion)
			e := &engine{}
			srv := httptest.NewServer(e)
			t.Cleanup(srv.Close)
			c, err := dockerclient.New("tcp://" + srv.Listener.Addr().String())
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			t.Cleanup(func() { c.Close() })
			if _, err := c.ServerVersion(t.Context()); err != nil {
				t.Fatalf("ServerVersion() = %v", err)
			}
			if got := e.lastPath(); !strings.HasPrefix(got, tt.wantPrefix) {
				t.Errorf("ServerVersion() asked for %q, want a path under %s", got, tt.wantPrefix)
			}
		})
	}
}

func TestNew_Errors(t *testing.T) {
	t.Run("TLS material from DOCKER_CERT_PATH", func(t *testing.T) {
		unsetDockerEnv(t)
		t.Setenv(client.EnvOverrideCertPath, t.TempDir()) // no ca.pem, cert.pem, key.pem
		t.Setenv(client.EnvTLSVerify, "1")
		if c, err := dockerclient.New(""); err == nil {
			c.Close()
			t.Fatal("New(\"\") with an empty DOCKER_CERT_PATH = nil error, want the missing certificates")
		}
	})
	t.Run("bad host", func(t *testing.T) {
		unsetDockerEnv(t)
		c, err := dockerclient.New("not a host")
		if err == nil {
			c.Close()
			t.Fatal(`New("not a host") = nil error, want an error`)
		}
		if !strings.HasPrefix(err.Error(), "docker client: ") {
			t.Errorf(`New("not a host") = %q, want it to start with "docker client: "`, err)
		}
	})
}
