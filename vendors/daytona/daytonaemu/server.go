package daytonaemu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/emukit"
)

// Options configure a Server. The zero value of every field but APIKey
// works.
type Options struct {
	// APIKey is the only bearer the server accepts. Required.
	APIKey string
	// Addr is the address to listen on. Default "127.0.0.1:0" (a free
	// port).
	Addr string
	// DockerHost is the engine sandboxes run on. Default DOCKER_HOST, else
	// the local socket.
	DockerHost string
	// Network is the Docker network of the sandboxes. Default
	// docker.DefaultNetwork.
	Network string
	// Runtime is the runtime of the sandboxes' containers, as the Docker
	// vendor's WithRuntime takes it (vendors.RuntimeGVisor). Default the
	// engine's.
	Runtime string
	// EgressResolver resolves the names a sandbox with network rules may
	// reach (its relay's lookups). Default: this machine's resolver.
	EgressResolver *net.Resolver
	// Registry is the OCI registry (host:port) that registry push access
	// points at. Default DefaultRegistry.
	Registry string
	// BuildkitAddr is the buildkitd of declarative builds (sandboxes
	// created from an image or a Dockerfile). Default $BUILDKIT_HOST, else
	// the sandboxes' Docker engine's own BuildKit, which writes the image
	// straight into that engine's store.
	BuildkitAddr string
	// Project is the registry project in push access. Default "daytona".
	Project string
	// ProxyDomain is the domain of preview URLs,
	// http://{port}-{sandboxId}.{ProxyDomain} (a name the clients must
	// resolve to this server). Default none: every sandbox port's preview
	// URL is a loopback listener of its own, http://127.0.0.1:{p}, which
	// resolves anywhere on this machine.
	ProxyDomain string
	// Snapshots are active snapshots to start with: name -> image
	// reference the engine has or can pull.
	Snapshots map[string]string
	// MaxLifetime bounds the container of a sandbox whose environment
	// names no BOX_DEADLINE. Default 24h.
	MaxLifetime time.Duration
	// Faults are the faults to inject from the start (see SetFaults). A
	// failed call that is not a GET takes effect before its 5xx at
	// LostRate; a 429 names its throttler (Retry-After-<throttler>).
	Faults Faults
	// Log receives a line per state change. Default discards.
	Log *slog.Logger
}

// DefaultRegistry is the registry push access hands out by default: the
// local registry of the test bed and of `boxctl emulate daytona`.
const DefaultRegistry = "127.0.0.1:5000"

// Server is a running emulator. It is safe for concurrent use.
type Server struct {
	opts   Options
	url    string // http://host:port
	ln     *emukit.Listener
	boxes  *emukit.Registry
	engine *client.Client // the boxes' engine
	faults *emukit.Injector
	proxy  *http.Transport // to the sandboxes' ports
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	pushUser, pushSecret string

	buildMu sync.Mutex // one declarative build at a time

	mu        sync.Mutex
	sandboxes map[string]*sandbox     // by id
	previews  map[string]net.Listener // by sandbox id:port
	listeners map[chan event]struct{} // open events connections
	snapshots map[string]*snapshot
	committed []string // images of sandbox snapshots, removed on Close
	created   int      // sandboxes ever created, for cursors
}

// New listens and serves the emulator until Close.
func New(opts Options) (*Server, error) {
	if opts.APIKey == "" {
		return nil, errors.New("daytonaemu: an API key is required")
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Network == "" {
		opts.Network = docker.DefaultNetwork
	}
	if opts.Registry == "" {
		opts.Registry = DefaultRegistry
	}
	if opts.Project == "" {
		opts.Project = "daytona"
	}
	if opts.MaxLifetime <= 0 {
		opts.MaxLifetime = 24 * time.Hour
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	faults, err := emukit.NewInjector(emukit.InjectorOptions{Faults: opts.Faults, Throttled: throttled, Failed: failed,
		Lost: func(r *http.Request) bool { return r.Method != http.MethodGet }})
	if err != nil {
		return nil, fmt.Errorf("daytonaemu: %w", err)
	}
	boxes, err := emukit.NewRegistry(emukit.RegistryOptions{DockerHost: opts.DockerHost, Network: opts.Network, Log: opts.Log, Runtime: opts.Runtime,
		EgressResolver: opts.EgressResolver})
	if err != nil {
		return nil, fmt.Errorf("daytonaemu: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opts: opts, boxes: boxes, engine: boxes.Engine(), faults: faults, ctx: ctx, cancel: cancel,
		pushUser: "robot$push-" + newID(4), pushSecret: newID(16),
		sandboxes: map[string]*sandbox{}, snapshots: map[string]*snapshot{},
		previews: map[string]net.Listener{}, listeners: map[chan event]struct{}{},
		// The containers' addresses are on this machine's Docker network:
		// never through an HTTP proxy of the environment.
		proxy: &http.Transport{DialContext: (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}}
	now := time.Now().UTC()
	for name, ref := range opts.Snapshots {
		snap := &snapshot{ID: newUUID(), OrgID: orgID, Name: name, ImageName: ref, State: snapshotActive,
			CPU: 1, Mem: 1, Disk: 3, CreatedAt: now, UpdatedAt: now, image: ref}
		s.snapshots[snap.ID] = snap
	}
	if s.ln, err = emukit.Listen(opts.Addr, s); err != nil {
		cancel()
		boxes.Close()
		return nil, fmt.Errorf("daytonaemu: listen: %w", err)
	}
	s.url = s.ln.URL()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.sweep()
	}()
	return s, nil
}

// URL returns the server's base URL (http://host:port).
func (s *Server) URL() string { return s.url }

// APIURL returns the control plane's URL: what DAYTONA_API_URL takes.
func (s *Server) APIURL() string { return s.url + "/api" }

// Close stops serving and removes every sandbox's container.
func (s *Server) Close() error {
	s.cancel() // every sandbox's streams end
	err := s.ln.Close()
	s.mu.Lock()
	s.closePreviews("")
	s.mu.Unlock()
	s.wg.Wait()
	s.proxy.CloseIdleConnections()
	// The containers go first: the committed images are theirs.
	err = errors.Join(err, s.boxes.RemoveAll(), s.removeCommitted())
	return errors.Join(err, s.boxes.Close())
}

// ServeHTTP routes by host: preview hosts to the sandbox's port, the rest
// to the control plane (/api) and the toolbox proxy (/toolbox).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if port, id, ok := s.previewHost(r.Host); ok {
		s.preview(w, r, port, id)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, eventsPath):
		s.events(w, r)
	case strings.HasPrefix(r.URL.Path, "/api/"):
		if r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey {
			writeError(w, r, http.StatusUnauthorized, "Unauthorized")
			return
		}
		if r.URL.Path == "/api"+emukit.SwitchPath {
			s.faults.ServeSwitch(w, r)
			return
		}
		s.faults.Serve(w, r, http.HandlerFunc(s.api))
	case strings.HasPrefix(r.URL.Path, "/toolbox/"):
		s.toolbox(w, r)
	default:
		writeError(w, r, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
	}
}

// orgID is the one organization's id.
const orgID = "00000000-0000-4000-8000-00000000da7a"

func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newUUID() string {
	h := newID(16)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers the control plane's error body (AllExceptionsFilter):
// {path, timestamp, statusCode, error, message}.
func writeError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeJSON(w, status, map[string]any{
		"path": r.URL.RequestURI(), "timestamp": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		"statusCode": status, "error": http.StatusText(status), "message": msg,
	})
}

// toolboxError answers the toolbox's and the proxy's error body
// (common-go ErrorResponse): {statusCode, message, code, timestamp, path,
// method}.
func toolboxError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	writeJSON(w, status, map[string]any{
		"statusCode": status, "message": msg, "code": code,
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "path": r.URL.Path, "method": r.Method,
	})
}
