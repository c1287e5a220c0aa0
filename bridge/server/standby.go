package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Probes are the backend probes GET /health answers from. A pooled
// bridge's standby and the server that follows its claim share them, so
// that the claimed bridge answers from the verdicts of its standby (the
// pin was checked on them) without probing again.
type Probes struct{ cache *healthCache }

// NewProbes returns the probes of a server with opts (its HealthTTL,
// ProbeTimeout and ProbeEnv; zero values mean the defaults).
func NewProbes(opts Options) *Probes {
	if opts.HealthTTL <= 0 {
		opts.HealthTTL = DefaultHealthTTL
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	return &Probes{cache: newHealthCache(opts)}
}

// Refresh probes every backend again, so that a verdict is never older
// than the interval it is called at.
func (p *Probes) Refresh(ctx context.Context, backends []*engine.Backend) {
	for _, b := range backends {
		p.cache.probe(ctx, b, true)
	}
}

// StandbyOptions configure a Standby.
type StandbyOptions struct {
	// Token is the one-time pool token a claim carries as its bearer
	// (required). Secret.
	Token string
	// Backends are the harnesses the claimed bridge will serve.
	Backends []*engine.Backend
	// Probes are shared with the server the claim starts (default: new).
	Probes *Probes
	// MaxBodyBytes and BodyTimeout bound the claim's body (Options).
	MaxBodyBytes int64
	BodyTimeout  time.Duration
	// Claim applies a valid claim: it returns once the bridge serves as
	// claimed. An error answers 500; the pool token is spent either way.
	Claim func(context.Context, wire.Claim) error
	// Now is the clock deadlines are checked against (default time.Now).
	Now func() time.Time
	// Logger receives the claim's outcome, never a secret (default: discard).
	Logger *slog.Logger
}

// Standby serves a bridge that waits in a pool: GET /health, POST
// /v1/claim with the pool token, and TypeStandby on every other route.
type Standby struct {
	o   StandbyOptions
	srv *Server // its body handling
	mu  sync.Mutex
	// token is the pool token until a claim spends it.
	token string
}

// NewStandby returns a standby server.
func NewStandby(o StandbyOptions) (*Standby, error) {
	if o.Token == "" {
		return nil, errors.New("server: standby needs a pool token")
	}
	if o.Claim == nil {
		return nil, errors.New("server: standby needs a Claim")
	}
	if o.Probes == nil {
		o.Probes = NewProbes(Options{})
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	opts := Options{MaxBodyBytes: o.MaxBodyBytes, BodyTimeout: o.BodyTimeout, Logger: o.Logger}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	return &Standby{o: o, srv: &Server{opts: opts, log: o.Logger, health: o.Probes.cache}, token: o.Token}, nil
}

// ServeHTTP routes a standby's requests.
func (s *Standby) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.srv.boundBody(w, r)
	switch {
	case r.URL.Path == "/health" && r.Method == http.MethodGet:
		s.healthz(w, r)
	case r.URL.Path == wire.PathClaim && r.Method == http.MethodPost:
		s.claim(w, r)
	case r.URL.Path == wire.PathClaim || r.URL.Path == "/health":
		writeError(w, wire.TypeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path))
	default:
		writeError(w, wire.TypeStandby, "the bridge waits in a pool: claim it first")
	}
}

func (s *Standby) healthz(w http.ResponseWriter, r *http.Request) {
	res, status := s.o.Probes.cache.report(r.Context(), s.o.Backends, r.URL.Query().Get("force") == "1", wire.HealthStandby)
	res.Standby = true
	writeJSON(w, status, res)
}

func (s *Standby) claim(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == "" {
		writeError(w, wire.TypeAlreadyClaimed, "the bridge was claimed already")
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	a, b := sha256.Sum256([]byte(strings.TrimSpace(tok))), sha256.Sum256([]byte(s.token))
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		writeError(w, wire.TypeInvalidAuthentication, "missing or invalid pool token")
		return
	}
	body, ok := s.srv.readBody(w, r)
	if !ok {
		return
	}
	var c wire.Claim
	if _, err := decodeStrict(body, &c); err != nil {
		// The decoder's message may quote the body, which holds secrets.
		writeError(w, wire.TypeInvalidRequest, "the claim is not a JSON claim object")
		return
	}
	if err := CheckClaim(c, s.o.Now()); err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	s.token = ""
	if err := s.o.Claim(r.Context(), c); err != nil {
		s.o.Logger.Error("claim", "err", err)
		writeError(w, wire.TypeServerError, "the claim could not be applied")
		return
	}
	s.o.Logger.Info("claimed", "deadline", c.Deadline, "labels", len(c.Labels))
	writeJSON(w, http.StatusOK, wire.Claimed{Status: "claimed", Deadline: c.Deadline, Labels: c.Labels})
}

var (
	hexBearer = regexp.MustCompile(`^[0-9a-f]{64}$`)
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// CheckClaim validates a claim at now. Its errors name the field at
// fault, never a value.
func CheckClaim(c wire.Claim, now time.Time) error {
	if len(c.Bearer) != wire.BearerLen || !hexBearer.MatchString(c.Bearer) {
		return fmt.Errorf("bearer: want %d lowercase hex digits", wire.BearerLen)
	}
	u, err := url.Parse(c.RouterURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("router_url: want an absolute http or https URL")
	case u.User != nil:
		return errors.New("router_url: must not carry credentials")
	}
	if c.RouterKey == "" {
		return errors.New("router_key is required")
	}
	for k := range c.Env {
		if !envName.MatchString(k) || strings.HasPrefix(k, "BRIDGE_") || strings.HasPrefix(k, "TANGLE_") {
			return fmt.Errorf("env: name %q: want letters, digits and '_', not BRIDGE_* or TANGLE_*", k)
		}
	}
	for k := range c.Labels {
		if k == "" || len(k) > 253 {
			return errors.New("labels: a key must have 1 to 253 characters")
		}
	}
	if c.Deadline <= now.Unix() {
		return errors.New("deadline: want a time in the future, Unix seconds")
	}
	return nil
}

// claimed answers a claim of a bridge that serves: it was claimed, or
// started out of a pool.
func (s *Server) claimed(w http.ResponseWriter, r *http.Request) {
	writeError(w, wire.TypeAlreadyClaimed, "the bridge is not waiting in a pool")
}
