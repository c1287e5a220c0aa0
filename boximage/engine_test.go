package boximage_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	controlapi "github.com/moby/buildkit/api/services/control"
	apitypes "github.com/moby/buildkit/api/types"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// fakeEngine is a Docker engine as far as its BuildKit routes go: /_ping
// answers its API version; BuildKit's Control API (ListWorkers only) is
// served both as gRPC on the socket itself, as engines of API 1.53 and
// later do, and on POST /grpc upgraded to h2c, as every engine since 18.09
// does; anything else (POST /session, say) is a 404. It records which
// route each request took.
type fakeEngine struct {
	controlapi.UnimplementedControlServer
	api    string
	labels map[string]string

	mu   sync.Mutex
	seen []string
}

func (f *fakeEngine) see(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, s)
}

func (f *fakeEngine) routes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

func (f *fakeEngine) ListWorkers(context.Context, *controlapi.ListWorkersRequest) (*controlapi.ListWorkersResponse, error) {
	return &controlapi.ListWorkersResponse{Record: []*apitypes.WorkerRecord{{ID: "moby", Labels: f.labels}}}, nil
}

// start serves f on a unix socket and returns its DOCKER_HOST.
func (f *fakeEngine) start(t *testing.T) string {
	t.Helper()
	gs := grpc.NewServer()
	controlapi.RegisterControlServer(gs, f)
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc"):
			f.see("socket " + r.URL.Path)
			gs.ServeHTTP(w, r)
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			w.Header().Set("Api-Version", f.api)
			w.Write([]byte("OK"))
		case r.Method == http.MethodPost && r.URL.Path == "/grpc" && r.Header.Get("Upgrade") == "h2c":
			f.see("hijack /grpc")
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			conn.Write([]byte("HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"))
			(&http2.Server{}).ServeConn(conn, &http2.ServeConnOpts{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.see("h2c " + r.URL.Path)
				gs.ServeHTTP(w, r)
			})})
		default:
			f.see(r.Method + " " + r.URL.Path)
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() {
		srv.Close()
		gs.Stop()
	})
	return "unix://" + sock
}

// TestInspectEngine_route checks how a build reaches the engine's own
// BuildKit by the engine's API version: through /grpc (and /session)
// before 1.53, through gRPC on the engine's socket from 1.53 on, and that
// a snapshotter label on its worker means the containerd image store.
// This machine's engine speaks 1.41: the 1.53 route is tested here only.
func TestInspectEngine_route(t *testing.T) {
	const listWorkers = "/moby.buildkit.v1.Control/ListWorkers"
	tests := []struct {
		api        string
		labels     map[string]string
		wantRoute  string
		wantSeen   []string
		wantStore  bool
		wantAPIVer string
	}{
		{api: "1.41", wantRoute: boximage.RouteEngineHijack, wantSeen: []string{"hijack /grpc", "h2c " + listWorkers}},
		{api: "1.52", wantRoute: boximage.RouteEngineHijack, wantSeen: []string{"hijack /grpc", "h2c " + listWorkers}},
		{api: "1.53", wantRoute: boximage.RouteEngineGRPC, wantSeen: []string{"socket " + listWorkers}},
		{api: "1.54", labels: map[string]string{"org.mobyproject.buildkit.worker.snapshotter": "overlayfs"},
			wantRoute: boximage.RouteEngineGRPC, wantSeen: []string{"socket " + listWorkers}, wantStore: true},
	}
	for _, tt := range tests {
		t.Run("api "+tt.api, func(t *testing.T) {
			f := &fakeEngine{api: tt.api, labels: tt.labels}
			host := f.start(t)
			got, err := boximage.InspectEngine(t.Context(), host, 5*time.Second)
			if err != nil {
				t.Fatalf("InspectEngine(%s) = %v", host, err)
			}
			want := boximage.EngineBuildKit{Host: host, APIVersion: tt.api, Route: tt.wantRoute, ContainerdStore: tt.wantStore}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("InspectEngine(%s) (-want +got):\n%s", host, diff)
			}
			if diff := cmp.Diff(tt.wantSeen, f.routes()); diff != "" {
				t.Errorf("routes the engine saw (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuild_engineRefuses checks that a build asking the engine's own
// BuildKit for what only the containerd image store allows fails before
// it starts, with an *EngineError, and that an engine with that store is
// asked.
func TestBuild_engineRefuses(t *testing.T) {
	t.Setenv("BUILDKIT_HOST", "")
	tests := []struct {
		name     string
		opts     boximage.BuildOptions
		feature  string
		c8dStore bool
	}{
		{name: "cache export", opts: boximage.BuildOptions{CacheTo: []string{"127.0.0.1:5000/cache:x"}},
			feature: boximage.FeatureCacheExport},
		{name: "multi-platform", opts: boximage.BuildOptions{Platform: "linux/amd64,linux/arm64"},
			feature: boximage.FeatureMultiPlatform},
		{name: "cache export with the containerd store", opts: boximage.BuildOptions{CacheTo: []string{"127.0.0.1:5000/cache:x"}},
			c8dStore: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeEngine{api: "1.41"}
			if tt.c8dStore {
				f.labels = map[string]string{"org.mobyproject.buildkit.worker.snapshotter": "overlayfs"}
			}
			opts := tt.opts
			opts.DockerHost, opts.Dockerfile = f.start(t), []byte("FROM scratch\n")
			exp, err := boximage.NewRegistryExporter("127.0.0.1:5000/boxctl-test/refused:x")
			if err != nil {
				t.Fatal(err)
			}
			_, err = boximage.Build(t.Context(), opts, exp)
			var ee *boximage.EngineError
			if tt.feature == "" {
				// The fake serves no session: the build got that far.
				if errors.As(err, &ee) || err == nil || !slices.Contains(f.routes(), "POST /session") {
					t.Fatalf("Build() = %v after routes %v, want the build to open its session", err, f.routes())
				}
				return
			}
			if !errors.As(err, &ee) || !errors.Is(err, boximage.ErrEngineUnsupported) || ee.Feature != tt.feature {
				t.Fatalf("Build() = %v, want an *EngineError for %s", err, tt.feature)
			}
			for _, w := range []string{opts.DockerHost, tt.feature, "containerd image store", "--buildkit-addr", "docker-container://"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Build() = %q, want it to contain %q", err, w)
				}
			}
			if seen := f.routes(); len(seen) != 2 {
				t.Errorf("the engine saw %v, want only the connection check", seen)
			}
		})
	}
}

// TestInspectEngine_live describes the test bed's engine: Debian's
// 20.10 (API 1.41) with the classic image store, reached through /grpc.
func TestInspectEngine_live(t *testing.T) {
	env := testbed.Require(t)
	got, err := boximage.InspectEngine(t.Context(), env.DockerHost, 10*time.Second)
	if err != nil {
		t.Fatalf("InspectEngine(%s) = %v", env.DockerHost, err)
	}
	t.Logf("engine %+v", got)
	if got.Host != env.DockerHost || got.APIVersion == "" || got.Route != boximage.RouteEngineHijack && got.Route != boximage.RouteEngineGRPC {
		t.Errorf("InspectEngine(%s) = %+v, want its host, API version and a route", env.DockerHost, got)
	}
}
