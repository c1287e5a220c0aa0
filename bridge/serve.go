package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/netutil"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/internal/modelrelay"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/replicate"
	"github.com/tangle-network/boxctl/bridge/server"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/internal/buildinfo"
	"github.com/tangle-network/boxctl/internal/pressure"
)

// pruneEvery is how often time-based retention runs.
const pruneEvery = 10 * time.Second

// Defaults of the HTTP server's connection limits (Config).
const (
	// DefaultConnIdle is how long a keep-alive connection may wait for
	// its next request.
	DefaultConnIdle = 60 * time.Second
	// DefaultMaxConns is the most open client connections; the next one
	// waits in the listen backlog until one closes.
	DefaultMaxConns = 256
	// headerTimeout bounds the arrival of a request's headers.
	headerTimeout = 10 * time.Second
)

// Serve runs the bridge until ctx ends: it opens the store in c.DataDir,
// ends the runs a previous incarnation left live, and serves HTTP. When
// listening it calls ready (if not nil) with the address. GET /health
// answers from the start; every other route waits until those runs are
// ended (a failure to end them ends Serve). On shutdown it stops live
// runs, ends open streams and closes the store.
func Serve(ctx context.Context, c Config, log *slog.Logger, ready func(addr string)) error {
	if err := c.Validate(); err != nil {
		return err
	}
	st, q, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	relay, err := startRelay(c, log, false)
	if err != nil {
		return err
	}
	if relay != nil {
		defer relay.Close()
	}
	defer shipReplica(ctx, st, q, relay, log)()
	eng, srv, err := start(ctx, c, st, log, nil, nil, nil, relay, q)
	if err != nil {
		return err
	}
	go srv.ProbeBackends(ctx)
	ln := c.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port))); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	hs, ln := httpServer(c, srv, ln, log)
	log.Info("listening", "addr", ln.Addr().String(), "version", buildinfo.Get().Version, "backends", c.Backends)
	if ready != nil {
		ready(ln.Addr().String())
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	return serveLoop(ctx, hs, eng, serveErr, log)
}

// openStore opens c's store, its changes marked on the queue a replica's
// shipper reads (shipReplica).
func openStore(ctx context.Context, c Config) (*store.Store, *replicate.Queue, error) {
	q := replicate.NewQueue()
	st, err := store.Open(ctx, c.DataDir, store.Options{MaxEvents: c.MaxEvents, MaxBytes: c.MaxBytes,
		ReplayTTL: c.ReplayTTL, IdentityTTL: c.IdentityTTL, SessionIdle: c.SessionIdleClose, OnChange: q.Mark})
	return st, q, err
}

// replicaHold bounds how long a reader of a live run waits for the
// replica to hold an event before it gets it.
const replicaHold = 200 * time.Millisecond

// holdFor is the engine's Options.Hold of a bridge that ships to q's
// replica through relay (nil without a relay: nothing is shipped).
func holdFor(relay *modelrelay.Relay, q *replicate.Queue) func(context.Context, string, int64) {
	if relay == nil || q == nil {
		return nil
	}
	return func(ctx context.Context, run string, through int64) { q.Hold(ctx, run, through, replicaHold) }
}

// replicaDrain bounds how long a bridge that ends ships its runs' last
// events (their ends, written as the bridge stops them).
const replicaDrain = 5 * time.Second

// shipReplica ships st's runs to the replica at the relay's upstream (the
// broker), if there is a relay, until the returned stop is called: after
// the bridge ended its runs, it ships what is left for up to replicaDrain.
// The shipping outlives ctx (the signal that ends the bridge).
func shipReplica(ctx context.Context, st *store.Store, q *replicate.Queue, relay *modelrelay.Relay, log *slog.Logger) (stop func()) {
	if relay == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	drain, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		replicate.Run(ctx, replicate.Options{Store: st, Queue: q, Call: relay.Call, Log: log, Drain: drain})
	}()
	return func() {
		close(drain)
		select {
		case <-done:
		case <-time.After(replicaDrain):
		}
		cancel()
		<-done
	}
}

// backends are the engine backends of c's keys.
func (c Config) backends() []*engine.Backend {
	adapters := Adapters()
	var backends []*engine.Backend
	for _, key := range c.Backends {
		a := adapters[key]
		bin := c.Bins[key]
		if bin == "" {
			bin = a.DefaultBin()
		}
		backends = append(backends, &engine.Backend{Adapter: a, Bin: bin, Timeout: c.Timeouts[key]})
	}
	return backends
}

// start makes the engine and the server of c over st; probes and environ
// (the harnesses' environment) are nil for the defaults; relay, when set,
// is the harnesses' model endpoint (Config.ModelRelay).
func start(ctx context.Context, c Config, st *store.Store, log *slog.Logger, probes *server.Probes, environ []string, probed *jail.Jailer, relay *modelrelay.Relay, q *replicate.Queue) (*engine.Engine, *server.Server, error) {
	eng, err := startEngine(ctx, c, st, log, environ, probed, relay, q)
	if err != nil {
		return nil, nil, err
	}
	srv, err := startServer(ctx, c, eng, log, probes)
	return eng, srv, err
}

// startEngine makes the engine of c over st, and starts the harness of
// the turn likely first ahead of it (Config.PrestartCwd). With relay the
// harnesses reach the model through it, and it presents c's router key.
func startEngine(ctx context.Context, c Config, st *store.Store, log *slog.Logger, environ []string, probed *jail.Jailer, relay *modelrelay.Relay, q *replicate.Queue) (*engine.Engine, error) {
	secrets := []string{}
	if c.Bearer != "" {
		secrets = append(secrets, c.Bearer)
	}
	routerURL, routerKey := c.RouterURL, c.RouterKey
	if relay != nil {
		if c.RouterURL != "" {
			if err := relay.Set(c.RouterURL, c.RouterKey); err != nil {
				return nil, err
			}
		}
		if c.RouterKey != "" {
			secrets = append(secrets, c.RouterKey)
		}
		routerURL, routerKey = relay.URL(), modelrelay.Placeholder
	}
	eng, err := engine.New(ctx, st, engine.Options{DataDir: c.DataDir, RouterURL: routerURL, RouterKey: routerKey,
		MaxRuns: c.MaxRuns, MaxLifetime: c.MaxLifetime, IdleTimeout: c.IdleTimeout, ResultGrace: c.ResultGrace,
		SessionIdleTimeout: c.SessionIdle, MaxSessionProcs: c.MaxSessionProcs, Spares: !c.NoSpares, Quiet: pressure.Gate{}.Wait, Environ: environ,
		JailFloor: c.JailFloor, Secrets: secrets, Logger: log, Background: true, Probed: probed, Hold: holdFor(relay, q)})
	if err != nil {
		return nil, err
	}
	backends := c.backends()
	if len(backends) == 1 && c.PrestartCwd != "" {
		eng.Prestart(engine.SpareTemplate{Backend: backends[0], Model: c.PrestartModel, Cwd: c.PrestartCwd})
	}
	return eng, nil
}

// startServer makes the HTTP server of c over eng; a failure closes eng.
func startServer(ctx context.Context, c Config, eng *engine.Engine, log *slog.Logger, probes *server.Probes) (*server.Server, error) {
	srv, err := server.New(server.Options{Engine: eng, Backends: c.backends(), Bearer: c.Bearer, MaxBodyBytes: c.MaxBodyBytes,
		BodyTimeout: c.BodyTimeout, Keepalive: c.Keepalive, DataDir: c.DataDir, ProfilesDir: c.ProfilesDir, Version: buildinfo.Get().Version,
		Logger: log, Probes: probes})
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return nil, errors.Join(err, eng.Close(closeCtx))
	}
	return srv, nil
}

// startRelay starts the model relay when c asks for it and there is a
// model endpoint for it to reach (c's, or, in standby, the claim's); nil
// otherwise: without one the harnesses keep their own endpoints.
func startRelay(c Config, log *slog.Logger, standby bool) (*modelrelay.Relay, error) {
	if !c.ModelRelay || (c.RouterURL == "" && !standby) {
		return nil, nil
	}
	return modelrelay.Start(log, []byte(c.RouterCA))
}

// serveLoop runs a serving bridge until ctx ends or its server fails:
// it ends the bridge when the engine fails to start, prunes retention,
// and on shutdown ends the runs, then the server.
func serveLoop(ctx context.Context, hs *http.Server, eng *engine.Engine, serveErr <-chan error, log *slog.Logger) error {
	ticker := time.NewTicker(pruneEvery)
	defer ticker.Stop()
	started := eng.Ready()
	for {
		select {
		case <-started:
			started = nil
			if err := eng.WaitReady(ctx); err != nil {
				if ctx.Err() != nil {
					continue // shutting down: the ctx.Done case ends the bridge
				}
				log.Error("start", "err", err)
				closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				hs.Shutdown(closeCtx)
				return errors.Join(err, eng.Close(closeCtx))
			}
		case err := <-serveErr:
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return errors.Join(fmt.Errorf("serve: %w", err), eng.Close(closeCtx))
		case <-ticker.C:
			if err := eng.Prune(ctx); err != nil {
				log.Error("prune", "err", err)
			}
		case <-ctx.Done():
			log.Info("shutting down")
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			// Ending the runs first lets their streams finish with [DONE].
			err := eng.Close(closeCtx)
			shutCtx, cancel2 := context.WithTimeout(closeCtx, 3*time.Second)
			defer cancel2()
			if serr := hs.Shutdown(shutCtx); serr != nil {
				hs.Close()
			}
			return err
		}
	}
}

// httpServer is the HTTP server of handler on ln, with its connections
// bounded: headers must arrive within headerTimeout and a body within
// Config.BodyTimeout (the handler's own bound, server.Options), a
// keep-alive connection closes after Config.ConnIdle without a request,
// and at most Config.MaxConns connections are open at once. Responses
// get no write timeout, as an SSE stream lives as long as its run.
func httpServer(c Config, handler http.Handler, ln net.Listener, log *slog.Logger) (*http.Server, net.Listener) {
	idle, maxConns := c.ConnIdle, c.MaxConns
	if idle <= 0 {
		idle = DefaultConnIdle
	}
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: headerTimeout, IdleTimeout: idle,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	return hs, netutil.LimitListener(ln, maxConns)
}
