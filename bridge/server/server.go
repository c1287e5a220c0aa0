package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/bridge/branch"
	"github.com/tangle-network/boxctl/bridge/cancellation"
	"github.com/tangle-network/boxctl/bridge/continuation"
	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/tracing"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes = 10 << 20
	DefaultKeepalive    = 15 * time.Second
	DefaultHealthTTL    = 30 * time.Second
	DefaultCancelWait   = 30 * time.Second
	DefaultProbeTimeout = 30 * time.Second
	DefaultBodyTimeout  = 60 * time.Second

	DefaultStreamWriteTimeout = 30 * time.Second

	DefaultInputQueueDepth   = 16
	DefaultInputQueueTimeout = 30 * time.Second
)

// Options configure a Server. Zero values mean the defaults.
type Options struct {
	// Engine runs the turns (required).
	Engine *engine.Engine
	// Backends are the registered harnesses, in matching order.
	Backends []*engine.Backend
	// Bearer, when set, is required on every route but GET /health.
	Bearer string
	// MaxBodyBytes limits request bodies (default 10 MiB).
	MaxBodyBytes int64
	// BodyTimeout is how long a request body may take to arrive in full,
	// counted from the end of its headers (default 60 s); see boundBody.
	BodyTimeout time.Duration
	// Keepalive is the idle time after which an SSE stream gets a
	// `: keepalive` comment (default 15 s).
	Keepalive time.Duration
	// StreamWriteTimeout is how long one write of an event stream may
	// wait for the client to take it; a client that stopped reading is
	// dropped after it (default 30 s).
	StreamWriteTimeout time.Duration
	// HealthTTL is how long a ready probe verdict is reused (default 30 s);
	// past it, the verdict is still answered while the probe refreshing it
	// runs.
	HealthTTL time.Duration
	// ProbeTimeout bounds one `<bin> --version` probe (default 30 s: on
	// a loaded 2-core box the first start of opencode or Gemini CLI takes
	// 7-22 s).
	ProbeTimeout time.Duration
	// CancelWait is how long a cancel waits for the run to end when the
	// request gives no wait_ms (default 30 s).
	CancelWait time.Duration
	// ProbeEnv is the environment of health probes (default: none but PATH
	// and HOME of the bridge).
	ProbeEnv []string
	// DataDir is the bridge's data directory; workspace checkpoints and
	// forks are kept under it, and a copied workspace leaves it out
	// (required for the workspace routes).
	DataDir string
	// ProfilesDir holds the profile catalog GET /v1/profiles lists, one
	// <id>.json per profile, read once at start ("": none).
	ProfilesDir string
	// InputQueueDepth bounds the inputs that wait for one session's run
	// on POST /v1/sessions/:id/input (default 16), and InputQueueTimeout
	// how long each waits (default 30 s).
	InputQueueDepth   int
	InputQueueTimeout time.Duration
	// Version is reported by GET /.
	Version string
	// Logger receives request errors (default: discard).
	Logger *slog.Logger
	// Probes, when set, are the backend probes to answer from (those of
	// the standby this server follows; default: new).
	Probes *Probes
}

// Server serves the bridge protocol.
type Server struct {
	opts          Options
	log           *slog.Logger
	health        *healthCache
	mux           *http.ServeMux
	profiles      []profileEntry
	queue         inputQueue
	counts        contextCounts
	branches      *branch.Manager
	continuations *continuation.Continuer
	cancellations *cancellation.Canceller
	clock         idleClock // the last turn activity (idle.go)
	started       time.Time
}

// New returns a server.
func New(opts Options) (*Server, error) {
	if opts.Engine == nil {
		return nil, errors.New("server: Engine is required")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Keepalive <= 0 {
		opts.Keepalive = DefaultKeepalive
	}
	if opts.StreamWriteTimeout <= 0 {
		opts.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.HealthTTL <= 0 {
		opts.HealthTTL = DefaultHealthTTL
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	if opts.CancelWait <= 0 {
		opts.CancelWait = DefaultCancelWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.InputQueueDepth <= 0 {
		opts.InputQueueDepth = DefaultInputQueueDepth
	}
	if opts.InputQueueTimeout <= 0 {
		opts.InputQueueTimeout = DefaultInputQueueTimeout
	}
	if opts.DataDir != "" {
		abs, err := filepath.Abs(opts.DataDir)
		if err != nil {
			return nil, fmt.Errorf("server: data dir: %w", err)
		}
		opts.DataDir = abs
	}
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux(), started: time.Now()}
	s.health = newHealthCache(opts)
	if opts.Probes != nil {
		s.health = opts.Probes.cache
	}
	var err error
	if s.profiles, err = s.loadProfiles(opts.ProfilesDir); err != nil {
		return nil, err
	}
	if s.branches, err = branch.New(branch.Options{Store: opts.Engine.Store(), Dir: opts.DataDir, Logger: opts.Logger}); err != nil {
		return nil, err
	}
	if s.continuations, err = continuation.New(continuation.Options{Engine: opts.Engine, Resolve: s.resolveModel,
		Execution: s.continuationExecution, Logger: opts.Logger}); err != nil {
		return nil, err
	}
	if s.cancellations, err = cancellation.New(cancellation.Options{Engine: opts.Engine}); err != nil {
		return nil, err
	}
	s.handle()
	return s, nil
}

// handle registers the routes (endpoints lists them for GET /).
func (s *Server) handle() {
	s.mux.HandleFunc("GET /{$}", s.root)
	s.mux.HandleFunc("GET /health", s.healthz)
	s.mux.HandleFunc("GET /metrics", s.metrics)
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("GET /v1/capabilities", s.capabilities)
	s.mux.HandleFunc("POST /v1/chat/completions", s.chat)
	s.mux.HandleFunc("GET /v1/runs/{id}", s.getRun)
	s.mux.HandleFunc("GET /v1/runs/{id}/events", s.runEvents)
	s.mux.HandleFunc("POST /v1/runs/{id}/cancel", s.cancel)
	s.mux.HandleFunc("POST /v1/runs/{id}/interactions/{iid}/respond", s.respondInteraction)
	s.mux.HandleFunc("POST /v1/sessions", s.createSession)
	s.mux.HandleFunc("GET /v1/sessions", s.listSessions)
	s.mux.HandleFunc("GET /v1/sessions/{id}", s.getSession)
	s.mux.HandleFunc("POST /v1/sessions/{id}/turns", s.postTurn)
	s.mux.HandleFunc("GET /v1/sessions/{id}/events", s.sessionEvents)
	s.mux.HandleFunc("POST /v1/sessions/{id}/cancel", s.cancelSession)
	s.mux.HandleFunc("POST /v1/sessions/{id}/close", s.closeSession)
	s.mux.HandleFunc("POST /v1/sessions/{id}/continue", s.continueSession)
	s.mux.HandleFunc("POST /v1/sessions/{id}/input", s.postInput)
	s.mux.HandleFunc("POST /v1/sessions/{id}/steer", s.steerSession)
	s.mux.HandleFunc("POST /v1/sessions/{id}/detach", s.detachSession)
	s.mux.HandleFunc("GET /v1/sessions/{id}/status", s.getSession)
	s.mux.HandleFunc("GET /v1/sessions/{id}/transcript", s.transcript)
	s.mux.HandleFunc("DELETE /v1/sessions/{id}", s.deleteSession)
	s.mux.HandleFunc("GET /openapi.json", s.openAPI)
	s.mux.HandleFunc("GET /v1/profiles", s.listProfiles)
	s.mux.HandleFunc("GET /v1/profiles/{id}", s.getProfile)
	s.mux.HandleFunc("POST /v1/workspace/checkpoints", s.createCheckpoint)
	s.mux.HandleFunc("POST /v1/workspace/checkpoints/lookup", s.lookupCheckpoint)
	s.mux.HandleFunc("POST /v1/workspace/checkpoints/delete", s.deleteCheckpoint)
	s.mux.HandleFunc("POST /v1/workspace/forks", s.createFork)
	s.mux.HandleFunc("POST /v1/workspace/forks/lookup", s.lookupFork)
	s.mux.HandleFunc("POST /v1/workspace/forks/destroy", s.destroyFork)
	s.mux.HandleFunc("GET /v1/workspace/forks/{id}", s.getFork)
	s.mux.HandleFunc("POST /v1/context/plans", s.planContext)
	s.mux.HandleFunc("POST /v1/context/transfers", s.transferContext)
	s.mux.HandleFunc("POST /v1/exact/environments", s.createExact)
	s.mux.HandleFunc("GET /v1/exact/environments", s.listExact)
	s.mux.HandleFunc("GET /v1/exact/environments/{id}", s.getExact)
	s.mux.HandleFunc("DELETE /v1/exact/environments/{id}", s.destroyExact)
	s.mux.HandleFunc("PUT /v1/exact/environments/{id}/files", s.writeExactFile)
	s.mux.HandleFunc("POST /v1/exact/environments/{id}/files/read", s.readExactFile)
	s.mux.HandleFunc("POST /v1/exact/environments/{id}/processes", s.spawnExact)
	s.mux.HandleFunc("GET /v1/exact/environments/{id}/processes", s.listExactProcesses)
	s.mux.HandleFunc("GET /v1/exact/environments/{id}/processes/{pid}", s.exactProcess)
	s.mux.HandleFunc("GET /v1/exact/environments/{id}/processes/{pid}/output", s.exactOutput)
	s.mux.HandleFunc("POST /v1/exact/environments/{id}/processes/{pid}/kill", s.killExact)
	s.mux.HandleFunc("POST /v1/exec", s.execCommand)
	s.mux.HandleFunc("POST "+wire.PathClaim, s.claimed)
	s.mux.HandleFunc("/", s.notFound)
}

// endpoints are listed by GET /.
var endpoints = []string{"GET /", "GET /health", "GET /metrics", "GET /v1/models", "GET /v1/capabilities",
	"POST /v1/chat/completions", "GET /v1/runs/:id", "GET /v1/runs/:id/events", "POST /v1/runs/:id/cancel",
	"POST /v1/runs/:runId/interactions/:interactionId/respond", "POST /v1/sessions", "GET /v1/sessions",
	"GET /v1/sessions/:id", "POST /v1/sessions/:id/turns", "GET /v1/sessions/:id/events",
	"POST /v1/sessions/:id/cancel", "POST /v1/sessions/:id/close", "POST /v1/sessions/:id/continue",
	"POST /v1/sessions/:id/input", "POST /v1/sessions/:id/steer", "POST /v1/sessions/:id/detach",
	"GET /v1/sessions/:id/status", "GET /v1/sessions/:id/transcript", "DELETE /v1/sessions/:id",
	"GET /v1/profiles", "GET /v1/profiles/:id", "GET /openapi.json",
	"POST /v1/workspace/checkpoints", "POST /v1/workspace/checkpoints/lookup", "POST /v1/workspace/checkpoints/delete",
	"POST /v1/workspace/forks", "POST /v1/workspace/forks/lookup", "POST /v1/workspace/forks/destroy",
	"GET /v1/workspace/forks/:id", "POST /v1/context/plans", "POST /v1/context/transfers",
	"POST /v1/exact/environments", "GET /v1/exact/environments", "GET /v1/exact/environments/:id",
	"DELETE /v1/exact/environments/:id", "PUT /v1/exact/environments/:id/files",
	"POST /v1/exact/environments/:id/files/read", "POST /v1/exact/environments/:id/processes",
	"GET /v1/exact/environments/:id/processes", "GET /v1/exact/environments/:id/processes/:pid",
	"GET /v1/exact/environments/:id/processes/:pid/output", "POST /v1/exact/environments/:id/processes/:pid/kill", "POST " + wire.PathClaim}

// ServeHTTP bounds the request body's arrival, authenticates, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.boundBody(w, r)
	health := r.Method == http.MethodGet && r.URL.Path == "/health"
	// A claim is answered already_claimed whatever its bearer.
	claim := r.Method == http.MethodPost && r.URL.Path == wire.PathClaim
	if s.opts.Bearer != "" && !health && !claim && !s.authorized(r) {
		writeError(w, wire.TypeInvalidAuthentication, "missing or invalid bearer token")
		return
	}
	// Every route but /health answers from a started engine: a run the
	// previous incarnation left live is read only once it was ended.
	if !health {
		if err := s.opts.Engine.WaitReady(r.Context()); err != nil {
			if r.Context().Err() == nil {
				writeError(w, wire.TypeServerError, "the bridge failed to start: "+err.Error())
			}
			return
		}
	}
	defer s.clock.track(r)()
	ctx := tracing.Extract(r.Context(), r.Header)
	if !trace.SpanContextFromContext(ctx).IsRemote() && r.URL.Path == "/health" {
		s.mux.ServeHTTP(w, r) // an untraced readiness poll makes no span
		return
	}
	ctx, span := tracer.Start(ctx, "bridge "+r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	defer span.End()
	s.mux.ServeHTTP(w, r.WithContext(ctx))
}

// tracer makes the bridge's spans: one per request (a child of the
// caller's traceparent), its admission, and the harness's run.
var tracer = tracing.Tracer("bridge/server")

func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	// Hash both sides so the comparison takes the same time whatever
	// the lengths.
	a, b := sha256.Sum256([]byte(strings.TrimSpace(tok))), sha256.Sum256([]byte(s.opts.Bearer))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	for _, e := range endpoints {
		_, path, _ := strings.Cut(e, " ")
		if routeMatches(path, r.URL.Path) {
			writeError(w, wire.TypeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path))
			return
		}
	}
	writeError(w, wire.TypeNotFound, "no route for "+r.Method+" "+r.URL.Path)
}

func routeMatches(pattern, path string) bool {
	p, q := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(p) != len(q) {
		return false
	}
	for i := range p {
		if p[i] != q[i] && !strings.HasPrefix(p[i], ":") {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, typ, msg string) {
	writeErrorBody(w, wire.ErrorBody{Type: typ, Message: msg})
}

// writeErrorBody answers e; an executor_saturated one says when to retry.
func writeErrorBody(w http.ResponseWriter, e wire.ErrorBody) {
	e.Status = wire.StatusFor(e.Type)
	if e.Type == wire.TypeExecutorSaturated {
		w.Header().Set(wire.HeaderRetryAfter, "1")
	}
	writeJSON(w, e.Status, wire.ErrorResponse{Error: e})
}

// writeFailure answers err, the failure of a route's work: the wire error
// it carries (what packages branch, portable and continuation return, and
// wire.Fault), its cause logged when it is a fault of the bridge's own;
// any other error is a server error.
func (s *Server) writeFailure(w http.ResponseWriter, err error) {
	var e *wire.ErrorBody
	if !errors.As(err, &e) {
		e = &wire.ErrorBody{Type: wire.TypeServerError, Message: err.Error()}
	}
	if e.Type == wire.TypeServerError {
		s.log.Error(e.Message, "err", err)
	}
	writeErrorBody(w, *e)
}

// writeResult answers a route's result v with status, or its failure err.
func (s *Server) writeResult(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	writeJSON(w, status, v)
}

// readBody reads a limited body; it has answered when ok is false.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, wire.TypeRequestTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.opts.MaxBodyBytes))
		return nil, false
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeError(w, wire.TypeInvalidRequest, fmt.Sprintf("request body did not arrive within %s", s.opts.BodyTimeout))
		return nil, false
	case err != nil:
		writeError(w, wire.TypeInvalidRequest, "read request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// parseWait reads ?wait_ms=; absent gives def.
func parseWait(r *http.Request, def time.Duration) (time.Duration, error) {
	v := r.URL.Query().Get("wait_ms")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || (len(v) > 1 && v[0] == '0') || v[0] == '+' {
		return 0, errors.New("wait_ms must be a non-negative base-10 integer")
	}
	if n > wire.MaxWaitMS {
		return 0, fmt.Errorf("wait_ms must be at most %d", wire.MaxWaitMS)
	}
	return time.Duration(n) * time.Millisecond, nil
}
