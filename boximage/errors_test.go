package boximage_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// freeAddr returns a loopback TCP address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentAddr returns a loopback TCP address that accepts connections and
// never answers.
func silentAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestBuild_unreachableBuildkit checks the error of a BuildKit that does
// not answer, and which one a build dials: BuildOptions.BuildkitAddr, else
// $BUILDKIT_HOST, else the Docker engine's own at BuildOptions.DockerHost,
// else DOCKER_HOST.
func TestBuild_unreachableBuildkit(t *testing.T) {
	const missing = "dial unix /nonexistent.sock: connect: no such file or directory"
	const missingEngine = "Cannot connect to the Docker daemon at unix:///nonexistent-docker.sock"
	tests := []struct {
		name, addr, env string // BuildOptions.BuildkitAddr, $BUILDKIT_HOST
		dockerHost      string // BuildOptions.DockerHost; DOCKER_HOST is unix:///nonexistent-docker.sock
		want, wantCause string // the address dialled, the cause shown
		engine          bool   // want the Docker engine's error
	}{
		{name: "missing socket", addr: "unix:///nonexistent.sock", want: "unix:///nonexistent.sock", wantCause: missing},
		{name: "closed port", addr: "tcp://" + freeAddr(t), wantCause: "connection refused"},
		{name: "silent port", addr: "tcp://" + silentAddr(t), wantCause: "no answer within 500ms"},
		{name: "BUILDKIT_HOST", env: "unix:///nonexistent.sock", want: "unix:///nonexistent.sock", wantCause: missing},
		{name: "address over BUILDKIT_HOST", addr: "unix:///nonexistent.sock", env: "tcp://" + freeAddr(t),
			want: "unix:///nonexistent.sock", wantCause: missing},
		{name: "docker-container helper", addr: "docker-container://boxctl-no-such-container",
			want: "docker-container://boxctl-no-such-container", wantCause: "boxctl-no-such-container"},
		{name: "engine of DOCKER_HOST", want: "unix:///nonexistent-docker.sock", wantCause: missingEngine, engine: true},
		{name: "engine of DockerHost", dockerHost: "tcp://" + freeAddr(t), wantCause: "Cannot connect to the Docker daemon", engine: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("BUILDKIT_HOST", tt.env)
			t.Setenv("DOCKER_HOST", "unix:///nonexistent-docker.sock")
			want := tt.want
			if want == "" {
				want = tt.addr + tt.dockerHost
			}
			start := time.Now()
			_, err := boximage.Build(t.Context(), boximage.BuildOptions{BuildkitAddr: tt.addr, DockerHost: tt.dockerHost,
				Dockerfile: []byte("FROM scratch\n"), ConnectTimeout: 500 * time.Millisecond}, &boximage.RegistryExporter{})
			took := time.Since(start)
			var be *boximage.BuildkitError
			if !errors.As(err, &be) || !errors.Is(err, boximage.ErrBuildkitUnreachable) || be.Addr != want || be.Engine != tt.engine {
				t.Fatalf("Build(%q) with BUILDKIT_HOST=%q = %v, want a *BuildkitError for %s (engine %v)", tt.addr, tt.env, err, want, tt.engine)
			}
			wants := []string{"buildkitd at " + want + " is unreachable", tt.wantCause, "--buildkit-addr", "BUILDKIT_HOST"}
			if tt.engine {
				wants[0] = "the Docker engine at " + want + " is unreachable"
				wants = append(wants, "DOCKER_HOST")
			}
			for _, w := range wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Build(%q) = %q, want it to contain %q", tt.addr, err, w)
				}
			}
			if took > 3*time.Second {
				t.Errorf("Build(%q) took %v to fail, want seconds at most", tt.addr, took)
			}
		})
	}
}

// refusingRegistry serves go-containerregistry's in-memory registry behind
// refuse, which answers a request itself when it returns true.
func refusingRegistry(t *testing.T, refuse func(w http.ResponseWriter, r *http.Request) bool) string {
	t.Helper()
	reg := registry.New(registry.Logger(nopLogger()))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !refuse(w, r) {
			reg.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func ociError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(`{"errors":[{"code":"` + code + `","message":"` + msg + `"}]}`))
}

func TestBuild_pushRefused(t *testing.T) {
	env := testbed.Require(t)
	const user, password = "robot", "s3cret-pass"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	tests := []struct {
		name   string
		refuse func(w http.ResponseWriter, r *http.Request) bool
		// wantBuilt reports that the refusal comes after the build.
		wantBuilt  bool
		wantStatus int
		wantMsg    string
	}{
		{"401 echoing the credentials", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("WWW-Authenticate", `Basic realm="boxctl-test"`)
			if r.URL.Path == "/v2/" && r.Header.Get("Authorization") == "" {
				w.WriteHeader(http.StatusUnauthorized)
				return true
			}
			ociError(w, http.StatusUnauthorized, "UNAUTHORIZED", "bad login: "+r.Header.Get("Authorization")+" password "+password)
			return true
		}, false, 401, "UNAUTHORIZED: bad login: Basic [redacted] password [redacted]"},
		{"403 on upload", func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodPost {
				ociError(w, http.StatusForbidden, "DENIED", "robot may not push to boxctl-test/refused")
				return true
			}
			return false
		}, false, 403, "DENIED: robot may not push to boxctl-test/refused"},
		{"403 on the manifest", func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
				ociError(w, http.StatusForbidden, "DENIED", "tag is immutable")
				return true
			}
			return false
		}, true, 0, "denied: tag is immutable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := refusingRegistry(t, tt.refuse)
			ref := host + "/boxctl-test/refused:" + nonce()
			exp, err := boximage.NewRegistryExporter(ref)
			if err != nil {
				t.Fatal(err)
			}
			var progress bytes.Buffer
			opts := smallOptions(t, env, nonce(), &progress)
			opts.Dockerfile = []byte("FROM scratch\nCOPY hello.txt /hello.txt\n")
			opts.Auth = map[string]boximage.RegistryAuth{host: {Username: user, Password: password}}
			_, err = boximage.Build(t.Context(), opts, exp)
			var pe *boximage.PushError
			if !errors.As(err, &pe) || !errors.Is(err, boximage.ErrPushDenied) {
				t.Fatalf("Build() = %v, want a *PushError matching ErrPushDenied", err)
			}
			if pe.Status != tt.wantStatus || pe.Message != tt.wantMsg || pe.Reference != ref || pe.Registry != host {
				t.Errorf("Build() error = %+v, want status %d, message %q, reference %s", pe, tt.wantStatus, tt.wantMsg, ref)
			}
			for _, want := range []string{"push " + ref, tt.wantMsg, "docker login " + host} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Build() = %q, want it to contain %q", err, want)
				}
			}
			for _, secret := range []string{password, basic} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("Build() = %q echoes a credential", err)
				}
			}
			if built := strings.Contains(progress.String(), "DONE"); built != tt.wantBuilt {
				t.Errorf("build ran = %v, want %v:\n%s", built, tt.wantBuilt, progress.String())
			}
		})
	}
}

// TestBuild_integrity builds a forged lock against the test bed: npm ci
// refuses it, and the error quotes npm rather than only an exit code. The
// tarball comes from the build context, so the test needs no network.
func TestBuild_integrity(t *testing.T) {
	env := testbed.Require(t)
	const forged = "sha512-Zm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZw=="
	dir := t.TempDir()
	files := map[string]string{
		"tiny-1.0.0.tgz": tinyTarball(t),
		"package.json":   `{"name":"forged","version":"0.0.0","private":true,"dependencies":{"tiny":"file:tiny-1.0.0.tgz"}}`,
		"package-lock.json": `{"name":"forged","version":"0.0.0","lockfileVersion":3,"requires":true,"packages":{
"":{"name":"forged","version":"0.0.0","dependencies":{"tiny":"file:tiny-1.0.0.tgz"}},
"node_modules/tiny":{"version":"1.0.0","resolved":"file:tiny-1.0.0.tgz","integrity":"` + forged + `"}}}`,
	}
	for n, c := range files {
		if err := writeFile(dir, n, c); err != nil {
			t.Fatal(err)
		}
	}
	var progress bytes.Buffer
	opts := boximage.BuildOptions{BuildkitAddr: env.BuildkitHost, ContextDir: dir, Progress: &progress,
		ProgressMode: boximage.ProgressPlain, BuildArgs: map[string]string{"BASE": env.BaseImage},
		Dockerfile: []byte("ARG BASE\nFROM ${BASE}\nWORKDIR /app\nCOPY . ./\n" +
			"RUN npm ci --offline --no-audit --no-fund --no-update-notifier --loglevel=warn # " + nonce() + "\n")}
	exp, err := boximage.NewRegistryExporter(env.Registry + "/boxctl-test/forged:" + nonce())
	if err != nil {
		t.Fatal(err)
	}
	_, err = boximage.Build(t.Context(), opts, exp)
	var se *boximage.StepError
	if !errors.As(err, &se) || !errors.Is(err, boximage.ErrIntegrity) {
		t.Fatalf("Build() = %v, want a *StepError matching ErrIntegrity\n%s", err, progress.String())
	}
	for _, want := range []string{"step [4/4] RUN npm ci", "exit code: 1", "npm error code EINTEGRITY",
		"wanted " + forged + " but got sha512-", "boxctl pins verify"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Build() = %q, want it to contain %q", err, want)
		}
	}
	t.Logf("Build() = %v", err)
	if strings.Contains(err.Error(), "seems to be corrupted") {
		t.Errorf("Build() = %q, want only npm's error lines", err)
	}
}

// tinyTarball returns an npm package tarball of tiny@1.0.0.
func tinyTarball(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	pj := []byte(`{"name":"tiny","version":"1.0.0"}`)
	if err := tw.WriteHeader(&tar.Header{Name: "package/package.json", Mode: 0o644, Size: int64(len(pj))}); err != nil {
		t.Fatal(err)
	}
	tw.Write(pj)
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func writeFile(dir, name, content string) error {
	return os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
}

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }
