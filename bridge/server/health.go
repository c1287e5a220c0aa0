package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// healthCache probes backends with `<bin> --version` and keeps ready
// verdicts for a while; other verdicts are never cached.
type healthCache struct {
	opts Options
	mu   sync.Mutex // serialises probes, so a burst of requests probes once
	last map[*engine.Backend]wire.BackendHealth
	at   map[*engine.Backend]time.Time
}

func newHealthCache(opts Options) *healthCache {
	if opts.ProbeEnv == nil {
		for _, k := range []string{"PATH", "HOME"} {
			if v, ok := os.LookupEnv(k); ok {
				opts.ProbeEnv = append(opts.ProbeEnv, k+"="+v)
			}
		}
	}
	return &healthCache{opts: opts, last: map[*engine.Backend]wire.BackendHealth{}, at: map[*engine.Backend]time.Time{}}
}

func (h *healthCache) probe(ctx context.Context, b *engine.Backend, force bool) wire.BackendHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	if last, ok := h.last[b]; ok && !force && last.State == wire.BackendReady && time.Since(h.at[b]) < h.opts.HealthTTL {
		last.Cached = true
		return last
	}
	ctx, cancel := context.WithTimeout(ctx, h.opts.ProbeTimeout)
	defer cancel()
	res := wire.BackendHealth{Name: b.Adapter.Name(), ProbedAt: time.Now().UnixMilli()}
	cmd := exec.CommandContext(ctx, b.Bin, "--version")
	cmd.Env = h.opts.ProbeEnv
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		res.State, res.Version = wire.BackendReady, strings.TrimSpace(out.String())
		if res.Version == "" {
			// Some releases (Pi 0.73) print their version on stderr.
			res.Version = firstLine(errOut.String())
		}
		res.Detail = b.Bin + " --version exited 0"
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		res.State = wire.BackendError
		res.Detail = fmt.Sprintf("%s --version: %v: %s", b.Bin, err, firstLine(errOut.String()))
	case ctx.Err() != nil:
		res.State = wire.BackendError
		res.Detail = fmt.Sprintf("%s --version did not answer within %s", b.Bin, h.opts.ProbeTimeout)
	default:
		res.State = wire.BackendUnavailable
		res.Detail = fmt.Sprintf("cannot start %s: %v", b.Bin, err)
	}
	h.last[b], h.at[b] = res, time.Now()
	return res
}

// ProbeBackends probes every backend as GET /health does, so that a
// /health right after the start answers from the probe already under way.
func (s *Server) ProbeBackends(ctx context.Context) {
	for _, b := range s.opts.Backends {
		s.health.probe(ctx, b, false)
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	res, status := s.health.report(r.Context(), s.opts.Backends, r.URL.Query().Get("force") == "1", "ok")
	select {
	case <-s.opts.Engine.Ready(): // the previous incarnation's runs are ended
		res.Idle = s.idle(r.Context())
	default:
	}
	writeJSON(w, status, res)
}

// report is GET /health of backends: status ok (a pooled bridge's
// standby) and 200 when every backend is ready, degraded and 503
// otherwise.
func (h *healthCache) report(ctx context.Context, backends []*engine.Backend, force bool, ok string) (wire.Health, int) {
	res := wire.Health{Status: ok, Backends: []wire.BackendHealth{}}
	for _, b := range backends {
		bh := h.probe(ctx, b, force)
		if bh.State != wire.BackendReady {
			res.Status = "degraded"
		}
		res.Backends = append(res.Backends, bh)
	}
	if len(backends) == 0 {
		res.Status = "degraded"
	}
	if res.Status != ok {
		return res, http.StatusServiceUnavailable
	}
	return res, http.StatusOK
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	list := wire.ModelList{Object: "list", Data: []wire.Model{}}
	for _, b := range s.opts.Backends {
		if s.health.probe(r.Context(), b, false).State != wire.BackendReady {
			continue
		}
		for _, m := range b.Adapter.Models() {
			list.Data = append(list.Data, wire.Model{ID: b.Adapter.Name() + "/" + m, Object: "model", OwnedBy: b.Adapter.Name()})
		}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	names := []string{}
	for _, b := range s.opts.Backends {
		names = append(names, b.Adapter.Name())
	}
	writeJSON(w, http.StatusOK, wire.Root{
		Name: "box-bridge", Version: s.opts.Version, Scheme: "bridge/<harness>/<model>",
		Capabilities: map[string]any{"streaming": true, "replay": true, "detach": true, "cancel": true,
			"durable": true, "exactCancellation": true,
			// Portable context plans and transfers (POST /v1/context/...) and
			// workspace checkpoints and forks (POST /v1/workspace/...).
			"contextTransfer": true, "workspaceBranching": s.opts.DataDir != "",
			// Exact process environments (POST /v1/exact/environments).
			"exactProcess": s.opts.Engine.ExecutionCaps(r.Context()).Jail.Unavailable == "",
			// What the bridge does with a turn's execution object (wire.ExecutionCaps).
			"execution": s.opts.Engine.ExecutionCaps(r.Context())},
		Backends: names, Endpoints: endpoints,
	})
}
