package e2bemu

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/emukit"
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
	// Addr, when set, is the address (host:port; port 0 picks a free
	// one) New listens on and serves the Server at until Close: see URL.
	// Empty: the caller serves the Server, an http.Handler.
	Addr string
	// Domain is the domain served. Default DefaultDomain.
	Domain string
	// DockerHost is the Docker engine the sandboxes run on. Default
	// DOCKER_HOST, else the local socket.
	DockerHost string
	// Network is the Docker network of the sandboxes' containers.
	// Default the Docker vendor's.
	Network string
	// Runtime is the runtime of the sandboxes' containers, as the Docker
	// vendor's WithRuntime takes it (vendors.RuntimeGVisor). Default the
	// engine's.
	Runtime string
	// EgressResolver resolves the names a sandbox with network rules may
	// reach (its relay's lookups). Default: this machine's resolver.
	EgressResolver *net.Resolver
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
	// Faults are the initial fault switches (SetFaults changes them). A
	// failed create's 503 comes after the sandbox was made at LostRate.
	Faults Faults
	// Log receives one record per sandbox and build transition. Default
	// discards.
	Log *slog.Logger
}

// Faults are the emulator's fault switches, those of every emulator. The
// zero value injects none.
type Faults = emukit.Faults

// Server is the emulator, an http.Handler.
type Server struct {
	opts   Options
	log    *slog.Logger
	boxes  *emukit.Registry
	cli    *client.Client // the boxes' engine
	ln     *emukit.Listener
	faults *emukit.Injector
	runTag string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	api    *http.ServeMux
	envd   *http.ServeMux

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	pending   int // creates in flight, for MaxSandboxes
	builds    map[string]*build
	templates map[string]*template // by ID and by name
	// forkImages counts the users of each fork's image: its sandboxes
	// and the fork call starting them (fork.go).
	forkImages map[string]int
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
	faults, err := emukit.NewInjector(emukit.InjectorOptions{Faults: opts.Faults, Throttled: throttled, Failed: failed,
		Lost: func(r *http.Request) bool {
			return r.Method == http.MethodPost && (r.URL.Path == "/v2/sandboxes" || r.URL.Path == "/sandboxes")
		}})
	if err != nil {
		return nil, fmt.Errorf("e2bemu: %w", err)
	}
	boxes, err := emukit.NewRegistry(emukit.RegistryOptions{DockerHost: opts.DockerHost, Network: opts.Network, Log: opts.Log, Runtime: opts.Runtime,
		EgressResolver: opts.EgressResolver})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opts: opts, log: opts.Log, boxes: boxes, cli: boxes.Engine(), faults: faults, runTag: "e2bemu-" + randomString(10, lowerDigits),
		ctx: ctx, cancel: cancel, api: http.NewServeMux(), envd: http.NewServeMux(),
		sandboxes: map[string]*sandbox{}, builds: map[string]*build{}, templates: map[string]*template{}, forkImages: map[string]int{}}
	for id, img := range opts.Templates {
		s.templates[id] = &template{id: id, image: img, ready: true}
	}
	s.routeAPI()
	s.routeEnvd()
	if opts.Addr != "" {
		if s.ln, err = emukit.Listen(opts.Addr, s); err != nil {
			s.Close()
			return nil, fmt.Errorf("e2bemu: listen: %w", err)
		}
	}
	return s, nil
}

// throttled answers a call refused by the faults with 429, as E2B's rate
// limit does.
func throttled(w http.ResponseWriter, _ *http.Request, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(emukit.Seconds(wait)))
	writeError(w, http.StatusTooManyRequests, "Rate limit exceeded, please try again later.")
}

// failed answers a call failed by the faults with a 5xx.
func failed(w http.ResponseWriter, _ *http.Request, status int) {
	msg := http.StatusText(status)
	if status == http.StatusServiceUnavailable {
		msg = "Service is temporarily unavailable, please try again later."
	}
	writeError(w, status, msg)
}

// URL returns the base URL the Server serves at (http://host:port) when
// Options.Addr was set, else "".
func (s *Server) URL() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.URL()
}

// Domain returns the domain served.
func (s *Server) Domain() string { return s.opts.Domain }

// RunTag returns the run tag of the Docker boxes behind the sandboxes.
func (s *Server) RunTag() string { return s.runTag }

// SetFaults changes the fault switches from now on. It refuses faults
// out of range.
func (s *Server) SetFaults(f Faults) error {
	if err := s.faults.Set(f); err != nil {
		return fmt.Errorf("e2bemu: %w", err)
	}
	return nil
}

// FaultCounts returns the faults injected so far.
func (s *Server) FaultCounts() emukit.Counts { return s.faults.Counts() }

// HostAddress returns this machine's address as the sandboxes reach it
// (the gateway of their Docker network), for a client's
// e2b.WithHostAddress.
func (s *Server) HostAddress(ctx context.Context) (string, error) { return s.boxes.HostAddress(ctx) }

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

// Close kills every sandbox, stops template builds, stops serving (with
// Options.Addr: the sandboxes' streams ended, that is at once) and
// releases the engine connection.
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
	s.removeImages(context.Background(), s.snapshotImages())
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	return errors.Join(err, s.boxes.Close())
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

// SDKEnv is the environment that points E2B's official SDKs, unchanged,
// at an emulator served at base (http://host:port): the control plane at
// base, and all envd traffic to base too (E2B_SANDBOX_URL), where the
// SDKs name the sandbox and port in the E2b-Sandbox-Id and
// E2b-Sandbox-Port headers.
func SDKEnv(base, domain, apiKey string) map[string]string {
	return map[string]string{"E2B_API_URL": base, "E2B_SANDBOX_URL": base, "E2B_DOMAIN": domain, "E2B_API_KEY": apiKey}
}
