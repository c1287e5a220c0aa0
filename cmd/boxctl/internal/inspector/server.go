package inspector

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

//go:embed assets
var assets embed.FS

// DefaultJaegerService is the service whose traces the trace view
// searches by run id (the one `boxctl` exports its spans as).
const DefaultJaegerService = "boxctl"

// Options configure a Server.
type Options struct {
	// Store is the user's state: its boxes and their lifecycle events.
	// Required.
	Store *boxstate.Store
	// Vendor opens the vendor of a target (boxctl passes vendors/open's).
	// The server calls it at most once per target, one call at a time, and
	// does not close what it returns. Required.
	Vendor func(target string) (vendors.Vendor, error)
	// Logger receives what the server cannot answer to a request. Default:
	// discard.
	Logger *slog.Logger
	// JaegerURL is a Jaeger query API (http://HOST:16686) the trace view
	// reads a turn's spans from. Default: none; the view shows the turn's
	// lifecycle events only.
	JaegerURL string
	// JaegerService is the service searched for a run's trace. Default:
	// DefaultJaegerService.
	JaegerService string
	// HTTPClient queries Jaeger and the pools' keepers. Default: a client
	// with a 10 s timeout.
	HTTPClient *http.Client
	// Getenv reads the model Router's environment a resume of a box made
	// without a broker needs (sandbox.RouterFromEnv). Default: os.Getenv.
	Getenv func(string) string
	// Access finds a resumed box's model access (boxctl passes its
	// broker's). Default: boxstate.RouterAccess(Getenv).
	Access boxstate.AccessFunc
	// PoolDir holds the pools' files the pool page lists. Default:
	// pool.DefaultDir.
	PoolDir string
	// KeeperMetrics are the --metrics addresses (host:port, or /metrics
	// URLs) of pool keepers whose size, claims and hits the pool page
	// shows. Default: none; the page shows what the pools' files hold.
	KeeperMetrics []string
	// PoolTargets are targets whose vendors keep warm pools of their own
	// (kubernetes): the pool page lists the pools boxctl made there.
	// Default: none.
	PoolTargets []string
}

func (o Options) normalized() (Options, error) {
	if o.Store == nil {
		return o, errors.New("inspector: Options.Store is required")
	}
	if o.Vendor == nil {
		return o, errors.New("inspector: Options.Vendor is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.JaegerURL != "" {
		u, err := url.Parse(o.JaegerURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return o, errors.New("inspector: Options.JaegerURL must be an http(s) URL")
		}
	}
	if o.JaegerService == "" {
		o.JaegerService = DefaultJaegerService
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Access == nil {
		o.Access = boxstate.RouterAccess(o.Getenv)
	}
	for i, a := range o.KeeperMetrics {
		u, err := metricsURL(a)
		if err != nil {
			return o, fmt.Errorf("inspector: Options.KeeperMetrics: %w", err)
		}
		o.KeeperMetrics[i] = u
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return o, nil
}

// errClosed is the error of a request after Close.
var errClosed = errors.New("the inspector is shutting down")

// Server is the inspector's HTTP server. Its zero value is not usable:
// call New.
type Server struct {
	o    Options
	auth *auth
	h    http.Handler

	ctx    context.Context // ends at Close: the turns' context
	cancel context.CancelFunc
	turnWG sync.WaitGroup

	connMu    sync.Mutex // one vendor open or box connect at a time
	replaceMu sync.Mutex // one replacement of a lost box at a time
	mu        sync.Mutex
	closed    bool
	vendors   map[string]vendors.Vendor
	envs      map[string]*sandbox.Environment // by box id
	turns     map[string]*turn                // by run id, live and ended
	asks      map[string]wire.InteractionRequest
}

// New returns a server of o's state.
func New(o Options) (*Server, error) {
	o.KeeperMetrics = slices.Clone(o.KeeperMetrics)
	o, err := o.normalized()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{o: o, auth: newAuth(), ctx: ctx, cancel: cancel, vendors: map[string]vendors.Vendor{},
		envs: map[string]*sandbox.Environment{}, turns: map[string]*turn{}, asks: map[string]wire.InteractionRequest{}}
	s.h = s.auth.wrap(s.routes())
	return s, nil
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.HandleFunc("GET /api/session", s.session)
	mux.HandleFunc("GET /api/boxes", s.listBoxes)
	mux.HandleFunc("GET /api/boxes/{box}", s.getBox)
	mux.HandleFunc("POST /api/boxes/{box}/turns", s.postTurn)
	mux.HandleFunc("GET /api/boxes/{box}/runs", s.listRuns)
	mux.HandleFunc("GET /api/boxes/{box}/runs/{run}/events", s.runEvents)
	mux.HandleFunc("POST /api/boxes/{box}/runs/{run}/cancel", s.cancelRun)
	mux.HandleFunc("POST /api/boxes/{box}/runs/{run}/interactions/{ask}", s.answer)
	mux.HandleFunc("GET /api/boxes/{box}/runs/{run}/trace", s.trace)
	mux.HandleFunc("GET /api/boxes/{box}/logs", s.logs)
	mux.HandleFunc("GET /api/boxes/{box}/events", s.events)
	mux.HandleFunc("POST /api/boxes/{box}/destroy", s.destroy)
	mux.HandleFunc("POST /api/boxes/{box}/suspend", s.lifecycle(boxstate.Suspend))
	mux.HandleFunc("POST /api/boxes/{box}/resume", s.lifecycle(boxstate.Resume))
	mux.HandleFunc("POST /api/boxes/{box}/replace", s.replace)
	mux.HandleFunc("GET /api/pools", s.pools)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			other := r.Clone(r.Context())
			other.Method = m
			if _, p := mux.Handler(other); p != "/" && p != "" {
				writeError(w, errorf(http.StatusMethodNotAllowed, TypeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path))
				return
			}
		}
		writeError(w, errorf(http.StatusNotFound, TypeNotFound, "no route "+r.Method+" "+r.URL.Path))
	})
	return mux
}

// Handler is the server's HTTP handler, every route behind its guard.
func (s *Server) Handler() http.Handler { return s.h }

// URL is the address to open for a server listening on addr: it carries
// the one-time token. It also lets the guard answer for addr's host.
func (s *Server) URL(addr net.Addr) string {
	s.auth.allowHost(addr.String())
	s.auth.mu.Lock()
	tok := s.auth.token
	s.auth.mu.Unlock()
	u := url.URL{Scheme: "http", Host: addr.String(), Path: "/", RawQuery: url.Values{TokenParam: {tok}}.Encode()}
	return u.String()
}

// Serve answers requests on l until ctx ends, then shuts the HTTP server
// down and closes s. It returns nil after ctx ended.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.auth.allowHost(l.Addr().String())
	hs := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return s.ctx }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		_ = s.Close(context.WithoutCancel(ctx))
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.cancel() // ends the event streams, so that Shutdown need not wait for them
	_ = hs.Shutdown(sctx)
	return s.Close(sctx)
}

// Close cancels the turns the server started (their runs are cancelled
// in the boxes) and waits for them until ctx ends, then closes the
// environments it connected.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() { s.turnWG.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.mu.Lock()
	envs := s.envs
	s.envs = map[string]*sandbox.Environment{}
	s.mu.Unlock()
	for _, env := range envs {
		err = errors.Join(err, env.Close(ctx))
	}
	return err
}

func (s *Server) session(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"csrf": s.auth.csrf, "tracing": s.o.JaegerURL != ""})
}
