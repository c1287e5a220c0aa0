package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/server"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/buildinfo"
)

// standbyProbeEvery is how often a pooled bridge probes its backends
// again, so that the claimed bridge answers from a verdict younger than
// the health cache's TTL.
const standbyProbeEvery = server.DefaultHealthTTL / 2

// ServeStandby runs a pooled bridge until ctx ends: it opens the store in
// c.DataDir, listens, and serves GET /health (saying standby) and POST
// /v1/claim authenticated by token; every other route answers
// bridge_standby. A valid claim spends the token and starts the bridge
// as Serve would with the claim's bearer, Router and harness environment
// (and writes its deadline to c.DeadlineFile when set); from then on it
// serves as Serve does. c holds no secret: its Bearer and Router key are
// ignored.
func ServeStandby(ctx context.Context, c Config, token string, log *slog.Logger, ready func(addr string)) error {
	if token == "" {
		return errors.New("standby: no pool token")
	}
	c.Bearer, c.RouterKey, c.RouterURL = "", "", ""
	// A standby listens without a bearer: its one open route is the
	// claim, which the pool token guards.
	probe := c
	probe.Bearer = token
	if err := probe.Validate(); err != nil {
		return err
	}
	st, q, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	backends := c.backends()
	probes := server.NewProbes(server.Options{})
	// The jail is probed in standby, so that the claim's engine takes the
	// verdict instead of making namespaces at the claim.
	jailer := jail.New(jail.Options{DataDir: c.DataDir, Logger: log})
	// The claim brings the relay's upstream.
	relay, err := startRelay(c, log, true)
	if err != nil {
		return err
	}
	if relay != nil {
		defer relay.Close()
	}
	defer shipReplica(ctx, st, q, relay, log)()
	var handler switchHandler
	// eng is the standby's engine (with the relay) until a claim, then
	// the claimed bridge's; engMu orders a claim and a shutdown.
	var (
		eng   *engine.Engine
		engMu sync.Mutex
	)
	claimed := make(chan struct{})
	sb, err := server.NewStandby(server.StandbyOptions{Token: token, Backends: backends, Probes: probes,
		MaxBodyBytes: c.MaxBodyBytes, BodyTimeout: c.BodyTimeout, Logger: log,
		Claim: func(_ context.Context, cl wire.Claim) error {
			engMu.Lock()
			defer engMu.Unlock()
			if c.DeadlineFile != "" {
				if err := writeDeadline(c.DeadlineFile, cl.Deadline); err != nil {
					return err
				}
			}
			cc := c
			cc.Bearer, cc.RouterURL, cc.RouterKey = cl.Bearer, cl.RouterURL, cl.RouterKey
			environ := harnessEnviron(os.Environ(), cl.Env)
			var srv *server.Server
			if eng != nil {
				// The engine of the standby, its harness started ahead:
				// the claim binds it.
				if cl.RouterURL != "" {
					if err := relay.Set(cl.RouterURL, cl.RouterKey); err != nil {
						return err
					}
				}
				eng.Bind(environ, cl.Bearer, cl.RouterKey)
				s, err := startServer(ctx, cc, eng, log, probes)
				if err != nil {
					eng = nil // closed by startServer
					return err
				}
				srv = s
			} else {
				e, s, err := start(ctx, cc, st, log, probes, environ, jailer, relay, q)
				if err != nil {
					return err
				}
				eng, srv = e, s
			}
			handler.h.Store(&handlerBox{srv})
			close(claimed)
			return nil
		}})
	if err != nil {
		return err
	}
	handler.h.Store(&handlerBox{sb})
	// Before the bridge listens (a pool claims it only once it answers):
	// the jail's probe, and the store's first writes folded into its file,
	// which the claimed engine's start would do otherwise.
	jailer.Probe(ctx)
	if err := st.Checkpoint(ctx); err != nil {
		log.Warn("checkpoint in standby", "err", err)
	}
	if relay != nil {
		// With the relay the harness needs nothing of the claim to
		// start: the engine starts now, and its harness ahead of any
		// claim.
		if eng, err = startEngine(ctx, c, st, log, harnessEnviron(os.Environ(), nil), jailer, relay, q); err != nil {
			return err
		}
	}
	closeUnclaimed := func() {
		engMu.Lock()
		defer engMu.Unlock()
		if eng == nil {
			return
		}
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := eng.Close(closeCtx); err != nil {
			log.Warn("close the standby's engine", "err", err)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))
	if err != nil {
		closeUnclaimed()
		return fmt.Errorf("listen: %w", err)
	}
	hs, ln := httpServer(c, &handler, ln, log)
	log.Info("listening in standby", "addr", ln.Addr().String(), "version", buildinfo.Get().Version, "backends", c.Backends)
	pctx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	go func() {
		t := time.NewTicker(standbyProbeEvery)
		defer t.Stop()
		for {
			probes.Refresh(pctx, backends)
			select {
			case <-pctx.Done():
				return
			case <-claimed:
				return
			case <-t.C:
			}
		}
	}()
	if ready != nil {
		ready(ln.Addr().String())
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	select {
	case <-claimed:
		stopProbes()
		return serveLoop(ctx, hs, eng, serveErr, log)
	case err := <-serveErr:
		closeUnclaimed()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		log.Info("shutting down in standby")
		defer closeUnclaimed()
		shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		if err := hs.Shutdown(shutCtx); err != nil {
			hs.Close()
		}
		return nil
	}
}

// switchHandler serves with the handler last stored: the standby, then
// the claimed bridge's server.
type switchHandler struct{ h atomic.Pointer[handlerBox] }

type handlerBox struct{ http.Handler }

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.h.Load().ServeHTTP(w, r)
}

// harnessEnviron is the harnesses' environment of a claimed bridge: the
// process's own without the bridge's configuration (as engine.Options
// Environ's default), then the claim's.
func harnessEnviron(environ []string, add map[string]string) []string {
	var out []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "BRIDGE_") && !strings.HasPrefix(kv, "TANGLE_") && !strings.HasPrefix(kv, engine.MarkerVar+"=") {
			out = append(out, kv)
		}
	}
	for k, v := range add {
		out = append(out, k+"="+v)
	}
	return out
}

// writeDeadline replaces the deadline file with deadline (Unix seconds),
// atomically, so its watcher never reads half a number.
func writeDeadline(path string, deadline int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("deadline file: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(deadline, 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("deadline file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("deadline file: %w", err)
	}
	return nil
}
