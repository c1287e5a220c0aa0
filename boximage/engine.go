package boximage

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/docker/docker/api/types/versions"
	docker "github.com/docker/docker/client"
	"github.com/moby/buildkit/client"

	"github.com/tangle-network/boxctl/internal/dockerclient"
)

// The routes by which a build reaches a Docker engine's own BuildKit.
const (
	// RouteEngineGRPC is BuildKit's gRPC API served on the engine's own
	// socket (HTTP/2 without TLS on a plain socket), with the build's
	// session on a gRPC stream of that API: engines of API 1.53 and later.
	RouteEngineGRPC = "grpc"
	// RouteEngineHijack is POST /grpc and POST /session of the Engine API,
	// each upgraded to h2c: every engine since 18.09, deprecated from API
	// 1.53 on.
	RouteEngineHijack = "hijack"
)

// engineGRPCSince is the first Engine API version whose engine serves
// BuildKit's gRPC API on its own socket.
const engineGRPCSince = "1.53"

// snapshotterLabel is the worker label of an engine whose BuildKit works on
// containerd's snapshotters, that is, an engine with the containerd image
// store (docker/buildx reads the same label).
const snapshotterLabel = "org.mobyproject.buildkit.worker.snapshotter"

// EngineBuildKit describes the BuildKit a Docker engine serves.
type EngineBuildKit struct {
	// Host is the engine's address (unix:///var/run/docker.sock).
	Host string
	// APIVersion is the newest Engine API version the engine speaks.
	APIVersion string
	// Route is how boxctl reaches its BuildKit: RouteEngineGRPC or
	// RouteEngineHijack.
	Route string
	// ContainerdStore reports an engine with the containerd image store.
	// Without it the engine's BuildKit exports only into the engine's own
	// image store: no OCI or Docker tarball, no cache export (--cache-to),
	// no multi-platform image, and a registry push goes through the engine
	// (docker push) after the build.
	ContainerdStore bool
}

// engine is a connected Docker engine whose BuildKit builds.
type engine struct {
	EngineBuildKit
	docker *docker.Client
}

// InspectEngine connects to the BuildKit of the Docker engine at host
// (default DOCKER_HOST, else the local socket) and describes it. Its error
// is a *BuildkitError when the engine or its BuildKit does not answer
// within timeout (default 10s).
func InspectEngine(ctx context.Context, host string, timeout time.Duration) (EngineBuildKit, error) {
	d, err := dockerclient.New(host)
	if err != nil {
		return EngineBuildKit{}, err
	}
	defer d.Close()
	c, e, err := connectEngine(ctx, d, timeout)
	if err != nil {
		return EngineBuildKit{}, err
	}
	c.Close()
	return e.EngineBuildKit, nil
}

// connectEngine connects a BuildKit client to the engine d: through the
// engine's gRPC socket where its API version serves one and the
// connection is not TLS (whose HTTP/2 needs ALPN the Docker client's TLS
// dial does not offer), else through /grpc and /session, as the "docker"
// driver of docker/buildx does. It waits, at most timeout, for the
// engine's BuildKit to list its workers.
func connectEngine(ctx context.Context, d *docker.Client, timeout time.Duration) (*client.Client, *engine, error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	e := &engine{EngineBuildKit: EngineBuildKit{Host: d.DaemonHost()}, docker: d}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	unreachable := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ictx.Err() != nil {
			err = fmt.Errorf("no answer within %v: %w", timeout, err)
		}
		return &BuildkitError{Addr: e.Host, Engine: true, Route: e.Route, Err: err}
	}
	// Ping reports the engine's own API version; the client's negotiated
	// one stops at the newest the client library knows.
	ping, err := d.Ping(ictx)
	if err != nil {
		return nil, nil, unreachable(err)
	}
	e.APIVersion = ping.APIVersion
	e.Route = engineRoute(e.APIVersion, isTLS(d))
	c, err := newEngineClient(ctx, d, e.Route)
	if err != nil {
		return nil, nil, unreachable(err)
	}
	workers, err := c.ListWorkers(ictx)
	if err != nil {
		c.Close()
		return nil, nil, unreachable(err)
	}
	for _, w := range workers {
		if _, ok := w.Labels[snapshotterLabel]; ok {
			e.ContainerdStore = true
		}
	}
	return c, e, nil
}

// engineRoute picks the route to an engine of API version v.
func engineRoute(v string, tls bool) string {
	if !tls && v != "" && versions.GreaterThanOrEqualTo(v, engineGRPCSince) {
		return RouteEngineGRPC
	}
	return RouteEngineHijack
}

// isTLS reports whether d speaks TLS to its engine.
func isTLS(d *docker.Client) bool {
	t, ok := d.HTTPClient().Transport.(*http.Transport)
	return ok && t.TLSClientConfig != nil
}

// newEngineClient makes a BuildKit client whose connections go to the
// engine d by route.
func newEngineClient(ctx context.Context, d *docker.Client, route string) (*client.Client, error) {
	if route == RouteEngineGRPC {
		// No session dialer: the client runs the session on the Control
		// API's Session stream of the same connection.
		return client.New(ctx, "", client.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return d.Dialer()(ctx)
		}))
	}
	return client.New(ctx, "",
		client.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return d.DialHijack(ctx, "/grpc", "h2c", nil)
		}),
		client.WithSessionDialer(func(ctx context.Context, proto string, meta map[string][]string) (net.Conn, error) {
			return d.DialHijack(ctx, "/session", proto, meta)
		}))
}

// check refuses, before the build, what the engine's BuildKit cannot do.
func (e *engine) check(opts BuildOptions) error {
	if e.ContainerdStore {
		return nil
	}
	switch {
	case len(opts.CacheTo) > 0:
		return &EngineError{Host: e.Host, Feature: FeatureCacheExport}
	case isMultiPlatform(opts.Platform):
		return &EngineError{Host: e.Host, Feature: FeatureMultiPlatform}
	}
	return nil
}

// isMultiPlatform reports a platform list of more than one.
func isMultiPlatform(platform string) bool { return strings.Contains(platform, ",") }
