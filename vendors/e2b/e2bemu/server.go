package e2bemu

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// Defaults.
const (
	// DefaultDomain is the domain the emulator serves: api.{domain} and
	// {port}-{sandboxID}.{domain}.
	DefaultDomain = "e2b.local"
	// DefaultMaxTimeout is the longest a sandbox may run (E2B's Hobby
	// plan).
	DefaultMaxTimeout = time.Hour
	// EnvdPort is envd's port in every sandbox.
	EnvdPort = 49983
)

// Options configures a Server. The zero value of every field but APIKey
// works.
type Options struct {
	// APIKey is the only X-API-Key the control plane accepts. Required.
	APIKey string
	// Domain is the domain served. Default DefaultDomain.
	Domain string
	// DockerHost is the Docker engine the sandboxes run on. Default
	// DOCKER_HOST, else the local socket.
	DockerHost string
	// Network is the Docker network of the sandboxes' containers.
	// Default the Docker vendor's.
	Network string
	// MaxTimeout is the longest lifetime of a sandbox, from its start.
	// Default DefaultMaxTimeout.
	MaxTimeout time.Duration
	// MaxSandboxes limits concurrent sandboxes (429 beyond, as E2B's plan
	// limit); zero means no limit.
	MaxSandboxes int
	// Templates maps template IDs (or names) to images on the engine or
	// in a registry, usable without a build. Optional.
	Templates map[string]string
	// ECREndpoint is the ECR API endpoint used to turn "aws" registry
	// credentials into a registry login, as E2B does natively for ECR.
	// Empty: builds from "aws" registries fail.
	ECREndpoint string
	// Faults are the initial fault switches (SetFaults changes them).
	Faults Faults
	// Log receives one record per sandbox and build transition. Default
	// discards.
	Log *slog.Logger
}

// Faults are the emulator's fault switches. The zero value injects none.
type Faults struct {
	// ErrorRate is the share (0..1) of control plane calls answered with
	// an error status instead: 429 or 503, at random.
	ErrorRate float64
	// LostRate is the share (0..1) of create calls chosen to fail with
	// 503 that make the sandbox anyway before answering, as when a
	// create's answer is lost.
	LostRate float64
	// CreateDelay delays every create by this long.
	CreateDelay time.Duration
	// VanishAfter makes every sandbox vanish (killed without any call)
	// this long after its create; zero means never.
	VanishAfter time.Duration
}

// Server is the emulator, an http.Handler.
type Server struct {
	opts   Options
	log    *slog.Logger
	docker *docker.Vendor
	cli    *client.Client
	runTag string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	api    *http.ServeMux
	envd   *http.ServeMux

	mu        sync.Mutex
	faults    Faults
	sandboxes map[string]*sandbox
	pending   int // creates in flight, for MaxSandboxes
	builds    map[string]*build
	templates map[string]*template // by ID and by name
}

// New returns an emulator on the Docker engine of opts. Close it.
func New(opts Options) (*Server, error) {
	if opts.APIKey == "" {
		return nil, errors.New("e2bemu: APIKey is required")
	}
	if opts.Domain == "" {
		opts.Domain = DefaultDomain
	}
	opts.Domain = strings.ToLower(strings.TrimSuffix(opts.Domain, "."))
	if opts.MaxTimeout <= 0 {
		opts.MaxTimeout = DefaultMaxTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	dopts := []docker.Option{docker.WithHost(opts.DockerHost), docker.WithLogger(opts.Log)}
	if opts.Network != "" {
		dopts = append(dopts, docker.WithNetwork(opts.Network))
	}
	dv, err := docker.New(dopts...)
	if err != nil {
		return nil, err
	}
	cli, err := dockerclient.New(opts.DockerHost)
	if err != nil {
		dv.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opts: opts, log: opts.Log, docker: dv, cli: cli, runTag: "e2bemu-" + randomString(10, lowerDigits),
		ctx: ctx, cancel: cancel, api: http.NewServeMux(), envd: http.NewServeMux(), faults: opts.Faults,
		sandboxes: map[string]*sandbox{}, builds: map[string]*build{}, templates: map[string]*template{}}
	for id, img := range opts.Templates {
		s.templates[id] = &template{id: id, image: img, ready: true}
	}
	s.routeAPI()
	s.routeEnvd()
	return s, nil
}

// Domain returns the domain served.
func (s *Server) Domain() string { return s.opts.Domain }

// RunTag returns the run tag of the Docker boxes behind the sandboxes.
func (s *Server) RunTag() string { return s.runTag }

// SetFaults changes the fault switches from now on.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
}

// Backend returns the Docker box behind a sandbox, for tests that check
// what the engine shows of it.
func (s *Server) Backend(sandboxID string) (vendors.Box, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[sandboxID]
	if !ok {
		return nil, false
	}
	return sb.box, true
}

// Sandboxes returns the ids of the sandboxes alive.
func (s *Server) Sandboxes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.sandboxes))
	for id := range s.sandboxes {
		out = append(out, id)
	}
	return out
}

// Vanish kills a sandbox behind its clients' backs, as a host failure
// would: no call, every stream of it cut. It reports whether the sandbox
// existed.
func (s *Server) Vanish(sandboxID string) bool {
	return s.kill(sandboxID, "vanished")
}

// Close kills every sandbox, stops template builds and releases the
// engine connection.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	ids := make([]string, 0, len(s.sandboxes))
	for id := range s.sandboxes {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.kill(id, "emulator closed")
	}
	s.wg.Wait()
	s.cli.Close()
	return s.docker.Close()
}

// ServeHTTP routes by host: {port}-{sandboxID}.{domain} (or an IP host with
// E2b-Sandbox-Id and E2b-Sandbox-Port) to the sandbox, everything else to
// the control plane.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, port, ok, err := s.target(r)
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	case ok:
		s.serveSandbox(w, r, id, port)
	default:
		s.serveAPI(w, r)
	}
}

// target reads the sandbox and port a request is for, as E2B's proxy does.
func (s *Server) target(r *http.Request) (id string, port int, ok bool, err error) {
	host := r.Host
	if h, _, serr := net.SplitHostPort(host); serr == nil {
		host = h
	}
	host = strings.ToLower(host)
	if ip := net.ParseIP(host); ip != nil || host == "localhost" {
		sid, sport := r.Header.Get("E2b-Sandbox-Id"), r.Header.Get("E2b-Sandbox-Port")
		if sid == "" && sport == "" {
			return "", 0, false, nil
		}
		if sid == "" || sport == "" {
			return "", 0, false, errors.New("missing header: E2b-Sandbox-Id or E2b-Sandbox-Port")
		}
		p, perr := strconv.Atoi(sport)
		if perr != nil {
			return "", 0, false, fmt.Errorf("invalid sandbox port %q", sport)
		}
		return sid, p, true, nil
	}
	sub, ok := strings.CutSuffix(host, "."+s.opts.Domain)
	if !ok || sub == "api" || strings.Contains(sub, ".") {
		return "", 0, false, nil
	}
	ps, sid, ok := strings.Cut(sub, "-")
	if !ok {
		return "", 0, false, fmt.Errorf("invalid host %q", r.Host)
	}
	p, perr := strconv.Atoi(ps)
	if perr != nil {
		return "", 0, false, fmt.Errorf("invalid sandbox port %q", ps)
	}
	if i := strings.IndexByte(sid, '-'); i >= 0 {
		sid = sid[:i]
	}
	return sid, p, true, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers E2B's error body {code, message}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

const (
	lowerDigits = "abcdefghijklmnopqrstuvwxyz0123456789"
	hexDigits   = "0123456789abcdef"
)

func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

func newUUID() string {
	h := randomString(32, hexDigits)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// chance reports true with probability p.
func chance(p float64) bool { return p > 0 && mrand.Float64() < p }

// SDKEnv is the environment that points E2B's official SDKs, unchanged,
// at an emulator served at base (http://host:port): the control plane at
// base, and all envd traffic to base too (E2B_SANDBOX_URL), where the
// SDKs name the sandbox and port in the E2b-Sandbox-Id and
// E2b-Sandbox-Port headers.
func SDKEnv(base, domain, apiKey string) map[string]string {
	return map[string]string{"E2B_API_URL": base, "E2B_SANDBOX_URL": base, "E2B_DOMAIN": domain, "E2B_API_KEY": apiKey}
}
